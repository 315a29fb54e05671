"""agenthost.protocol.FrameDecoder: NDJSON framing with a size limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.errors import ErrorCode, FrameTooLarge
from agenthost.protocol import DEFAULT_FRAME_LIMIT, FrameDecoder

HYPO = settings(max_examples=200, deadline=None)

# a frame: non-empty, no newline, not ending in "\r" (which the decoder strips)
frames_st = st.binary(min_size=1, max_size=60).filter(
    lambda b: b"\n" not in b and not b.endswith(b"\r")
)


def _chunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return pieces


def _feed_all(decoder: FrameDecoder, pieces: list[bytes]) -> list[bytes | FrameTooLarge]:
    out: list[bytes | FrameTooLarge] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    return out


@HYPO
@given(
    frames=st.lists(frames_st, max_size=30),
    cuts=st.lists(st.integers(min_value=0), max_size=40),
)
def test_any_chunking_gives_back_the_frames(frames: list[bytes], cuts: list[int]) -> None:
    data = b"".join(f + b"\n" for f in frames)
    decoder = FrameDecoder()
    out = _feed_all(decoder, _chunk(data, cuts))
    assert out == frames
    assert all(type(f) is bytes for f in out)
    assert decoder.pending == 0
    assert not decoder.closed


@HYPO
@given(
    frames=st.lists(frames_st, max_size=20),
    crlf=st.lists(st.booleans(), min_size=20, max_size=20),
    blanks=st.lists(st.sampled_from([b"", b"\n", b"\r\n", b"\n\n"]), min_size=20, max_size=20),
    cuts=st.lists(st.integers(min_value=0), max_size=30),
)
def test_crlf_stripped_and_blank_lines_skipped(
    frames: list[bytes], crlf: list[bool], blanks: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(
        blank + f + (b"\r\n" if cr else b"\n")
        for f, cr, blank in zip(frames, crlf, blanks, strict=False)
    )
    out = _feed_all(FrameDecoder(), _chunk(data, cuts))
    assert out == frames


@pytest.mark.parametrize(
    ("data", "frames"),
    [
        (b"", []),
        (b"\n", []),
        (b"\r\n", []),
        (b"\n\n\r\n\n", []),
        (b"a\n", [b"a"]),
        (b"a\r\n", [b"a"]),
        (b"a\r\r\n", [b"a\r"]),  # only one trailing CR is removed
        (b"a\rb\n", [b"a\rb"]),  # an inner CR is data
        (b"a", []),  # incomplete
        (b"a\nb", [b"a"]),
        (b" \n", [b" "]),  # whitespace is not blank: the JSON layer decides
    ],
)
def test_frame_table(data: bytes, frames: list[bytes]) -> None:
    assert FrameDecoder().feed(data) == frames


def test_incomplete_frame_completes_later() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b'{"type":') == []
    assert decoder.pending == 8
    assert decoder.feed(b'"host.ping"}') == []
    assert decoder.feed(b"\r") == []
    assert decoder.feed(b"\n") == [b'{"type":"host.ping"}']
    assert decoder.pending == 0


def test_default_limit_is_one_mebibyte() -> None:
    assert FrameDecoder().max_frame == DEFAULT_FRAME_LIMIT == 1 << 20


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_frame_of_exactly_max_frame_is_accepted(ending: bytes) -> None:
    decoder = FrameDecoder(max_frame=100)
    frame = b"x" * 100
    assert decoder.feed(frame + ending + b"y\n") == [frame, b"y"]
    assert not decoder.closed


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_max_frame_plus_one_is_too_large(ending: bytes) -> None:
    decoder = FrameDecoder(max_frame=100)
    out = decoder.feed(b"ok\n" + b"second\n" + b"x" * 101 + ending + b"after\n")
    assert out[:2] == [b"ok", b"second"]
    assert len(out) == 3
    assert isinstance(out[2], FrameTooLarge)
    assert out[2].code == ErrorCode.FRAME_TOO_LARGE
    assert decoder.closed
    assert decoder.pending == 0
    # the rest of the stream cannot be trusted: nothing more comes out
    assert decoder.feed(b"after\n") == []
    assert decoder.feed(b'{"type":"host.ping"}\n') == []
    assert decoder.pending == 0


def test_max_frame_plus_one_fed_byte_by_byte() -> None:
    decoder = FrameDecoder(max_frame=10)
    out: list[bytes | FrameTooLarge] = []
    for byte in b"good\n" + b"z" * 11 + b"\n":
        out.extend(decoder.feed(bytes([byte])))
    assert out[0] == b"good"
    assert len(out) == 2 and isinstance(out[1], FrameTooLarge)
    assert decoder.closed


def test_over_long_line_detected_without_newline() -> None:
    decoder = FrameDecoder(max_frame=100)
    out = decoder.feed(b"ok\n" + b"x" * 150)  # no newline yet
    assert out[0] == b"ok"
    assert len(out) == 2 and isinstance(out[1], FrameTooLarge)
    assert decoder.closed
    assert decoder.pending == 0


def test_over_long_line_detected_without_newline_in_small_chunks() -> None:
    decoder = FrameDecoder(max_frame=100)
    seen = None
    for i in range(60):  # 60 * 4 = 240 bytes, never a newline
        out = decoder.feed(b"xxxx")
        assert decoder.pending <= 100 + 4
        if out:
            assert len(out) == 1 and isinstance(out[0], FrameTooLarge)
            seen = i
            break
    assert seen is not None
    assert seen * 4 <= 100 + 4  # detected within one chunk of passing the limit


@HYPO
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12),
    limit=st.integers(min_value=1, max_value=30),
    cuts=st.lists(st.integers(min_value=0), max_size=30),
)
def test_oversize_in_any_chunking(sizes: list[int], limit: int, cuts: list[int]) -> None:
    """Good frames up to the first oversized one, then exactly one FrameTooLarge."""
    frames = [bytes([97 + i % 26]) * n for i, n in enumerate(sizes)]
    data = b"".join(f + b"\n" for f in frames)
    decoder = FrameDecoder(max_frame=limit)
    out: list[bytes | FrameTooLarge] = []
    for piece in _chunk(data, cuts):
        out.extend(decoder.feed(piece))
        assert decoder.pending <= limit + 1
    good = []
    for f in frames:
        if len(f) > limit:
            break
        good.append(f)
    if len(good) == len(frames):
        assert out == frames
        assert not decoder.closed
    else:
        assert out[:-1] == good
        assert isinstance(out[-1], FrameTooLarge)
        assert decoder.closed


def test_fifty_megabyte_line_stays_bounded() -> None:
    limit = DEFAULT_FRAME_LIMIT
    chunk_size = 64 << 10
    chunk = b"x" * chunk_size
    decoder = FrameDecoder(limit)
    errors = 0
    for _ in range((50 << 20) // chunk_size):
        out = decoder.feed(chunk)
        assert decoder.pending <= limit + chunk_size
        errors += sum(isinstance(o, FrameTooLarge) for o in out)
        assert all(isinstance(o, FrameTooLarge) for o in out)
    assert decoder.feed(b"\n") == []
    assert errors == 1
    assert decoder.closed
    assert decoder.pending == 0
