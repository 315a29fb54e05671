"""agenthost.linesplit.LineSplitter: bounded line splitting on UTF-8 boundaries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.linesplit import Fragment, LineSplitter

HYPO = settings(max_examples=200, deadline=None)


def _chunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return pieces


def _run(data: bytes, cuts: list[int], max_line: int) -> list[bytes]:
    splitter = LineSplitter(max_line)
    out: list[bytes] = []
    for piece in _chunk(data, cuts):
        out.extend(splitter.feed(piece))
        assert len(splitter._pending) <= max_line  # never buffers more than a line
    out.extend(splitter.flush())
    assert splitter.flush() == []
    return out


def _join(items: list[bytes]) -> bytes:
    """Fragments continue a line; any other item ends one."""
    return b"".join(bytes(i) if type(i) is Fragment else bytes(i) + b"\n" for i in items)


def _expected(data: bytes) -> bytes:
    return data if data == b"" or data.endswith(b"\n") else data + b"\n"


# bytes that are likely to matter: newlines, UTF-8 lead and continuation bytes
interesting_bytes = st.binary(max_size=300) | st.lists(
    st.sampled_from([b"a", b"\n", b"\xc3", b"\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xff"]),
    max_size=150,
).map(b"".join)


@HYPO
@given(
    data=interesting_bytes.map(lambda b: b.replace(b"\r", b"")),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    max_line=st.integers(min_value=4, max_value=40),
)
def test_reassembly_reproduces_input(data: bytes, cuts: list[int], max_line: int) -> None:
    items = _run(data, cuts, max_line)
    assert _join(items) == _expected(data)
    assert all(len(i) <= max_line for i in items)
    assert all(type(i) in (bytes, Fragment) for i in items)
    # a Fragment is never the last piece of a line
    if items:
        assert type(items[-1]) is bytes


@HYPO
@given(
    text=st.text(max_size=200),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    max_line=st.integers(min_value=4, max_value=30),
)
def test_cuts_of_utf8_never_split_a_character(text: str, cuts: list[int], max_line: int) -> None:
    data = text.replace("\r", "").encode()
    items = _run(data, cuts, max_line)
    for item in items:
        bytes(item).decode("utf-8")  # strict: raises if a character was split
    assert (
        "".join(bytes(i).decode() + ("" if type(i) is Fragment else "\n") for i in items)
        == _expected(data).decode()
    )


@HYPO
@given(
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    max_line=st.integers(min_value=4, max_value=20),
)
def test_arbitrary_bytes_never_raise(data: bytes, cuts: list[int], max_line: int) -> None:
    items = _run(data, cuts, max_line)
    assert all(len(i) <= max_line for i in items)
    for item in items:
        bytes(item).decode("utf-8", "backslashreplace")


@HYPO
@given(
    lines=st.lists(
        st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")),
        max_size=15,
    ),
    crlf=st.lists(st.booleans(), min_size=15, max_size=15),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    max_line=st.integers(min_value=4, max_value=40),
)
def test_crlf_is_stripped(
    lines: list[bytes], crlf: list[bool], cuts: list[int], max_line: int
) -> None:
    data = b"".join(
        line + (b"\r\n" if cr else b"\n") for line, cr in zip(lines, crlf, strict=False)
    )
    items = _run(data, cuts, max_line)
    assert _join(items) == b"".join(line + b"\n" for line in lines)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b""], []),
        ([b"abc"], [b"abc"]),  # from flush
        ([b"abc\n"], [b"abc"]),
        ([b"abc\r\n"], [b"abc"]),
        ([b"abc\r"], [b"abc"]),  # a trailing CR at end of stream is dropped too
        ([b"a\r\r\n"], [b"a\r"]),  # only one CR
        ([b"a\rb\n"], [b"a\rb"]),
        ([b"\n\n"], [b"", b""]),  # empty lines are lines
        ([b"ab", b"c\n", b"d"], [b"abc", b"d"]),
        ([b"abc\r", b"\n"], [b"abc"]),
        ([b"12345678"], [Fragment(b"1234"), b"5678"]),
        ([b"123456789\n"], [Fragment(b"1234"), Fragment(b"5678"), b"9"]),
        ([b"1234\n"], [b"1234"]),  # exactly max_line: whole
        ([b"1234\r\n"], [b"1234"]),
    ],
)
def test_table(chunks: list[bytes], expected: list[bytes]) -> None:
    splitter = LineSplitter(4)
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    out.extend(splitter.flush())
    assert out == expected
    assert [type(i) for i in out] == [type(i) for i in expected]


def test_cut_backs_off_to_character_start() -> None:
    splitter = LineSplitter(4)
    # "ab" + "€" (3 bytes): a cut at 4 would split the euro sign
    out = splitter.feed("ab€cd\n".encode())
    assert out == [b"ab", "€c".encode(), b"d"]
    assert [type(i) for i in out] == [Fragment, Fragment, bytes]


def test_four_byte_character_at_minimum_line() -> None:
    text = "😀😀x😀"
    out = LineSplitter(4).feed(text.encode() + b"\n")
    assert [bytes(i).decode() for i in out] == ["😀", "😀", "x", "😀"]
    assert [type(i) for i in out] == [Fragment, Fragment, Fragment, bytes]


def test_invalid_utf8_cut_at_limit() -> None:
    data = b"\x80" * 10  # only continuation bytes: cut anywhere
    splitter = LineSplitter(4)
    out = splitter.feed(data) + splitter.flush()
    assert all(len(i) <= 4 for i in out)
    assert b"".join(out) == data


def test_pending_stays_bounded_on_a_huge_line() -> None:
    splitter = LineSplitter(1 << 16)
    chunk = ("é" * 30_000).encode()  # 60 kB, 2-byte characters
    total = 0
    for _ in range(100):
        for item in splitter.feed(chunk):
            assert type(item) is Fragment
            assert len(item) <= 1 << 16
            bytes(item).decode()
            total += len(item)
        assert len(splitter._pending) <= 1 << 16
    rest = splitter.feed(b"\n")
    assert type(rest[-1]) is bytes
    total += sum(len(i) for i in rest)
    assert total == 100 * len(chunk)


@pytest.mark.parametrize("max_line", [0, 1, 3, -1])
def test_rejects_tiny_max_line(max_line: int) -> None:
    with pytest.raises(ValueError):
        LineSplitter(max_line)


def test_fragment_is_bytes() -> None:
    frag = Fragment(b"abc")
    assert isinstance(frag, bytes)
    assert frag == b"abc"
    assert frag.decode() == "abc"


# --- the fast path against the line-by-line model -------------------------------------


def _model(chunks: list[bytes], max_line: int) -> list[bytes]:
    """The slow path: each chunk joined to what is pending, then one line at a time
    (one CR stripped, a line over max_line cut into Fragments); a pending start of a
    line over max_line is cut at once, as it must not be buffered."""
    cut = LineSplitter(max_line)._cut
    out: list[bytes] = []
    pending = b""
    for chunk in [*chunks, None]:
        if chunk is None:  # end of stream: the last line without a newline
            lines, pending = ([pending] if pending else []), b""
        else:
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
        for line in lines:
            line = line[:-1] if line.endswith(b"\r") else line
            out.extend([line] if len(line) <= max_line else cut(line))
        if len(pending) > max_line:
            pieces = cut(pending)
            pending = pieces.pop()
            out.extend(pieces)
    return out


line_bytes = st.lists(
    st.sampled_from([b"a", b"\r", b"\xc3\xa9", b"\xe2\x82\xac", b"\xff", b" "]), max_size=12
).map(b"".join)
endings = st.sampled_from([b"\n", b"\r\n", b"\r\r\n"])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(line_bytes, endings), max_size=30),
    last=line_bytes,
    cuts=st.lists(st.integers(min_value=0), max_size=12),
    empty=st.lists(st.integers(min_value=0, max_value=40), max_size=4),
    max_line=st.sampled_from([4, 5, 8, 11, 16, 1 << 20]),
)
def test_matches_the_line_by_line_model(
    lines: list[tuple[bytes, bytes]],
    last: bytes,
    cuts: list[int],
    empty: list[int],
    max_line: int,
) -> None:
    """Lines that fit (returned as split) mixed with lines over the limit (cut), CRLF
    and CR anywhere, chunks ending mid-line or between CR and LF, empty chunks."""
    data = b"".join(text + end for text, end in lines) + last
    chunks = _chunk(data, cuts)
    for i in sorted(empty, reverse=True):
        chunks.insert(min(i, len(chunks)), b"")
    splitter = LineSplitter(max_line)
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
        assert len(splitter._pending) <= max_line
    out.extend(splitter.flush())
    expected = _model(chunks, max_line)
    assert out == expected
    assert [type(i) for i in out] == [type(i) for i in expected]


def test_a_chunk_longer_than_the_limit_whose_lines_all_fit() -> None:
    splitter = LineSplitter(8)
    out = splitter.feed(b"12345678\r\n" * 5 + b"1234567")
    assert out == [b"12345678"] * 5
    assert all(type(i) is bytes for i in out)
    assert splitter.feed(b"89\r\n") == [Fragment(b"12345678"), b"9"]


def test_many_lines_in_one_chunk_come_back_as_split() -> None:
    splitter = LineSplitter()
    lines = [b"%d line" % i for i in range(10_000)]
    assert splitter.feed(b"\n".join(lines) + b"\nstart of the next") == lines
    assert splitter.feed(b" one\r\n") == [b"start of the next one"]
