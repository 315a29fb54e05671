"""agenthost.terminal.guard: what avt is fed stays bounded, and real output passes
unchanged (the recordings' screens are judged against the oracle in
test_terminal_screen.py)."""

from __future__ import annotations

from agenthost.terminal.guard import MAX_SEQUENCE, PIECE, FeedGuard


def feed(guard: FeedGuard, *texts: str, cols: int = 80, rows: int = 24) -> list[str]:
    return [piece for text in texts for piece in guard.pieces(text, cols, rows)]


def test_plain_text_passes_in_pieces() -> None:
    text = "abc\r\n" * 1000
    pieces = feed(FeedGuard(), text)
    assert "".join(pieces) == text
    assert max(len(p) for p in pieces) <= PIECE


def test_rep_and_su_are_capped_and_alone() -> None:
    pieces = feed(
        FeedGuard(), "x\x1b[99999999999b y\x1b[5;7b\x1b[5000S\x1b[S\x1b[3S", cols=10, rows=4
    )
    assert pieces == ["x", "\x1b[10b", " y", "\x1b[5b", "\x1b[4S", "\x1b[1S", "\x1b[3S"]
    assert feed(FeedGuard(), "a\x9b99b", cols=10) == ["a", "\x1b[10b"]


def test_sequences_cut_between_chunks_are_held_back() -> None:
    guard = FeedGuard()
    assert feed(guard, "x\x1b[9999") == ["x"]
    assert feed(guard, "9b") == ["\x1b[80b"]
    assert feed(guard, "y\x1b") == ["y"]
    assert feed(guard, "[31mz") == ["\x1b[31mz"]


def test_an_overlong_sequence_is_dropped_whole() -> None:
    guard = FeedGuard()
    assert feed(guard, "a\x1b[" + "1;" * 1000) == ["a"]
    assert feed(guard, "1;" * 1000) == []
    assert feed(guard, "1;2mafter") == ["after"]
    # Not over-long: kept for the next chunk.
    assert feed(guard, "\x1b[" + "1" * (MAX_SEQUENCE - 2)) == []
    assert feed(guard, "m!") == ["\x1b[" + "1" * (MAX_SEQUENCE - 2) + "m!"]


def test_del_is_removed() -> None:
    assert feed(FeedGuard(), "a\x7fb") == ["ab"]
