"""The screen of a terminal agent, kept by a headless terminal emulator. Sans-IO.

The emulator is avt (asciinema's virtual terminal, Rust, through the ``pyavt``
binding), chosen by measurement against pyte, pyghostty and par-term-emu-core-rust
(docs/performance.md, "Terminal emulators (issue 30)"): it shows what xterm.js shows
on every recording of vim, less, htop, tmux and a shell, it is the fastest and the
smallest, and its dump is the one asciinema uses to start a viewer of a live stream.
The modes it does not report (mouse, bracketed paste, title, ...) are read by
:mod:`agenthost.terminal.modes` from the same text, and :mod:`agenthost.terminal.guard`
shapes what avt is fed so that its memory stays bounded.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import avt

from agenthost.terminal.guard import FeedGuard
from agenthost.terminal.modes import Modes

MAX_COLS = 1000
MAX_ROWS = 1000
"""The largest size kept (the protocol's bounds for host.resize); larger is clamped."""

# avt's dump is written for avt: CSI as the 8-bit C1 control (U+009B), which most
# terminals ignore inside UTF-8, and REP (CSI n b, repeat the previous character),
# which some do not implement. _portable rewrites both.
_TOKEN = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b[()*+].|\x1b.|[^\x1b\x9b]+", re.S)
_REP = re.compile(r"(?:\x1b\[|\x9b)([0-9]*)b\Z")


def _portable(dump: str, cols: int) -> str:
    """``dump`` with 7-bit CSIs and every REP written out (at most ``cols`` times);
    blanks repeated to a row's end are erased instead (``CSI K``), so that a client
    that reflows on a resize (xterm.js) does not take them for text and wrap them."""
    out: list[str] = []
    previous = ""
    tokens = [match.group() for match in _TOKEN.finditer(dump)]
    for index, token in enumerate(tokens):
        if token[0] not in "\x1b\x9b":
            out.append(token)
            previous = token[-1]
            continue
        rep = _REP.match(token)
        if rep is not None:
            count = min(int(rep.group(1) or "1"), cols)
            following = tokens[index + 1] if index + 1 < len(tokens) else "\r"
            if previous == " " and following[0] in "\r\n":
                out.append("\x1b[K")  # the row's end: with the pen's background
            else:
                out.append(previous * count)
        elif token[0] == "\x9b":
            out.append("\x1b[" + token[1:])
        else:
            out.append(token)
    return "".join(out)


def _clamp(value: int, top: int) -> int:
    return max(1, min(int(value), top))


class Screen:
    """What a terminal of ``cols`` x ``rows`` shows after the bytes fed to it, with
    up to ``scrollback`` rows kept above the visible ones. Sizes are clamped to
    1..:data:`MAX_COLS` and 1..:data:`MAX_ROWS`."""

    def __init__(self, cols: int, rows: int, scrollback: int = 1000) -> None:
        cols, rows = _clamp(cols, MAX_COLS), _clamp(rows, MAX_ROWS)
        # avt re-exports Vt without `as`, which strict mypy does not count as public.
        self._vt = avt.Vt(cols, rows, max(0, scrollback))  # type: ignore[attr-defined]
        # Output is bytes, avt takes text: decode as a terminal does, an invalid
        # sequence becoming U+FFFD, and a character cut between chunks kept whole.
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._modes = Modes()
        self._guard = FeedGuard()

    @property
    def size(self) -> tuple[int, int]:
        """``(cols, rows)``."""
        cols, rows = self._vt.size
        return cols, rows

    def feed(self, data: bytes) -> None:
        """Paint ``data``, bytes the program wrote (any bytes: never raises)."""
        text = self._decoder.decode(data)
        if text:
            self._modes.feed(text)
            cols, rows = self.size
            for piece in self._guard.pieces(text, cols, rows):
                self._vt.feed_str(piece)  # its answer (rows changed and dropped) unused

    def resize(self, cols: int, rows: int) -> None:
        """The terminal is now ``cols`` x ``rows`` (clamped, see the class)."""
        self._vt.resize(_clamp(cols, MAX_COLS), _clamp(rows, MAX_ROWS))

    def lines(self) -> list[str]:
        """The visible rows as text, trailing spaces removed (a wide character is one
        character of the string)."""
        return [line.text.rstrip(" ") for line in self._vt.view()]

    def all_lines(self) -> list[str]:
        """The rows scrolled off (as many as the scrollback keeps), then the visible
        ones, as text with trailing spaces removed."""
        return [line.text.rstrip(" ") for line in self._vt.lines()]

    def cursor(self) -> tuple[int, int, bool]:
        """``(col, row, visible)``, 0-based. ``col`` is ``cols`` while a character
        written in the last column waits to wrap."""
        cursor = self._vt.cursor
        return cursor.col, cursor.row, cursor.visible

    @property
    def alternate(self) -> bool:
        """Whether the alternate screen is on."""
        return self._modes.alternate

    @property
    def title(self) -> str | None:
        """The window title the program set (OSC 0 or 2), or None."""
        return self._modes.title

    def dump(self) -> str:
        """Escape sequences that repaint this screen and its modes on a fresh terminal
        of this size: write them after a reset (``ESC c``)."""
        return _portable(self._vt.dump(), self.size[0]) + self._modes.dump()

    def snapshot(self, offset: int) -> dict[str, Any]:
        """The ``screen`` object of the protocol (1.7) as of ``offset``."""
        cols, rows = self.size
        col, row, visible = self.cursor()
        return {
            "offset": offset,
            "cols": cols,
            "rows": rows,
            "cursor": {"col": col, "row": row, "visible": visible},
            "lines": self.lines(),
            "dump": self.dump(),
            "alternate": self.alternate,
            "title": self.title,
        }
