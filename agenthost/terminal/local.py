"""What a pass-through attach writes to its own terminal around the agent's bytes.
Sans-IO.

Before a snapshot's ``dump`` it resets the terminal (:data:`PAINT_PRELUDE`: the dump
paints a fresh terminal). On the way out it undoes what the agent may have left on:
:func:`leave_sequence`. Whether the local terminal shows its alternate screen is known
from the bytes written to it since that reset (:class:`AlternateScreen`): leaving it
restores the screen and cursor from before; not being on it, the same sequence would
move the cursor to wherever a save left it, so it is sent only when needed.
"""

from __future__ import annotations

import re
from typing import Final

PAINT_PRELUDE: Final = b"\x1bc"
"""RIS, a full reset: what a snapshot's ``dump`` is painted after."""

_LEAVE_ALTERNATE: Final = b"\x1b[?1049l"

# In this order: show what a synchronized update holds back; reset the scroll region
# (DECSTBM homes the cursor: saved and restored around it) and the attributes and
# character set; then, after the screen, the modes the user's shell does not expect.
_BEFORE: Final = b"\x1b[?2026l\x1b7\x1b[r\x1b8\x1b[0m\x1b(B\x0f"
_AFTER: Final = (
    b"\x1b[?25h"  # cursor shown
    b"\x1b[0 q"  # the cursor's default shape
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l"  # mouse
    b"\x1b[?1004l"  # focus events
    b"\x1b[?2004l"  # bracketed paste
    b"\x1b[?1l\x1b>"  # normal cursor keys and keypad
    b"\x1b[?7h"  # lines wrap again
    b"\x1b[>4;0m"  # xterm's modifyOtherKeys off
    b"\x1b[<99u"  # kitty's keyboard protocol: pop what the agent pushed
)


def leave_sequence(alternate: bool) -> bytes:
    """The bytes that give the terminal back to the user's shell (``alternate``:
    whether it shows its alternate screen now)."""
    return _BEFORE + (_LEAVE_ALTERNATE if alternate else b"") + _AFTER


_SWITCH: Final = re.compile(rb"\x1bc|\x1b\[\?([0-9;]*)([hl])", re.ASCII)
_ALTERNATE_MODES: Final = frozenset({b"47", b"1047", b"1049"})
_TAIL: Final = 32  # bytes kept to see a sequence cut between two writes


class AlternateScreen:
    """Whether a terminal shows its alternate screen, from the bytes written to it."""

    __slots__ = ("on", "_tail")

    def __init__(self) -> None:
        self.on = False
        self._tail = b""

    def feed(self, data: bytes) -> None:
        """Take bytes written to the terminal."""
        if b"\x1b" not in data and b"\x1b" not in self._tail:
            self._tail = b""
            return
        seen = len(self._tail)
        buffer = self._tail + data
        for match in _SWITCH.finditer(buffer):
            if match.end() <= seen:
                continue  # taken with the write before
            if match.group(2) is None:
                self.on = False  # a reset
            elif any(mode in _ALTERNATE_MODES for mode in match.group(1).split(b";")):
                self.on = match.group(2) == b"h"
        start = buffer.rfind(b"\x1b", max(0, len(buffer) - _TAIL))
        self._tail = buffer[start:] if start >= 0 else b""
