"""A terminal's bytes as events and back (agenthost.terminal.chunks), and the size
policy (agenthost.terminal.sizes): in memory."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.errors import ConfigError, ProtocolError
from agenthost.terminal.chunks import (
    CHUNK_LIMIT,
    Utf8Chunker,
    event_bytes,
    input_bytes,
    term_fields,
)
from agenthost.terminal.sizes import DEFAULT_SIZE, SizePolicy, format_size, parse_size


def feed_all(pieces: list[bytes]) -> list[bytes]:
    chunker = Utf8Chunker()
    out = [chunk for piece in pieces for chunk in chunker.feed(piece)]
    return out + chunker.flush()


@given(st.text(max_size=400), st.lists(st.integers(min_value=0, max_value=2000), max_size=8))
def test_utf8_text_cut_anywhere_comes_out_whole_and_in_order(text: str, cuts: list[int]) -> None:
    data = text.encode()
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    chunks = feed_all(pieces)
    assert b"".join(chunks) == data
    for chunk in chunks:
        assert chunk and len(chunk) <= CHUNK_LIMIT
        assert "data" in term_fields(chunk)  # valid UTF-8: never base64


@given(st.binary(max_size=600), st.lists(st.integers(min_value=0, max_value=600), max_size=8))
def test_any_bytes_come_out_byte_for_byte(data: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    chunks = feed_all(pieces)
    assert b"".join(chunks) == data
    assert b"".join(event_bytes(term_fields(c)) for c in chunks) == data


def test_a_character_cut_by_a_read_waits_for_its_rest() -> None:
    chunker = Utf8Chunker()
    euro = "\u20ac".encode()
    assert chunker.feed(b"a" + euro[:1]) == [b"a"]
    assert chunker.feed(euro[1:2]) == []
    assert chunker.feed(euro[2:] + b"b") == [euro + b"b"]
    assert chunker.flush() == []


def test_a_cut_character_at_the_end_goes_out_as_it_is() -> None:
    chunker = Utf8Chunker()
    assert chunker.feed(b"x\xf0\x9f") == [b"x"]
    assert chunker.flush() == [b"\xf0\x9f"]
    assert term_fields(b"\xf0\x9f") == {"data_b64": base64.b64encode(b"\xf0\x9f").decode()}


def test_big_reads_are_cut_below_the_limit_between_characters() -> None:
    data = ("ab\u20ac" * 40_000).encode()  # 200 KB, characters of 1 and 3 bytes
    chunks = feed_all([data])
    assert b"".join(chunks) == data and len(chunks) == 4
    assert all(len(c) <= CHUNK_LIMIT and c.decode() for c in chunks)


def test_invalid_bytes_and_stray_continuations_are_not_held() -> None:
    chunker = Utf8Chunker()
    assert chunker.feed(b"\x80\x80") == [b"\x80\x80"]  # no lead byte: nothing to wait for
    assert chunker.feed(b"\xff") == [b"\xff"]
    assert chunker.feed(b"\xf8\x88") == [b"\xf8\x88"]  # not a UTF-8 lead byte


@pytest.mark.parametrize(
    "event",
    [{}, {"data": None}, {"data_b64": "%%%"}, {"data_b64": 5}, {"data_b64": "YQ"}],
)
def test_garbage_terminal_events_are_protocol_errors(event: dict[str, object]) -> None:
    with pytest.raises(ProtocolError):
        event_bytes(event)


def test_input_bytes() -> None:
    assert input_bytes("h\u00e9\r", None) == "h\u00e9\r".encode()
    assert input_bytes(None, base64.b64encode(b"\x1b[A\xff").decode()) == b"\x1b[A\xff"
    assert input_bytes("\ud800", None) == b"?"  # a lone surrogate cannot be typed
    with pytest.raises(ProtocolError):
        input_bytes(None, "not base64!")


@pytest.mark.parametrize(
    ("text", "size"), [("80x24", (80, 24)), (" 120X40 ", (120, 40)), ("2x1", (2, 1))]
)
def test_parse_size(text: str, size: tuple[int, int]) -> None:
    assert parse_size(text) == size
    assert parse_size(format_size(size)) == size


@pytest.mark.parametrize(
    "text",
    ["", "80", "80x", "x24", "1x24", "80x0", "1001x24", "80x1001", "-80x24", "80*24", "８0x24"],
)
def test_garbage_sizes_are_refused_with_the_form(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_size(text)
    assert caught.value.hint is not None and "COLSxROWS" in caught.value.hint


def test_the_latest_client_to_act_sets_the_size() -> None:
    policy = SizePolicy()
    a, b = object(), object()
    assert policy.size == DEFAULT_SIZE
    assert policy.touch(a) is None  # typed, but never told its size: nothing changes
    assert policy.request(a, 100, 30) == (100, 30)
    assert policy.request(b, 120, 40) == (120, 40)
    assert policy.request(b, 120, 40) is None  # no change: nothing to do
    assert policy.touch(a) == (100, 30)
    policy.leave(a)
    assert policy.size == (100, 30)  # stays until another client acts
    assert policy.touch(a) is None  # gone: forgotten
    assert policy.touch(b) == (120, 40)


def test_a_fixed_size_ignores_everyone() -> None:
    policy = SizePolicy(fixed=(90, 20))
    client = object()
    assert policy.request(client, 120, 40) is None and policy.touch(client) is None
    assert policy.size == (90, 20)
