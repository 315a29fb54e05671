"""What the emulator is fed, shaped so that no output can make it allocate without
bound. Sans-IO.

avt's binding returns, from each ``feed_str`` call, every row that left the
scrollback during that call, as Python objects: 64 KiB of newlines is 64,000 rows at
once (137 MiB of peak RSS measured), and 15 KB of ``x ESC [ 99999999 b`` (REP, repeat
the previous character) is 741,000 rows (1.5 GiB). So the text is fed in pieces of at
most :data:`PIECE` characters, each REP or SU (scroll up, which pushes rows into the
scrollback) alone in its piece with its count capped (REP at a row's width, as
curses uses it, SU at the screen's height, past which it only adds blank rows), and
a control sequence over :data:`MAX_SEQUENCE` characters (hostile: no terminal
sequence is that long) is dropped whole. A piece then moves at most about
``PIECE + rows`` rows out of the scrollback.

The shaping is invisible on real programs' output: DEL (which terminals ignore, and
avt would print) is removed, and nothing else changes but the counts above.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

PIECE = 1024
"""The most characters fed to the emulator in one call."""

MAX_SEQUENCE = 64
"""The longest unfinished control sequence held back for the next chunk; a longer one
is dropped, and the rest of it skipped when it arrives."""

# REP and SU, whatever their parameters (avt reads the first). A pattern with a
# literal start and no backtracking (``*+``): sre then skips to each ESC [ and gives
# up at once, 2 ms per MB of TUI output where ``(?:\x1b\[|\x9b)...`` took 8.
_AMPLIFIER = re.compile(r"\x1b\[([0-9;:]*+)([bS])")
_AMPLIFIER_C1 = re.compile(r"(?:\x1b\[|\x9b)([0-9;:]*+)([bS])")
"""The same with the 8-bit CSI (U+009B) too, used only when the text has one."""
# A control sequence that the text ends inside of (CSI, or a lone ESC).
_UNFINISHED = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z|\x1b\Z")
# The rest of a dropped sequence: parameters, intermediates, then its final byte.
_REST = re.compile(r"[0-?]*[ -/]*([@-~])?")


class FeedGuard:
    """Shapes the decoded text of one terminal for the emulator (see the module)."""

    def __init__(self) -> None:
        self._pending = ""
        self._skipping = False

    def pieces(self, text: str, cols: int, rows: int) -> Iterator[str]:
        """The pieces to feed for ``text`` on a ``cols`` x ``rows`` screen, in order."""
        if self._skipping:
            rest = _REST.match(text)
            assert rest is not None  # the pattern matches the empty string
            if rest.end() == len(text) and rest.group(1) is None:
                return  # still inside the dropped sequence
            self._skipping = False
            text = text[rest.end() :]
        if self._pending:
            text, self._pending = self._pending + text, ""
        if "\x7f" in text:
            text = text.replace("\x7f", "")
        # A sequence's parameters hold no ESC: one the text ends inside starts at the
        # last ESC (or 8-bit CSI).
        last = max(text.rfind("\x1b"), text.rfind("\x9b"))
        unfinished = _UNFINISHED.match(text, last) if last >= 0 else None
        if unfinished is not None:
            text = text[: unfinished.start()]
            if len(unfinished.group()) <= MAX_SEQUENCE:
                self._pending = unfinished.group()
            else:
                self._skipping = True
        yield from self._split(text, cols, rows)

    @staticmethod
    def _split(text: str, cols: int, rows: int) -> Iterator[str]:
        start = 0
        amplifier = _AMPLIFIER_C1 if "\x9b" in text else _AMPLIFIER
        for match in amplifier.finditer(text):
            yield from _slices(text, start, match.start())
            params, final = match.group(1, 2)
            digits = params.replace(":", ";").split(";", 1)[0]
            count = int(digits) if digits and len(digits) <= 7 else (1 if not digits else 10**7)
            cap = cols if final == "b" else rows
            yield f"\x1b[{max(1, min(count, cap))}{final}"
            start = match.end()
        yield from _slices(text, start, len(text))


def _slices(text: str, start: int, end: int) -> Iterator[str]:
    for at in range(start, end, PIECE):
        yield text[at : min(at + PIECE, end)]
