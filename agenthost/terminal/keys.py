"""The keys a pass-through attach keeps for itself. Sans-IO.

``agenthost attach`` on a terminal agent sends every key to the agent except one: the
detach key (Ctrl-] unless ``--detach-key`` or config.toml ``[attach] detach_key`` says
otherwise), and with ``--read-only`` also Ctrl-C. :func:`parse_detach_key` reads the
key's name; :class:`KeyScanner` finds such a key in what the local terminal sent.

A key may arrive as its control byte, or encoded by a keyboard protocol the agent
turned on in the local terminal through the pass-through (kitty's ``CSI 93;5u``,
xterm's modifyOtherKeys ``CSI 27;5;93~``): both are recognised, so that an agent
cannot take the way out away by switching the keyboard's mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

DEFAULT_DETACH_KEY: Final = "ctrl-]"

# Control keys that cannot detach: what a terminal sends for them is also Enter, Tab,
# Backspace or Escape (ctrl-m, ctrl-i, ctrl-h, ctrl-j, ctrl-[), or what the line attach
# keeps for itself (ctrl-c interrupts, ctrl-d on an empty line detaches already).
_REFUSED: Final = {
    "c": "Ctrl-C interrupts the agent",
    "d": "Ctrl-D is end of input",
    "h": "a terminal sends it for Backspace",
    "i": "a terminal sends it for Tab",
    "j": "a terminal sends it for Enter (line feed)",
    "m": "a terminal sends it for Enter",
    "[": "a terminal sends it for Escape",
}
_PREFIXES: Final = ("ctrl-", "ctrl+", "control-", "c-", "^")
_CHARS: Final = "abcdefghijklmnopqrstuvwxyz[\\]^_@"


@dataclass(frozen=True, slots=True)
class ControlKey:
    """A Ctrl+character key: its ``char`` (a lowercase letter or one of ``\\]^_@``)."""

    char: str

    @property
    def name(self) -> str:
        """How it is written: ``ctrl-]``."""
        return f"ctrl-{self.char}"

    @property
    def byte(self) -> int:
        """The control byte a terminal sends for it (Ctrl-] is 0x1d)."""
        return ord(self.char.upper()) & 0x1F

    @property
    def codepoint(self) -> int:
        """The key's own character, as keyboard protocols number it (``]`` is 93)."""
        return ord(self.char)

    @property
    def prompt_key(self) -> str:
        """Its name for prompt_toolkit (``c-]``), for the line attach."""
        return f"c-{self.char}"

    @property
    def label(self) -> str:
        """How a person reads it: ``Ctrl-]``, ``Ctrl-Q``."""
        return f"Ctrl-{self.char.upper()}"


CTRL_C: Final = ControlKey("c")


def parse_detach_key(text: str) -> ControlKey:
    """The key named by ``text``: ``ctrl-]``, ``ctrl-q``, ``C-q``, ``^Q`` (any case).

    Raise ValueError saying what is accepted for anything else, and for keys a terminal
    also sends for Enter, Tab, Backspace or Escape, or that attach already uses.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a key name like ctrl-] or ctrl-q")
    word = text.strip().lower()
    for prefix in _PREFIXES:
        if word.startswith(prefix) and len(word) == len(prefix) + 1:
            char = word[-1]
            break
    else:
        raise ValueError(
            f"{text!r} is not a key name like ctrl-] or ctrl-q "
            "(Ctrl and a letter, or one of \\ ] ^ _ @)"
        )
    if char not in _CHARS:
        raise ValueError(f"{text!r}: Ctrl-{char} sends no control character")
    if char in _REFUSED:
        raise ValueError(f"{text!r} cannot detach: {_REFUSED[char]}")
    return ControlKey(char)


# kitty's keyboard protocol: CSI code[:alternates] ; modifiers[:event] u
# xterm's modifyOtherKeys: CSI 27 ; modifiers ; code ~
# (numbers of at most 7 digits: a key's are small, and a long one is no key)
_ENCODED: Final = re.compile(
    rb"\x1b\[(?:(\d{1,7})(?::\d{0,7})*;(\d{1,7})(?::(\d{1,7}))?u|27;(\d{1,7});(\d{1,7})~)",
    re.ASCII,
)
_CTRL: Final = 4  # the modifier bit of Ctrl (value - 1)
_LOCKS: Final = 64 | 128  # Caps Lock and Num Lock: not modifiers a person pressed
_RELEASE: Final = 3  # kitty's event type of a key released


class KeyScanner:
    """Finds the first of ``keys`` in bytes a terminal sent (see the module)."""

    __slots__ = ("_bytes", "_codes")

    def __init__(self, keys: Iterable[ControlKey]) -> None:
        keys = list(keys)
        self._bytes = bytes(k.byte for k in keys)
        self._codes = frozenset(k.codepoint for k in keys)

    def scan(self, data: bytes) -> tuple[bytes, bool]:
        """``(before, found)``: the bytes before the first of the keys (all of
        ``data`` when there is none), and whether one was found."""
        first = len(data)
        for byte in self._bytes:
            at = data.find(byte)
            if 0 <= at < first:
                first = at
        if b"\x1b[" in data:
            for match in _ENCODED.finditer(data, 0, first):
                if self._pressed(match):
                    first = match.start()
                    break
        return data[:first], first < len(data)

    def _pressed(self, match: re.Match[bytes]) -> bool:
        if match.group(1) is not None:
            code, modifiers, event = match.group(1), match.group(2), match.group(3)
            if event is not None and int(event) == _RELEASE:
                return False
        else:
            modifiers, code = match.group(4), match.group(5)
        bits = int(modifiers) - 1
        return int(code) in self._codes and bits & ~_LOCKS == _CTRL
