"""A flooding agent for the ``lines`` adapter (and for the minimal relay).

Each line is ``SEQ NS xxx...``: a sequence number counted from 1, the
``time.monotonic_ns()`` at which the line was written (CLOCK_MONOTONIC is system-wide
on Linux, so a client can compute latency = receipt - NS), then padding up to
``--size`` bytes. After the last line of a flood comes ``SEQ NS END``, the terminator.

* ``flood.py --count N``: print N lines as fast as possible, then exit.
* ``flood.py --count N --rate R``: the same at R lines per second.
* ``flood.py --stdin``: wait for lines ``COUNT [RATE]`` on stdin and answer each with a
  flood; exit at end of input. This is how the harness drives it inside a host.

At full speed stdout is block-buffered (8 KiB writes, like a real tool writing to a
pipe) and the time stamp is taken once per 256 lines; at a fixed rate every line
carries its own stamp and is flushed on its own.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import BinaryIO

STAMP_EVERY = 256


def flood_fast(out: BinaryIO, count: int, size: int) -> None:
    """``count`` lines as fast as possible, then the terminator."""
    now = time.monotonic_ns
    stamp = now()
    for seq in range(1, count + 1):
        if seq % STAMP_EVERY == 0:
            stamp = now()
        head = f"{seq} {stamp} "
        out.write((head + "x" * max(1, size - len(head)) + "\n").encode())
    out.write(f"{count + 1} {now()} END\n".encode())
    out.flush()


def flood_paced(out: BinaryIO, count: int, size: int, rate: float) -> None:
    """``count`` lines at ``rate`` lines/s, each stamped and flushed, then the terminator.

    Lines are due on a fixed schedule; when the process wakes up late it writes every
    line that is due (each with its own stamp), so the average rate holds.
    """
    now = time.monotonic_ns
    start = now()
    period = 1e9 / rate
    seq = 1
    while seq <= count:
        due = start + int((seq - 1) * period)
        ahead = due - now()
        if ahead > 0:
            time.sleep(ahead / 1e9)
        head = f"{seq} {now()} "
        out.write((head + "x" * max(1, size - len(head)) + "\n").encode())
        out.flush()
        seq += 1
    out.write(f"{count + 1} {now()} END\n".encode())
    out.flush()


def flood(out: BinaryIO, count: int, size: int, rate: float) -> None:
    """One flood: fast when ``rate`` is 0, else paced."""
    if rate > 0:
        flood_paced(out, count, size, rate)
    else:
        flood_fast(out, count, size)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and flood once, or once per stdin line with ``--stdin``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="lines per flood")
    parser.add_argument("--rate", type=float, default=0.0, help="lines/s (0: full speed)")
    parser.add_argument("--size", type=int, default=64, help="bytes per line, newline excluded")
    parser.add_argument("--stdin", action="store_true", help="flood on each stdin line")
    args = parser.parse_args(argv)
    out = open(sys.stdout.fileno(), "wb", buffering=8192, closefd=False)
    try:
        if not args.stdin:
            flood(out, args.count, args.size, args.rate)
            return 0
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            count = int(words[0])
            rate = float(words[1]) if len(words) > 1 else args.rate
            flood(out, count, args.size, rate)
    except BrokenPipeError:
        os._exit(1)  # the reader went away: nothing left to flush
    return 0


if __name__ == "__main__":
    sys.exit(main())
