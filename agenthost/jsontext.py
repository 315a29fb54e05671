"""JSON text to values and back on the event path: orjson where it gives what the
standard library gives, the standard library where it would not.

A structured agent's every stdout line is decoded and most become an event that is
encoded again; with the standard library's ``json`` that was about half the host's CPU
per line. orjson does both several times faster. It differs from the standard library
in a few corners, and each takes the standard library's path, so that the values read
and the bytes written stay the same:

* reading: NaN and Infinity (read as null here), numbers out of a double's range, lone
  surrogates, nesting deeper than orjson's limit: orjson refuses them; integers of 19
  digits or more: orjson may read them as floats, so they are not given to it at all;
* writing: NaN and Infinity (orjson writes null where the standard library refuses:
  any ``null`` in orjson's output is checked again), keys that are not strings,
  integers beyond 64 bits, objects of other types (orjson refuses them).

Floats written with an exponent may be spelled differently (``1e-7`` for ``1e-07``):
the same number.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any, Final

import orjson

from agenthost.wire.codec import to_utf8

# bytes.translate and a substring search: a regular expression such as \d{19} cost
# several times orjson's whole decoding of a line
_DIGITS_ONLY: Final = bytes(c if 0x30 <= c <= 0x39 else 0x20 for c in range(256)).replace(
    b"123456789", b"000000000"
)
_LONG_NUMBER: Final = b"0" * 19

_STD_DECODER: Final = json.JSONDecoder(parse_constant=lambda _name: None)
_STD_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# dataclasses and datetimes stay errors, as the standard library has them
_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def loads(text: str) -> Any:
    """The value of a JSON text; NaN and Infinity read as null.

    Raise ValueError (or RecursionError) for a text that is not JSON, as ``json.loads``.
    """
    data = text.encode("utf-8", "surrogatepass")
    if _LONG_NUMBER not in data.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # not JSON, or a corner orjson refuses: the standard library decides
    return _STD_DECODER.decode(text)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value`` (no spaces, non-ASCII as is), the bytes of
    ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``; lone surrogates
    become U+FFFD.

    Raise ValueError for NaN or Infinity, TypeError for what JSON cannot hold.
    """
    try:
        data = orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return to_utf8(_STD_ENCODER.encode(value))
    if b"null" in data:  # a None, or a NaN orjson wrote as null: only the former is JSON
        return to_utf8(_STD_ENCODER.encode(value))
    return data


def dumps_text(text: str) -> bytes:
    """The JSON string of ``text`` in UTF-8, the bytes of ``json.dumps(text,
    ensure_ascii=False)``. Raise UnicodeEncodeError (a ValueError) for a lone surrogate.
    """
    try:
        return orjson.dumps(text)
    except orjson.JSONEncodeError:  # a lone surrogate: the standard library's error
        return encode_basestring(text).encode()
