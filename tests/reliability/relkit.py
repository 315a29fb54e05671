"""Tooling shared by the reliability tests: flood agents, many raw clients, host gauges.

Many clients are raw sockets served by one ``selectors`` loop in the test process (no
thread per client), so 250 clients cost one core at most. Every client checks what it
receives as it goes, on every read: the event offsets must be exactly the next ones
(no gap, no duplicate, no reordering) and the flood agent's numbered lines must be
consecutive. Nothing here sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from hosttools import HostProc, lines_agent

HostFactory = Callable[..., HostProc]
"""The ``host_factory`` fixture of tests/conftest.py."""

Figure = Callable[..., None]
"""The ``figure(name, value, unit, **context)`` fixture of this directory's conftest.py.

Both aliases are defined here rather than imported ``from conftest``: two conftest.py
files share that module name, and which one it names depends on collection order."""

RECV = 1 << 18
OFFSETS = re.compile(rb',"offset":(\d+),')
NUMBERS = re.compile(rb'"data":"(\d+)"')
DONE = re.compile(rb'"data":"done (\d+) ([0-9.]+)"')
QUIET = ("--log-level", "info")  # hosttools asks for debug logs: too chatty under load

FLOOD_CODE = """
import sys, time
out = sys.stdout
k = 0
for line in sys.stdin:
    n = int(line)
    t = time.perf_counter()
    for _ in range(n):
        k += 1
        out.write(f"{k}\\n")
    out.flush()
    out.write(f"done {k} {time.perf_counter() - t:.6f}\\n")
    out.flush()
"""


def flood_agent() -> list[str]:
    """A ``lines`` agent: each stdin line ``N`` makes it print the next N integers of
    one running count (block-buffered, as fast as the pipe takes them), then
    ``done K SECONDS``: K the last integer, SECONDS how long the agent took to write
    them. A host that stalls on its clients stalls the agent's writes, so SECONDS is
    the agent's own view of whether it was throttled."""
    return lines_agent(FLOOD_CODE)


def seq_agent() -> list[str]:
    """The flood agent's protocol in ``sh`` and ``seq`` (no Python start-up, for many
    hosts): each stdin line ``N`` prints the next N integers, then ``done K 0``."""
    script = 'k=0; while read n; do seq $((k+1)) $((k+n)); k=$((k+n)); echo "done $k 0"; done'
    return ["sh", "-c", script]


def rss(pid: int) -> int:
    """Resident set size of ``pid`` in bytes."""
    return int(psutil.Process(pid).memory_info().rss)


def fd_count(pid: int) -> int:
    """Open descriptors of ``pid``, as listed in ``/proc/PID/fd``."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def connect(path: Path | str, timeout: float = 30.0, rcvbuf: int = 0) -> socket.socket:
    """A blocking connection to ``path``; retried while the listen backlog is full.

    ``rcvbuf``: a small receive buffer, for a client that means to fall behind."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        try:
            sock.connect(os.fspath(path))
            return sock
        except BlockingIOError:  # AF_UNIX says EAGAIN when the backlog is full
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)  # retry interval of a bounded retry, not a synchronisation


def request_bytes(mtype: str, payload: Any = None, rid: Any = None) -> bytes:
    obj: dict[str, Any] = {"type": mtype}
    if rid is not None:
        obj["id"] = rid
    if payload is not None:
        obj["payload"] = payload
    return json.dumps(obj).encode() + b"\n"


class StreamCheck:
    """One attached raw client of a flood agent's stream, checked on every read."""

    def __init__(self, sock: socket.socket, offset: int, name: str = "") -> None:
        self.sock = sock
        self.name = name
        self.asked = offset
        self.attach: dict[str, Any] | None = None
        self.first_offset = 0  # the first offset it must receive
        self.next_offset = 0
        self.next_number = 0  # the next flood integer; 0 until the first one
        self.done_marks: list[int] = []  # K of each ``done K S`` line
        self.agent_seconds: list[float] = []
        self.events = 0
        self.rest = b""
        self.error: str | None = None
        self.eof = False
        self.last_read = 0.0

    def fail(self, message: str) -> None:
        if self.error is None:
            self.error = f"{self.name}: {message}"

    def feed(self, data: bytes) -> None:
        if self.rest:
            data = self.rest + data
        end = data.rfind(b"\n") + 1
        self.rest = data[end:]
        start = 0
        if end and self.attach is None:
            start = data.index(b"\n") + 1
            self._on_response(data[:start])
        if start < end:
            self._lines(data[start:end])

    def _on_response(self, line: bytes) -> None:
        resp = json.loads(line)
        if resp.get("kind") != "response" or not resp.get("success"):
            self.fail(f"attach failed: {resp}")
            self.attach = {}
            return
        payload: dict[str, Any] = resp["payload"]
        self.attach = payload
        if payload["truncated"]:
            self.first_offset = payload["oldest_offset"]
        else:
            self.first_offset = min(self.asked, payload["stream_offset"]) + 1
        self.next_offset = self.first_offset

    def _lines(self, block: bytes) -> None:
        count = block.count(b"\n")
        offsets = [int(x) for x in OFFSETS.findall(block)]
        expect = self.next_offset
        if len(offsets) != count or offsets != list(range(expect, expect + count)):
            got = f"{offsets[:3]}..{offsets[-3:]}" if offsets else "no offsets"
            self.fail(f"expected offsets {expect}..{expect + count - 1}, got {got} ({count} lines)")
        self.next_offset = expect + count
        self.events += count
        numbers = [int(x) for x in NUMBERS.findall(block)]
        if numbers:
            first = self.next_number or numbers[0]
            if numbers != list(range(first, first + len(numbers))):
                self.fail(f"flood lines not consecutive after {self.next_number - 1}")
            self.next_number = numbers[-1] + 1
        for mark, seconds in DONE.findall(block):
            self.done_marks.append(int(mark))
            self.agent_seconds.append(float(seconds))

    @property
    def last_offset(self) -> int:
        """The offset of the last complete event received (0: none)."""
        return self.next_offset - 1 if self.events else max(0, self.first_offset - 1)


class Fleet:
    """Many raw clients attached to host sockets, read by one ``selectors`` loop."""

    def __init__(self) -> None:
        self.clients: list[StreamCheck] = []
        self.sel = selectors.DefaultSelector()

    def attach(
        self, path: Path | str, offset: int = 0, name: str = "", rcvbuf: int = 0
    ) -> StreamCheck:
        """Connect a client and send its ``host.attach`` (read by :meth:`run`)."""
        sock = connect(path, rcvbuf=rcvbuf)
        sock.sendall(request_bytes("host.attach", {"offset": offset}, rid="a"))
        sock.setblocking(False)
        client = StreamCheck(sock, offset, name or f"client {len(self.clients)}")
        self.clients.append(client)
        self.sel.register(sock, selectors.EVENT_READ, client)
        return client

    def run(self, until: Callable[[], bool], timeout: float, what: str) -> None:
        """Read from every client until ``until()`` holds; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            for key, _ in self.sel.select(0.1):
                client: StreamCheck = key.data
                try:
                    data = client.sock.recv(RECV)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    client.fail(f"connection error: {exc}")
                    data = b""
                if data:
                    client.feed(data)
                    client.last_read = time.monotonic()
                else:
                    client.eof = True
                    self.sel.unregister(client.sock)

    def all_attached(self) -> bool:
        return all(c.attach is not None for c in self.clients)

    def all_done(self, marks: int) -> bool:
        """Every client has seen ``marks`` done lines (or is gone)."""
        return all(len(c.done_marks) >= marks or c.eof for c in self.clients)

    def errors(self) -> list[str]:
        out = [c.error for c in self.clients if c.error]
        out += [f"{c.name}: disconnected" for c in self.clients if c.eof]
        return out

    def close(self) -> None:
        for c in self.clients:
            if not c.eof:
                self.sel.unregister(c.sock)
            c.sock.close()
        self.sel.close()


def check_complete(clients: Sequence[StreamCheck], head: int, last_number: int) -> None:
    """Every client got every offset from its first to ``head`` and every flood line."""
    for c in clients:
        assert c.error is None, c.error
        assert c.next_offset == head + 1, f"{c.name}: stopped at {c.next_offset - 1}, head {head}"
        assert c.next_number == last_number + 1, f"{c.name}: flood ends at {c.next_number - 1}"
