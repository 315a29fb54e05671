"""agenthost.jsontext: the same values and bytes as the standard library's json."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost import jsontext
from agenthost.wire.codec import to_utf8

STD_DECODER = json.JSONDecoder(parse_constant=lambda _name: None)


def std_dumps(value: Any) -> bytes:
    return to_utf8(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False))


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_float(v) for v in value)
    return False


def same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN and -0.0 told from 0.0 (a float is a float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # any size: orjson reads beyond 64 bits as floats
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats()  # NaN and infinities too
    | st.text()  # lone surrogates included
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_dumps_gives_the_standard_library_bytes_or_refuses_as_it_does(value: Any) -> None:
    try:
        expected = std_dumps(value)
    except ValueError:
        with pytest.raises(ValueError):
            jsontext.dumps(value)
        return
    data = jsontext.dumps(value)
    if has_float(value):  # an exponent may be spelled 1e-7 for 1e-07: the same number
        assert same(json.loads(data), json.loads(expected))
    else:
        assert data == expected


@settings(max_examples=400, deadline=None)
@given(values)
def test_loads_reads_what_the_standard_library_reads(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)  # NaN, Infinity and surrogates too
    assert same(jsontext.loads(text), STD_DECODER.decode(text))


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890",
        "-9999999999999999999",
        "18446744073709551616",
        "[1e400, -1e400, NaN, Infinity, -Infinity]",
        '"\\ud800 half an emoji"',
        '{"a": 1, "a": 2}',
        "  [1, 2.50, -0.0]  ",
        "[" * 3000 + "]" * 3000,
    ],
)
def test_loads_corners_as_the_standard_library(text: str) -> None:
    try:
        expected = STD_DECODER.decode(text)
    except RecursionError:
        with pytest.raises(RecursionError):
            jsontext.loads(text)
        return
    assert same(jsontext.loads(text), expected)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.binary().map(lambda b: b.decode("latin-1")))
def test_loads_garbage_fails_as_the_standard_library(text: str) -> None:
    try:
        expected = STD_DECODER.decode(text)
    except ValueError:
        with pytest.raises(ValueError):
            jsontext.loads(text)
        return
    assert same(jsontext.loads(text), expected)


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"x": math.nan},
        {"x": [math.inf]},
        {"x": None, "y": -math.inf},
    ],
)
def test_dumps_refuses_nan_and_infinity(value: Any) -> None:
    with pytest.raises(ValueError):
        jsontext.dumps(value)


@pytest.mark.parametrize("value", [{"x": Point(1)}, {"x": datetime.now(UTC)}, {"x": object()}])
def test_dumps_refuses_what_json_cannot_hold(value: Any) -> None:
    with pytest.raises(TypeError):
        jsontext.dumps(value)


def test_dumps_keys_that_are_not_strings_and_big_integers_as_the_standard_library() -> None:
    value = {1: 2**70, "s": "\ud83d", "n": None}
    assert (
        jsontext.dumps(value)
        == std_dumps(value)
        == b'{"1":1180591620717411303424,"s":"\xef\xbf\xbd","n":null}'
    )


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_dumps_text_gives_the_standard_library_bytes_or_its_error(text: str) -> None:
    try:
        expected = json.dumps(text, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate
        with pytest.raises(UnicodeEncodeError):
            jsontext.dumps_text(text)
        return
    assert jsontext.dumps_text(text) == expected
