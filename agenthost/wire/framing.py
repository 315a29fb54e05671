"""Newline-delimited framing with a size limit. Sans-IO."""

from __future__ import annotations

from agenthost.errors import FrameTooLarge

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

DEFAULT_FRAME_LIMIT: Final = 1 << 20
"""Longest request line a host accepts, in bytes, newline excluded (1 MiB)."""

CLIENT_FRAME_LIMIT: Final = 64 << 20
"""Longest line a client accepts; events can carry long agent output (64 MiB)."""


class FrameDecoder:
    """Split a byte stream into newline-terminated frames, enforcing a size limit.

    ``feed`` returns the complete frames (newline and a trailing ``\\r`` removed, blank
    lines skipped). A frame longer than ``max_frame`` bytes yields a
    :class:`~agenthost.errors.FrameTooLarge` item in place of the frame; the decoder is
    then closed and every later ``feed`` returns nothing, because the rest of an
    oversized line cannot be told apart from the next frame.
    """

    __slots__ = ("_buf", "_scan", "_closed", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_FRAME_LIMIT) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf already searched for a newline
        self._closed = False

    @property
    def closed(self) -> bool:
        """True after an oversized frame: the stream cannot be resynchronised."""
        return self._closed

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes | FrameTooLarge]:
        """Add bytes; return the frames they complete, in order."""
        if self._closed:
            return []
        buf = self._buf
        buf += data
        out: list[bytes | FrameTooLarge] = []
        start = 0
        find = buf.find
        limit = self.max_frame
        while True:
            nl = find(b"\n", max(start, self._scan))
            if nl < 0:
                break
            end = nl - 1 if nl > start and buf[nl - 1] == 0x0D else nl
            if end - start > limit:
                return self._overflow(out, end - start)
            if end > start:
                out.append(bytes(buf[start:end]))
            start = nl + 1
            self._scan = start
        if start:
            del buf[:start]
        self._scan = len(buf)
        if len(buf) > limit + 1:  # +1: a trailing '\r' may still be stripped
            return self._overflow(out, len(buf))
        return out

    def _overflow(self, out: list[bytes | FrameTooLarge], size: int) -> list[bytes | FrameTooLarge]:
        self._closed = True
        self._buf = bytearray()
        out.append(
            FrameTooLarge(
                f"frame of at least {size} bytes exceeds the limit of {self.max_frame} bytes"
            )
        )
        return out
