"""What ``agenthost attach`` costs as a terminal agent's pass-through.

``.venv/bin/python benchmarks/attach_terminal.py [--mib 16] [--clients 1,4]`` starts,
in a fresh home, a terminal agent (``--agent pty``: a program that writes ``--mib`` MiB
of 80-column lines each time it reads a key, then ``DONE n``). For each count of
clients it runs that many ``agenthost attach`` in pseudo-terminals of their own (each
drained as fast as it comes, as a fast terminal would), types the key (``host.input``
on a connection of its own), and waits until every terminal has the ``DONE`` line.
It reports the CPU seconds per MiB of each attach (the mean) and of the host, the
attach's PSS, and the wall time relative to the one-client row of the same run.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import PY, cpu, pss_mib  # noqa: E402

SCREENFUL = str(Path(__file__).resolve().parent / "agents" / "screenful.py")
DEADLINE = 600.0


class Terminal:
    """``agenthost attach`` in a pseudo-terminal, its output read and counted."""

    def __init__(self, home: Path, cols: int = 100, rows: int = 30) -> None:
        import fcntl
        import struct
        import termios

        self.master, slave = os.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        argv = [PY, "-m", "agenthost", "attach", "flood", "--home", str(home)]
        self.proc = subprocess.Popen(
            ["setsid", "--ctty", "--", *argv], stdin=slave, stdout=slave, stderr=slave
        )
        os.close(slave)
        os.set_blocking(self.master, False)
        self.ps = psutil.Process(self.proc.pid)
        self.tail = b""
        self.seen = 0

    def read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self.seen += len(data)
            self.tail = (self.tail + data)[-64:]

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def pump(terms: list[Terminal], until: bytes) -> None:
    """Read every terminal until each one's output ends with ``until`` (and a CRLF);
    with ``until`` empty, until each has painted something."""
    deadline = time.monotonic() + DEADLINE
    while not all(until in t.tail and t.seen for t in terms):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {until!r}")
        ready, _, _ = select.select([t.master for t in terms], [], [], 1.0)
        for t in terms:
            if t.master in ready:
                t.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--clients", default="1,4")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ahbench-", dir="/tmp"))
    serve = [PY, "-m", "agenthost", "serve", "--agent-id", "flood", "--home", str(home)]
    serve += ["--agent", "pty", "--detach", "--", PY, SCREENFUL, str(args.mib)]
    subprocess.run(serve, check=True, capture_output=True)
    from agenthost import Client

    rows = []
    first_wall = None
    rounds = 0
    client = Client("flood", home=home)
    try:
        host = psutil.Process(client.status().host.pid)
        for count in (int(n) for n in args.clients.split(",")):
            terms = [Terminal(home) for _ in range(count)]
            try:
                pump(terms, b"")  # each painted the screen
                rounds += 1
                cpu0 = [cpu(t.ps) for t in terms]
                host0 = cpu(host)
                start = time.monotonic()
                client.input(b"k")  # (keys through attach: the tests)
                pump(terms, b"DONE %d" % rounds)
                wall = time.monotonic() - start
                attach_cpu = sum(cpu(t.ps) - c for t, c in zip(terms, cpu0, strict=True))
                host_cpu = cpu(host) - host0
                pss = max(pss_mib(t.ps) for t in terms)
            finally:
                for t in terms:
                    t.close()
            first_wall = first_wall or wall
            rows.append(
                f"| {count} | {attach_cpu / count / args.mib * 1000:.1f} ms | "
                f"{host_cpu / args.mib * 1000:.1f} ms | {pss:.1f} MiB | "
                f"{wall / first_wall:.2f} |"
            )
    finally:
        client.close()
        subprocess.run(
            [PY, "-m", "agenthost", "stop", "flood", "--home", str(home)], capture_output=True
        )
        shutil.rmtree(home, ignore_errors=True)
    print(f"{args.mib} MiB of 80-column lines per round")
    print("| clients | CPU per MiB, each attach | CPU per MiB, host | attach PSS | wall (ratio) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
