"""The inputs of benchmarks/terminal_emulators.py: the recordings of real TUIs
(tests/fixtures/tty/), the synthetic cases, the hostile inputs (shared with
tests/unit/test_terminal_screen_hostile.py) and the throughput flood."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 65536
"""The host's largest terminal event: what the emulator is fed at once."""


Chunk = bytes | tuple[int, int]


def synthetic_cases() -> dict[str, tuple[int, int, list[Chunk]]]:
    """Cases the brief names: alternate screen, DEC 2026, bracketed paste and mouse
    modes, wide characters, scrollback, resize mid-stream, SGR colours."""
    rows40 = "".join(f"line {n:03d} " + "x" * (n % 70) + "\r\n" for n in range(1, 301))
    return {
        "alternate in/out": (
            40,
            8,
            [
                b"primary 1\r\nprimary 2\r\n",
                b"\x1b[?1049h\x1b[H\x1b[2Jalt 1\r\nalt 2",
                b"\x1b[?1049lback",
            ],
        ),
        "alternate left on": (
            40,
            8,
            [b"primary\r\n\x1b[?1049h\x1b[H\x1b[2J\x1b[3;5Hin the alternate"],
        ),
        "alternate 47/1047": (40, 8, [b"one\r\n\x1b[?47hTWO\x1b[?47l\x1b[?1047hthree\x1b[?1047l"]),
        "DEC 2026 synchronized": (
            40,
            8,
            [
                b"\x1b[?2026h\x1b[H\x1b[2Jframe 1",
                b"\r\nmore",
                b"\x1b[?2026l",
                b"\x1b[?2026hpending",
            ],
        ),
        "bracketed paste, mouse modes": (
            40,
            8,
            [
                b"\x1b[?2004h\x1b[?1000h\x1b[?1002h\x1b[?1006h\x1b[?1003hmodes on\r\n"
                b"\x1b[?1003l\x1b[?25l"
            ],
        ),
        "wide characters": (
            20,
            6,
            [
                "中文字符 日本語 한국어 🎉🚀 e\u0301 end\r\n".encode(),
                "0123456789012345678中x\r\n".encode(),
                "\x1b[1;2H文".encode(),
            ],
        ),
        "wide overwritten halves": (20, 4, ["中文中文\x1b[1;2Hx\x1b[1;5Hy".encode()]),
        "scrollback": (40, 10, [rows40.encode()]),
        "resize mid-stream": (
            40,
            10,
            [rows40.encode()[:3000], (30, 8), b"after shrink\r\n", (60, 12), b"after grow"],
        ),
        "resize alternate": (
            40,
            10,
            [b"a\r\nb\r\n\x1b[?1049h\x1b[5;5Hxx", (20, 5), b"\x1b[?1049lz"],
        ),
        "SGR colours": (
            60,
            6,
            [
                b"\x1b[31mred\x1b[1;4;7m bold \x1b[38;5;208m256 \x1b[38;2;1;2;3mrgb"
                b"\x1b[48:2::9:9:9mcolon\x1b[0m\x1b[2Kcleared\r\n"
                b"\x1b[44m\x1b[Kbackground erase\x1b[m\r\n"
            ],
        ),
        "scroll region, insert, delete": (
            30,
            8,
            [
                b"".join(f"row {n}\r\n".encode() for n in range(12)),
                b"\x1b[2;5r\x1b[2;1H\x1b[2L\x1b[4;1H\x1b[M\x1b[r\x1b[8;1Hend\x1b[1;1H\x1b[3@ins\x1b[2P",
            ],
        ),
        "origin mode, tabs, save/restore": (
            40,
            6,
            [b"\x1b[3;5r\x1b[?6h\x1b[Horigin\x1b[?6l\x1b7\x1b[6;30Hsaved\x1b8a\tb\x1b[3g\tc\x1bH"],
        ),
        "wrap pending at the edge": (10, 3, [b"0123456789", b"\r\nabcdefghij\x1b[1Kx", b"klm"]),
        "autowrap off": (10, 3, [b"\x1b[?7l0123456789ABC\x1b[?7h\r\n0123456789ABC"]),
        "invalid UTF-8": (
            30,
            4,
            [b"ok \xff\xfe bad \xe4\xb8 cut \xf0\x9f\x8e\x89 fine\r\n\xc3", b"\xa9 split"],
        ),
        "C1 and odd controls": (
            30,
            4,
            [b"a\x00b\x07c\x0ed\x0fe\x1b(0lqk\x1b(Bf\x1bc\x1b[?25lafter reset\x1b]2;t\x07"],
        ),
        "CSI garbage parameters": (
            30,
            5,
            [b"\x1b[99999;99999Hfar\x1b[0;0Hhome\x1b[-5Cneg\x1b[65536Aup\x1b[3;99999rx\x1b[r"],
        ),
    }


def recordings() -> list[tuple[str, int, int, list[Chunk]]]:
    """(name, cols, rows, chunks) for each mark of each recording in tests/fixtures/tty."""
    out = []
    for path in sorted((ROOT / "tests" / "fixtures" / "tty").glob("*.json")):
        raw = json.loads(path.read_text())
        chunks: list[Chunk] = [
            (c[0], c[1]) if isinstance(c, list) else base64.b64decode(c) for c in raw["chunks"]
        ]
        ends = sorted({*raw["marks"], len(chunks)})
        for end in ends:
            out.append((f"{raw['name']}@{end}", raw["cols"], raw["rows"], chunks[:end]))
    return out


def hostile_inputs() -> dict[str, Callable[[], list[Chunk]]]:
    """The hostile inputs of tests/unit/test_terminal_screen_hostile.py."""
    mib = 1 << 20
    return {
        "invalid UTF-8 (1 MiB)": lambda: [bytes(range(128, 256)) * (mib // 128)],
        "endless CSI (ESC [ + 1 MB of '1;')": lambda: [b"\x1b[" + b"1;" * (mib // 2)],
        "OSC without terminator (1 MB)": lambda: [b"\x1b]0;" + b"t" * mib],
        "1 MB line without newline": lambda: [b"x" * mib],
        "1 MB of newlines": lambda: [b"\n" * mib],
        "REP and SU amplification (100,000 of each)": lambda: [
            b"x\x1b[65535b\x1b[9999S\x1b[99999999999b" * 100_000
        ],
        "a million cursor moves": lambda: [b"\x1b[5;5H\x1b[A\x1b[B" * 333_334],
        "10,000 resizes": lambda: [
            c for n in range(10_000) for c in ((2 + n % 300, 1 + n % 200), b"x\r\n")
        ],
        "huge CSI parameters": lambda: [
            b"\x1b[4294967296;99999999999999H\x1b[99999999999@\x1b[99999999L\x1b[99999999999b"
            * 1000
        ],
    }


def flood() -> bytes:
    """4 MiB of what terminal agents print: the recordings, over and over, and
    coloured lines (the throughput input)."""
    recorded = b"".join(
        base64.b64decode(c)
        for p in sorted((ROOT / "tests" / "fixtures" / "tty").glob("*.json"))
        for c in json.loads(p.read_text())["chunks"]
        if isinstance(c, str)
    )
    lines = b"".join(
        b"\x1b[32m%06d\x1b[0m \x1b[1mentry\x1b[0m the quick brown fox jumps \xe4\xb8\xad\r\n" % n
        for n in range(20000)
    )
    out = bytearray()
    while len(out) < 4 << 20:
        out += recorded + lines
    return bytes(out[: 4 << 20])
