"""A terminal's bytes as stream events, and back. Sans-IO.

What a program writes to its terminal is bytes, mostly UTF-8. A ``terminal`` event
carries them as ``data`` (a JSON string) when they are valid UTF-8, which keeps the
journal readable and costs a client no decoding, else as ``data_b64``. So that a
character is never cut in two by a read's boundary (and its chunk sent as base64 for
that), :class:`Utf8Chunker` holds back an incomplete UTF-8 sequence at a chunk's end
(at most 3 bytes) until the bytes that complete it arrive, or the end.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, Final

from agenthost.errors import ProtocolError

CHUNK_LIMIT: Final = 64 << 10
"""Bytes of one ``terminal`` event at most."""


def _incomplete_tail(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 sequence they do not finish
    (0 to 3): a lead byte followed by fewer continuation bytes than it announces."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back
            continue
        if byte >= 0xF0:
            need = 4
        elif byte >= 0xE0:
            need = 3
        elif byte >= 0xC0:
            need = 2
        else:
            return 0  # ASCII: complete
        return back if back < need and byte <= 0xF4 else 0
    return 0


class Utf8Chunker:
    """Cuts a terminal's byte stream into chunks of at most :data:`CHUNK_LIMIT` bytes
    that never end inside a UTF-8 sequence (unless the bytes are not UTF-8 anyway)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The chunks to publish for ``data`` (bytes just read), possibly none."""
        if self._held:
            data, self._held = self._held + data, b""
        keep = _incomplete_tail(data)
        if keep:
            data, self._held = data[:-keep], data[-keep:]
        return _cut(data)

    def flush(self) -> list[bytes]:
        """What is held back, at the end of the stream."""
        held, self._held = self._held, b""
        return [held] if held else []


def _cut(data: bytes) -> list[bytes]:
    if len(data) <= CHUNK_LIMIT:
        return [data] if data else []
    chunks = []
    start = 0
    while start < len(data):
        end = min(start + CHUNK_LIMIT, len(data))
        if end < len(data):
            end -= _incomplete_tail(data[start:end])
        chunks.append(data[start:end])
        start = end
    return chunks


def term_fields(chunk: bytes) -> dict[str, str]:
    """The fields of a ``terminal`` event for ``chunk``: ``data`` or ``data_b64``."""
    try:
        return {"data": chunk.decode()}
    except UnicodeDecodeError:
        return {"data_b64": base64.b64encode(chunk).decode("ascii")}


_PLAIN: Final = bytes(b for b in range(0x20, 0x100) if b not in b'"\\')
"""Bytes a JSON string holds as they are (``bytes.translate`` deletes them)."""

_ESCAPES: Final = {
    **{b: b"\\u%04x" % b for b in range(0x20)},
    0x08: b"\\b",
    0x09: b"\\t",
    0x0A: b"\\n",
    0x0C: b"\\f",
    0x0D: b"\\r",
    0x22: b'\\"',
}
"""What the json module writes for the other bytes, except the backslash (first)."""

_USUAL_BYTES: Final = b'\x1b\r\n"\\'
_USUAL: Final = tuple(b for b in _USUAL_BYTES if b != 0x5C)


def json_text(chunk: bytes) -> bytes | None:
    """``chunk`` inside the quotes of a JSON string, byte for byte what ``json.dumps``
    (``ensure_ascii=False``) writes for ``chunk.decode()`` there, encoded as UTF-8; None
    when ``chunk`` is not UTF-8 (it then travels as ``data_b64``).

    The hot path of a flooding terminal: no dumping of a dict, and for the usual
    output (a few bytes to escape per line: ESC, CR, LF) no encoding back from str,
    only one ``bytes.replace`` per distinct byte to escape.
    """
    text = None
    if not chunk.isascii():
        try:
            text = chunk.decode()
        except UnicodeDecodeError:
            return None
    special = chunk.translate(None, _PLAIN)
    if not special:
        return chunk
    if len(special) > len(chunk) >> 3:
        # dense (`yes`: every other byte a CR or LF): one pass of json's C escaper
        # costs less than a replace per distinct byte over that many places
        text = chunk.decode() if text is None else text
        return encode_basestring(text)[1:-1].encode()
    if b"\\" in special:
        chunk = chunk.replace(b"\\", b"\\\\")
    # the usual ones by name (a set of a flood's every CR and LF would cost more than
    # the replacing), then whatever else there is
    for byte in _USUAL:
        if byte in special:
            chunk = chunk.replace(bytes((byte,)), _ESCAPES[byte])
    rare = special.translate(None, _USUAL_BYTES)
    for byte in set(rare):
        chunk = chunk.replace(bytes((byte,)), _ESCAPES[byte])
    return chunk


def event_bytes(event: Mapping[str, Any]) -> bytes:
    """The bytes a ``terminal`` event carries (a client's side of :func:`term_fields`).

    Raise ProtocolError when it carries neither field or a malformed one.
    """
    data = event.get("data")
    if isinstance(data, str):
        return data.encode("utf-8", "replace")
    coded = event.get("data_b64")
    if isinstance(coded, str):
        try:
            return base64.b64decode(coded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProtocolError(f"a terminal event's data_b64 is not base64: {exc}") from exc
    raise ProtocolError("a terminal event without data or data_b64")


def input_bytes(data: str | None, data_b64: str | None) -> bytes:
    """The bytes of a ``host.input`` request (its model checked that one is given).

    Raise ProtocolError for ``data_b64`` that is not base64.
    """
    if data is not None:
        return data.encode("utf-8", "replace")  # a lone surrogate cannot be typed
    return event_bytes({"data_b64": data_b64})
