"""agenthost.terminal.screen and .modes judged against the oracle (@xterm/headless fed
the same bytes): on the recordings of real TUIs (tests/fixtures/tty/), at each mark;
on synthetic cases; on a recording made live in a real PTY; and the dump: a fresh
oracle fed the dump shows the same screen, cursor and modes as the oracle fed the
original bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from agenthost.terminal.modes import MAX_PENDING, MAX_TITLE, Modes  # noqa: E402
from agenthost.terminal.screen import Screen, _portable  # noqa: E402

import ttyscenarios  # noqa: E402
from ptytools import Recording, load_recordings  # noqa: E402
from terminal_inputs import synthetic_cases  # noqa: E402
from termoracle import Chunk, OracleScreen, oracle_screens  # noqa: E402

RECORDINGS = load_recordings()

KNOWN_DIFFERENT = {"resize mid-stream", "invalid UTF-8"}
"""Synthetic cases where avt and xterm.js differ by design or in a corner that does
not matter: after a resize reflows the line the cursor is on, xterm.js keeps the
cursor where avt re-wraps (as Ghostty does too); xterm.js drops invalid UTF-8, we
show U+FFFD (checked separately below)."""


def play(chunks: Sequence[Chunk], cols: int, rows: int) -> Screen:
    screen = Screen(cols, rows)
    for chunk in chunks:
        if isinstance(chunk, tuple):
            screen.resize(*chunk)
        else:
            screen.feed(chunk)
    return screen


def size_after(chunks: Sequence[Chunk], cols: int, rows: int) -> tuple[int, int]:
    for chunk in chunks:
        if isinstance(chunk, tuple):
            cols, rows = chunk
    return cols, rows


def same_cursor(ours: tuple[int, int, bool], oracle: OracleScreen) -> bool:
    # A cursor waiting to wrap is at column cols for both avt and xterm.js.
    return ours == oracle.cursor


MODES = ("bracketedPasteMode", "mouseTrackingMode", "mouseEncoding", "applicationCursorKeysMode")
MODES += ("applicationKeypadMode", "sendFocusMode")


def judge(cases: list[tuple[str, Sequence[Chunk], int, int]]) -> list[str]:
    """For each case: our screen against the oracle's, and the dump against the
    original bytes, both on the oracle; the differences found."""
    screens = [play(chunks, cols, rows) for _, chunks, cols, rows in cases]
    dumps = []
    for (_, chunks, cols, rows), screen in zip(cases, screens, strict=True):
        width, height = size_after(chunks, cols, rows)
        assert screen.size == (width, height)
        dumps.append(([b"\x1bc" + screen.dump().encode()], width, height))
    oracles = oracle_screens([(chunks, cols, rows) for _, chunks, cols, rows in cases] + dumps)
    originals, repainted = oracles[: len(cases)], oracles[len(cases) :]
    problems = []
    for (name, *_), screen, want, dumped in zip(cases, screens, originals, repainted, strict=True):
        if screen.lines() != want.lines:
            problems.append(f"{name}: lines {screen.lines()} != {want.lines}")
        if not same_cursor(screen.cursor(), want):
            problems.append(f"{name}: cursor {screen.cursor()} != {want.cursor}")
        if screen.alternate != want.alternate or screen.title != want.title:
            problems.append(f"{name}: alternate/title {screen.alternate, screen.title}")
        if dumped.lines != want.lines or dumped.cursor != want.cursor:
            problems.append(f"{name}: dump shows {dumped.lines} {dumped.cursor}")
        if dumped.alternate != want.alternate or dumped.title != want.title:
            problems.append(f"{name}: dump alternate/title {dumped.alternate, dumped.title}")
        for mode in MODES:
            if dumped.modes[mode] != want.modes[mode]:
                problems.append(f"{name}: dump {mode} {dumped.modes[mode]} != {want.modes[mode]}")
    return problems


def recording_cases(recording: Recording) -> list[tuple[str, Sequence[Chunk], int, int]]:
    return [
        (f"{recording.name}@{len(prefix)}", prefix, recording.cols, recording.rows)
        for prefix in recording.prefixes()
    ]


def test_fixtures_are_there() -> None:
    names = {r.name for r in RECORDINGS}
    assert {"vim", "less", "htop", "shell", "tmux"} <= names
    for recording in RECORDINGS:
        assert 1_000 < len(recording.data()) < 100_000, recording.name


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: r.name)
def test_recordings_equal_the_oracle_and_the_dump_repaints_them(recording: Recording) -> None:
    assert judge(recording_cases(recording)) == []


def test_synthetic_cases_equal_the_oracle() -> None:
    cases = [
        (name, chunks, cols, rows)
        for name, (cols, rows, chunks) in synthetic_cases().items()
        if name not in KNOWN_DIFFERENT
    ]
    assert judge(cases) == []


def test_invalid_utf8_shows_replacement_characters() -> None:
    screen = Screen(30, 3)
    screen.feed(b"ok \xff bad \xe4\xb8 cut \xf0\x9f\x8e\x89 fine\r\n\xc3")
    screen.feed(b"\xa9 split")
    assert screen.lines() == ["ok \ufffd bad \ufffd cut 🎉 fine", "é split", ""]


def test_a_recording_made_live_equals_the_oracle(tmp_path: Path) -> None:
    """The shell scenario recorded now in a real PTY (bash is always there), and vim,
    less and htop (installed by CI, which must run them: AGENTHOST_E2E_REQUIRED): the
    bytes of this machine's programs, not only the fixtures'."""
    recording = ttyscenarios.record_shell(tmp_path)
    assert recording.marks and any(isinstance(c, tuple) for c in recording.chunks)
    cases = recording_cases(recording)
    for name in ("vim", "less", "htop"):
        if not ttyscenarios.available(name):
            assert not os.environ.get("AGENTHOST_E2E_REQUIRED"), f"{name} is not installed"
            continue
        (tmp_path / name).mkdir()
        record = ttyscenarios.SCENARIOS[name][1]
        cases += recording_cases(record(tmp_path / name))
    assert judge(cases) == []


def test_snapshot_is_the_protocol_screen_object() -> None:
    screen = Screen(20, 4)
    screen.feed("a\x1b[?1049h\x1b]0;title\x07\x1b[?25l中".encode())
    snap = screen.snapshot(42)
    assert set(snap) == {"offset", "cols", "rows", "cursor", "lines", "dump", "alternate", "title"}
    assert snap["offset"] == 42 and (snap["cols"], snap["rows"]) == (20, 4)
    assert snap["cursor"] == {"col": 3, "row": 0, "visible": False}
    assert snap["lines"] == [" 中", "", "", ""]
    assert snap["alternate"] is True and snap["title"] == "title"
    assert isinstance(snap["dump"], str) and "\x9b" not in snap["dump"]


def test_sizes_are_clamped() -> None:
    assert Screen(0, -5).size == (1, 1)
    assert Screen(10**6, 10**6).size == (1000, 1000)
    screen = Screen(80, 24)
    screen.resize(-1, 0)
    assert screen.size == (1, 1)
    screen.resize(5000, 3)
    assert screen.size == (1000, 3)


def test_portable_dump_writes_out_rep_and_c1() -> None:
    assert _portable("ab\x1b[3bc", 80) == "abbbbc"
    assert _portable("x\x9b5b\x9b1;2H", 80) == "xxxxxx\x1b[1;2H"
    assert _portable("-\x1b[99999b", 10) == "-" * 11
    assert _portable("\x1b7\x1b(0q\x1b8\x1b[b", 80) == "\x1b7\x1b(0q\x1b8q"


class TestModes:
    def test_tracks_the_modes_a_client_needs(self) -> None:
        modes = Modes()
        modes.feed("\x1b[?1000h\x1b[?1006;2004h\x1b=\x1b[?1004h")
        assert modes.mouse == 1000
        modes.feed("\x1b[?1002h")
        assert modes.mouse == 1002  # one tracking mode at a time
        modes.feed("\x1b[?1000l")
        assert modes.mouse == 1002
        assert modes.dump() == "\x1b[?1002h\x1b=\x1b[?1004h\x1b[?1006h\x1b[?2004h"
        modes.feed("\x1b[?2004l\x1b>\x1b[?1002l")
        assert modes.dump() == "\x1b[?1004h\x1b[?1006h"

    def test_sequences_cut_between_chunks(self) -> None:
        modes = Modes()
        for part in ("\x1b", "[", "?", "20", "04", "h", "\x1b]", "2;ti", "tle\x1b", "\\"):
            modes.feed(part)
        assert modes.private == {2004: True}
        assert modes.title == "title"

    def test_title_and_resets(self) -> None:
        modes = Modes()
        modes.feed("\x1b]0;one\x07\x1b]1;icon only\x07")
        assert modes.title == "one"
        modes.feed("\x1b[?2004h\x1b[?1049h\x1b[!p")
        assert modes.private == {} and modes.alternate and modes.title == "one"
        modes.feed("\x1bc")
        assert modes.title is None and not modes.alternate

    def test_bounded(self) -> None:
        modes = Modes()
        modes.feed("\x1b]2;" + "t" * (MAX_PENDING + 10))
        modes.feed("tail\x07")
        assert modes.title is None  # too long to keep pending: dropped
        modes.feed("\x1b]2;" + "x" * 100_000 + "\x07")
        assert modes.title == "x" * MAX_TITLE
        modes.feed("\x1b[?" + "1;" * 100 + "2004h")  # too many parameters: ignored
        assert 2004 not in modes.private

    def test_title_with_controls_cannot_break_the_dump(self) -> None:
        modes = Modes()
        modes.feed("\x1b]2;a\x1b[31mb\x07")  # ESC ends the OSC: title "a"
        modes.feed("\x1b]2;tab\there\x07")
        assert modes.dump() == "\x1b]2;tabhere\x07"
