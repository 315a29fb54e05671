"""The screen of a terminal agent, kept by a headless terminal emulator. Sans-IO.

(Interim: the emulator is chosen by measurement in docs/performance.md.)
"""

from __future__ import annotations

import codecs
from typing import Any

import avt


class Screen:
    """What a terminal of ``cols`` x ``rows`` shows after the bytes fed to it."""

    def __init__(self, cols: int, rows: int, scrollback: int = 1000) -> None:
        self._vt = avt.Vt(cols, rows, scrollback)  # type: ignore[attr-defined]
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    @property
    def size(self) -> tuple[int, int]:
        """``(cols, rows)``."""
        cols, rows = self._vt.size
        return cols, rows

    def feed(self, data: bytes) -> None:
        """Paint ``data``, bytes the program wrote."""
        text = self._decoder.decode(data)
        if text:
            self._vt.feed_str(text)

    def resize(self, cols: int, rows: int) -> None:
        """The terminal is now ``cols`` x ``rows``."""
        self._vt.resize(cols, rows)

    def lines(self) -> list[str]:
        """The visible rows as text, trailing spaces removed."""
        return [line.text.rstrip() for line in self._vt.view()]

    def all_lines(self) -> list[str]:
        """The lines scrolled off (as many as the scrollback keeps), then the screen's."""
        return [line.text.rstrip() for line in self._vt.lines()]

    def cursor(self) -> tuple[int, int, bool]:
        """``(col, row, visible)``."""
        cursor = self._vt.cursor
        return cursor.col, cursor.row, cursor.visible

    def snapshot(self, offset: int) -> dict[str, Any]:
        """The ``screen`` object of the protocol as of ``offset``."""
        cols, rows = self.size
        col, row, visible = self.cursor()
        return {
            "offset": offset,
            "cols": cols,
            "rows": rows,
            "cursor": {"col": col, "row": row, "visible": visible},
            "lines": self.lines(),
            "dump": self._vt.dump().replace("\x9b", "\x1b["),
            "alternate": False,
            "title": None,
        }
