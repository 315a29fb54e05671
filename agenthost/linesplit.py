"""Split an agent's output byte stream into lines, bounding line length. Sans-IO.

An agent may print a line of any length (a 50 MB minified file, a binary blob). The
splitter never buffers more than ``max_line`` bytes: a longer line is cut into
:class:`Fragment` pieces of at most ``max_line`` bytes, each cut placed on a UTF-8
character boundary, so nothing is lost and decoding never splits a character.
"""

from __future__ import annotations

from typing import Final

_CONT_MASK: Final = 0xC0
_CONT_BITS: Final = 0x80


class Fragment(bytes):
    """A piece of an over-long line; more of the same line follows."""

    __slots__ = ()


def _cut_point(buf: bytes | bytearray | memoryview, limit: int) -> int:
    """Largest cut <= limit that does not split a UTF-8 sequence (never 0)."""
    cut = limit
    # back off over at most 3 continuation bytes to the start of the character
    while cut > limit - 3 and cut > 1 and (buf[cut] & _CONT_MASK) == _CONT_BITS:
        cut -= 1
    if (buf[cut] & _CONT_MASK) == _CONT_BITS:
        return limit  # not UTF-8 anyway: cut anywhere
    return cut


class LineSplitter:
    """Feed bytes, get complete lines (``bytes``) and over-long pieces (``Fragment``).

    The newline and one trailing ``\\r`` are removed from complete lines. Call
    :meth:`flush` at end of stream for a last line without a newline.
    """

    __slots__ = ("max_line", "_pending")

    def __init__(self, max_line: int = 1 << 20) -> None:
        if max_line < 4:
            raise ValueError("max_line must be at least 4")
        self.max_line = max_line
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Lines completed by ``data``, in order; Fragment items are partial lines."""
        if self._pending:
            self._pending += data
            data = bytes(self._pending)
            self._pending.clear()
        lines = data.split(b"\n")
        tail = lines.pop()
        limit = self.max_line
        out: list[bytes] = []
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if len(line) <= limit:
                out.append(line)
            else:
                out.extend(self._cut(line))
        if len(tail) > limit:
            pieces = self._cut(tail)
            self._pending += pieces.pop()
            out.extend(pieces)
        else:
            self._pending += tail
        return out

    def flush(self) -> list[bytes]:
        """The last, unterminated line (if any)."""
        if not self._pending:
            return []
        line = bytes(self._pending)
        self._pending.clear()
        if line[-1:] == b"\r":
            line = line[:-1]
        if len(line) <= self.max_line:
            return [line]
        return self._cut(line)

    def _cut(self, line: bytes) -> list[bytes]:
        """Cut ``line`` into Fragments of at most max_line bytes, then the rest.

        The rest (at most max_line bytes) is plain bytes: the end of a complete line,
        or, from :meth:`feed`, the pending start of a line that continues.
        """
        limit = self.max_line
        out: list[bytes] = []
        pos = 0
        while len(line) - pos > limit:
            cut = _cut_point(memoryview(line)[pos:], limit)
            out.append(Fragment(line[pos : pos + cut]))
            pos += cut
        out.append(line[pos:])
        return out
