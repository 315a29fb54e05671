"""The terminal modes a client needs to keep working, which the emulator does not
report: mouse tracking and its encoding, bracketed paste, focus events, the keypad's
application mode, synchronized output, the alternate screen, and the window title.
Sans-IO.

The emulator (avt) keeps the screen, the cursor, its visibility, the cursor keys'
mode, the scrolling region and the alternate screen's contents, and repaints them in
its dump; this scanner reads the same text for the rest, so that a client that starts
from a snapshot sends the program mouse reports, pastes and keys the way the program
asked for. It looks only at the few sequences it tracks (a regular expression over
the text, not a byte-by-byte parser), keeps at most :data:`MAX_PENDING` characters of
an unfinished sequence across chunks, and a title of at most :data:`MAX_TITLE`
characters: hostile output cannot make it grow.
"""

from __future__ import annotations

import re

MAX_PENDING = 4096
"""The longest unfinished sequence kept for the next chunk (a title being written):
longer, it is dropped, and the title stays what it was."""

MAX_TITLE = 1024
"""The longest title kept (a longer one is cut)."""

TRACKED = (1004, 1005, 1006, 1015, 1016, 2004, 2026, 66)
"""DEC private modes repainted as they are: focus events, the mouse encodings (UTF-8,
SGR, urxvt, SGR pixels), bracketed paste, synchronized output, keypad application."""

MOUSE = (9, 1000, 1001, 1002, 1003)
"""The mouse tracking modes: at most one is on (setting one turns the others off, as
in xterm)."""

ALTERNATE = (47, 1047, 1049)

# One complete sequence that we track: a DEC private mode set or reset (CSI ? Pm h/l),
# an OSC 0/1/2 (title) ended by BEL or ST, DECKPAM/DECKPNM (ESC = / ESC >), RIS
# (ESC c) and DECSTR (CSI ! p).
# One literal start, so that sre skips from ESC to ESC.
_SEQUENCE = re.compile(
    r"\x1b(?:"
    r"\[\?([0-9;:]{0,64})([hl])"
    r"|\]([012]);([^\x07\x1b]*+)(?:\x07|\x1b\\)"
    r"|([=>c])"
    r"|\[!p)"
)

# The start of a sequence we track that the chunk cut short: kept for the next chunk.
_UNFINISHED = re.compile(r"\x1b(?:\[(?:\?[0-9;:]{0,64}|!)?|\](?:[012](?:;[^\x07\x1b]*\x1b?)?)?)?\Z")


class Modes:
    """The modes set so far by the text fed (see the module's docstring)."""

    def __init__(self) -> None:
        self._pending = ""
        self.reset()

    def reset(self) -> None:
        """Back to a terminal's power-on modes (RIS), the title forgotten."""
        self.private: dict[int, bool] = {}
        self.mouse: int | None = None
        self.alternate = False
        self.title: str | None = None

    def soft_reset(self) -> None:
        """DECSTR: the modes a soft reset restores (not the screen, not the title)."""
        for mode in (2004, 1004, 66):
            self.private.pop(mode, None)

    def feed(self, text: str) -> None:
        """Read ``text`` (decoded output of the program, in order)."""
        if self._pending:
            text = self._pending + text
            self._pending = ""
        end = 0
        for match in _SEQUENCE.finditer(text):
            self._apply(match)
            end = match.end()
        # Only the last MAX_PENDING characters can hold a sequence worth keeping.
        unfinished = _UNFINISHED.search(text, max(end, len(text) - MAX_PENDING))
        if unfinished is not None:
            self._pending = unfinished.group()

    def _apply(self, match: re.Match[str]) -> None:
        params, action, osc, title, single = match.group(1, 2, 3, 4, 5)
        if action is not None:
            on = action == "h"
            for param in params.replace(":", ";").split(";"):
                if param.isdigit() and len(param) <= 5:
                    self._set(int(param), on)
        elif osc is not None:
            if osc in "02":  # 1 names the icon only
                self.title = title[:MAX_TITLE]
        elif single == "=":
            self.private[66] = True
        elif single == ">":
            self.private.pop(66, None)
        elif single == "c":
            self.reset()
        else:
            self.soft_reset()

    def _set(self, mode: int, on: bool) -> None:
        if mode in MOUSE:
            if on:
                self.mouse = mode
            elif self.mouse == mode:
                self.mouse = None
        elif mode in ALTERNATE:
            self.alternate = on
        elif mode in TRACKED:
            if on:
                self.private[mode] = True
            else:
                self.private.pop(mode, None)

    def dump(self) -> str:
        """Escape sequences that set these modes and the title on a fresh terminal
        (the alternate screen excepted: the emulator's dump switches to it)."""
        parts = []
        if self.mouse is not None:
            parts.append(f"\x1b[?{self.mouse}h")
        for mode in sorted(self.private):
            if mode == 66:
                parts.append("\x1b=")
            elif mode != 2026:
                parts.append(f"\x1b[?{mode}h")
        if self.title is not None:
            # A title is text: control characters could end the OSC early.
            safe = "".join(ch for ch in self.title if ch.isprintable())
            parts.append(f"\x1b]2;{safe}\x07")
        if self.private.get(2026):
            # Last: the frame being drawn continues in the bytes after the snapshot.
            parts.append("\x1b[?2026h")
        return "".join(parts)
