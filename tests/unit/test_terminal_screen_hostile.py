"""Hostile bytes into the screen (agenthost.terminal.screen): invalid UTF-8, an endless
escape sequence, an OSC without terminator, a 1 MB line, a million cursor moves,
10,000 resizes, huge, zero and negative CSI parameters, and random garbage. No crash,
no exception, bounded memory, and lines() still sane. Their CPU is measured in
benchmarks/terminal_emulators.py, not asserted here.

Memory bounds, both far above what a bounded screen needs and far below what an
unbounded one would take on these inputs (each is 1 MB or more, and kept whole it
would be several times that as Python text or cells):

- Python's allocations (tracemalloc's peak) under 4 MiB: a 64 KiB chunk decoded is at
  most 256 KiB of text, the modes scanner keeps at most 4096 characters, and lines()
  of an 80x24 screen is a few KiB.
- The process's peak RSS (avt's cells live in Rust, which tracemalloc does not see)
  at most 48 MiB over its start: 1000 rows of scrollback at the largest width these
  inputs reach (301 columns) is about 300,000 cells, a few MiB in avt.
"""

from __future__ import annotations

import random
import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from wcwidth import wcswidth

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from agenthost.terminal.screen import Screen  # noqa: E402

from terminal_inputs import CHUNK, hostile_inputs  # noqa: E402

CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
PYTHON_PEAK = 4 << 20
RSS_GROWTH = 48 << 20


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Make VmHWM the current RSS again (Linux: clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def assert_sane(screen: Screen) -> None:
    cols, rows = screen.size
    lines = screen.lines()
    assert len(lines) == rows
    for line in lines:
        assert line == line.rstrip(" ")
        assert not CONTROLS.search(line), repr(line)  # controls act, they never show
        width = wcswidth(line)
        assert width <= cols or width == -1, (width, line)
    col, row, visible = screen.cursor()
    assert 0 <= col <= cols and 0 <= row < rows and isinstance(visible, bool)
    snapshot = screen.snapshot(1)
    assert snapshot["lines"] == lines and isinstance(snapshot["dump"], str)


def play(screen: Screen, make: Callable[[], list[bytes | tuple[int, int]]]) -> None:
    for chunk in make():
        if isinstance(chunk, tuple):
            screen.resize(*chunk)
        else:
            for i in range(0, len(chunk), CHUNK):
                screen.feed(chunk[i : i + CHUNK])


@pytest.mark.parametrize("name", list(hostile_inputs()))
def test_hostile_input(name: str) -> None:
    make = hostile_inputs()[name]
    screen = Screen(80, 24)
    reset_peak_rss()
    start = rss_kib("VmRSS")
    tracemalloc.start()
    try:
        play(screen, make)
        screen.feed(b"\x1b\\\x07\x18\r\nstill alive")  # end whatever sequence is open
        assert_sane(screen)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The input itself is made inside play() and counted: take it off.
    size = sum(len(c) for c in make() if isinstance(c, bytes))
    assert peak - size < PYTHON_PEAK, f"{name}: Python peak {peak - size} bytes"
    growth = (rss_kib("VmHWM") - start) * 1024
    assert growth < RSS_GROWTH + size, f"{name}: peak RSS grew {growth} bytes"
    assert "still alive" in "\n".join(screen.lines())


def test_endless_sequences_do_not_swallow_the_text_after_them() -> None:
    screen = Screen(40, 5)
    screen.feed(b"\x1b[" + b"1;" * 100_000)
    screen.feed(b"m\r\nafter csi")
    screen.feed(b"\r\n\x1b]0;" + b"t" * 100_000 + b"\x07after osc")
    assert screen.lines()[1:3] == ["after csi", "after osc"]
    assert screen.title is None or len(screen.title) <= 1024


@pytest.mark.parametrize("seed", range(20))
def test_random_garbage(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [b"\x1b", b"[", b"]", b"?", b";", b"0", b"9", b"\x07", b"\x9b", b"\xff", b"\xe4"]
    alphabet += [b"h", b"l", b"m", b"H", b"J", b"K", b"r", b"b", b"t", b"\r\n", b"\x00"]
    alphabet += ["中".encode(), "🎉".encode(), b"x" * 50]
    screen = Screen(rng.randint(1, 120), rng.randint(1, 60))
    for _ in range(200):
        if rng.random() < 0.02:
            screen.resize(rng.randint(-5, 300), rng.randint(-5, 100))
        screen.feed(b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))))
        screen.feed(rng.randbytes(rng.randint(0, 64)))
    assert_sane(screen)


@pytest.mark.parametrize(
    "sequence",
    [
        b"\x1b[-1;-1H",
        b"\x1b[0;0r",
        b"\x1b[99999;1r",
        b"\x1b[18446744073709551616A",
        b"\x1b[8;99999;99999t",  # a program asking the terminal to resize: ignored
        b"\x1b[?99999999h",
        b"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24;25;26m",
        b"\x1b[38;5;99999m\x1b[38;2;999;999;999m",
        b"\x1b[99999999X\x1b[99999999P\x1b[99999999M\x1b[99999999S\x1b[99999999T",
        b"\x1b[99999999Z\x1b[99999999I\x1b[99999999G\x1b[99999999d",
    ],
)
def test_extreme_parameters(sequence: bytes) -> None:
    screen = Screen(80, 24)
    screen.feed(b"text" + sequence + b"more")
    assert screen.size == (80, 24)
    assert_sane(screen)
