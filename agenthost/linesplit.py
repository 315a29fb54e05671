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
        self._pending = b""  # the start of a line, never more than max_line bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Lines completed by ``data``, in order; Fragment items are partial lines."""
        if self._pending:
            data = self._pending + data
        if b"\r" in data:
            # one CR before each newline goes; a CR at the end of the chunk stays in the
            # tail, and its newline (next chunk) meets it there
            data = data.replace(b"\r\n", b"\n")
        lines = data.split(b"\n")
        tail = lines.pop()
        limit = self.max_line
        if len(tail) > limit:
            pieces = self._cut(tail)
            tail = pieces.pop()
        else:
            pieces = []
        self._pending = tail
        # The hot path: a chunk of lines that all fit is returned as split, with no
        # loop over its lines in Python (a flooding agent prints thousands per read).
        if len(data) > limit and max(map(len, lines), default=0) > limit:
            lines = self._cut_long(lines)
        if pieces:
            lines.extend(pieces)
        return lines

    def flush(self) -> list[bytes]:
        """The last, unterminated line (if any)."""
        line = self._pending
        if not line:
            return []
        self._pending = b""
        return [line[:-1] if line[-1:] == b"\r" else line]  # (at most max_line bytes)

    def _cut_long(self, lines: list[bytes]) -> list[bytes]:
        """Complete lines, those over max_line cut into Fragments (see :meth:`_cut`)."""
        limit = self.max_line
        out: list[bytes] = []
        for line in lines:
            if len(line) <= limit:
                out.append(line)
            else:
                out.extend(self._cut(line))
        return out

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
