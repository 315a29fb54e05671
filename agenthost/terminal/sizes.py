"""Whose size a terminal takes when several clients of different sizes watch it. Sans-IO.

The policy is tmux's ``window-size latest``: the terminal takes the size of the client
that most recently resized or typed. A client that only watches never shrinks the
screen of the one who works in it; when the typist leaves, the size stays until
another client acts. A fixed size (``--size COLSxROWS``) ignores clients.
"""

from __future__ import annotations

import re
from typing import Final

from agenthost.errors import ConfigError
from agenthost.names import TERMINAL_COLS

DEFAULT_SIZE: Final = (80, 24)
"""The terminal's size until a client tells its own."""

MAX_CELLS: Final = TERMINAL_COLS[1]
"""Columns or rows at most."""

_SIZE = re.compile(r"([0-9]{1,4})x([0-9]{1,4})")


def parse_size(text: str) -> tuple[int, int]:
    """``COLSxROWS`` (e.g. ``120x40``) as ``(cols, rows)``; ConfigError otherwise."""
    match = _SIZE.fullmatch(text.strip().lower())
    cols, rows = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not (2 <= cols <= MAX_CELLS and 1 <= rows <= MAX_CELLS):
        raise ConfigError(
            f"not a terminal size: {text!r}",
            hint=f"COLSxROWS, e.g. 120x40 (2 to {MAX_CELLS} columns, 1 to {MAX_CELLS} rows)",
        )
    return cols, rows


def format_size(size: tuple[int, int]) -> str:
    """``(cols, rows)`` as ``COLSxROWS`` (what :func:`parse_size` reads)."""
    return f"{size[0]}x{size[1]}"


class SizePolicy:
    """The terminal's size from its clients' requests (see the module docstring)."""

    __slots__ = ("fixed", "size", "_sizes", "_latest")

    def __init__(self, fixed: tuple[int, int] | None = None) -> None:
        self.fixed = fixed
        self.size: tuple[int, int] = fixed or DEFAULT_SIZE
        self._sizes: dict[object, tuple[int, int]] = {}
        self._latest: object | None = None

    def request(self, client: object, cols: int, rows: int) -> tuple[int, int] | None:
        """``client`` says its terminal is ``cols`` x ``rows``: the new size of the
        terminal if it changes, else None."""
        self._sizes[client] = (cols, rows)
        return self._follow(client)

    def touch(self, client: object) -> tuple[int, int] | None:
        """``client`` typed: the terminal takes its size, if it told one."""
        return self._follow(client)

    def leave(self, client: object) -> None:
        """``client`` is gone; the size stays until another client acts."""
        self._sizes.pop(client, None)
        if self._latest is client:
            self._latest = None

    def _follow(self, client: object) -> tuple[int, int] | None:
        size = self._sizes.get(client)
        if size is None:
            return None
        self._latest = client
        if self.fixed is not None or size == self.size:
            return None
        self.size = size
        return size
