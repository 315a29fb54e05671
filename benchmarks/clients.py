"""The measuring clients: N raw socket connections in one process, one ``selectors`` loop.

Run by ``run.py`` as a separate process, so that the measuring work is not done by the
host (or the relay) under test; one process (not N) keeps the clients' share of a small
machine's CPU as low as it can be. Each connection reads in 256 KiB ``recv`` calls and
takes the receipt time right after each one.

``--proto host``: attach live (``host.attach`` with an offset beyond the head), then,
once every client has its attach response, send the trigger with ``host.send`` on a
separate connection. ``--proto raw``: read the relay's bytes (the relay triggers the
agent once all clients are connected).

Checks, on every read of every client: the lines up to the last newline are counted,
and the key of the first and of the last line (the event offset, or the flood's
sequence number for the relay) must be exactly the next expected one and ``first +
lines - 1``. A gap, a duplicate or a reordering across reads is caught; inside one
read only a gap and a duplicate that cancel out could slip through. ``--full`` clients
(the first one by default) also parse every line: offsets, the flood's sequence
numbers, or the count of the demo's assistant messages, so that the agent's lines are
proven to be all there. A client that is disconnected before the end is reported.

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import selectors
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

try:  # numpy comes with the bench extra (matplotlib); it counts newlines ~5x faster
    import numpy
except ImportError:  # pragma: no cover - the harness still works, its clients cost more
    numpy = None  # type: ignore[assignment]

RECV = 1 << 18
LIVE = 1 << 60  # attach offset beyond the head: live events only
OFFSET = b'"offset":'
OFFSETS = re.compile(rb',"offset":(\d+),')
SEQ = {"host": re.compile(rb'"data":"(\d+) '), "raw": re.compile(rb"(?m)^(\d+) ")}
STAMP = {"host": re.compile(rb'"data":"\d+ (\d+) x'), "raw": re.compile(rb"(?m)^\d+ (\d+) x")}
Data = bytes | bytearray  # a read: the shared receive buffer, or bytes
ASSISTANT = {"host": b'\\"type\\": \\"assistant\\"', "raw": b'"type": "assistant"'}


def count_lines(data: Data, start: int, end: int) -> int:
    """The newlines in ``data[start:end]``: most of the clients' CPU time at 100 clients
    (they receive gigabytes), so vectorised when numpy is there."""
    if numpy is None:
        return data.count(b"\n", start, end)
    return int(numpy.count_nonzero(numpy.frombuffer(data, numpy.uint8, end - start, start) == 10))


def host_key(data: Data, start: int) -> int:
    """The event offset of the line starting at ``start``."""
    i = data.index(OFFSET, start) + len(OFFSET)
    return int(data[i : data.index(b",", i)])


def seq_key(data: Data, start: int) -> int:
    """The flood sequence number of the raw line starting at ``start``."""
    return int(data[start : data.index(b" ", start)])


def is_end(proto: str, kind: str, line: Data) -> bool:
    """Whether ``line`` (newline excluded) ends one run's stream."""
    if kind == "lines":
        return line.endswith(b' END"}') if proto == "host" else line.endswith(b" END")
    if proto == "host":  # the demo's turn is over: state back to idle
        return b'"type":"state"' in line and b'"state":"idle"' in line
    return b'"type": "result"' in line


class Stream:
    """One client connection and what it has received."""

    def __init__(self, sock: socket.socket, args: argparse.Namespace, full: bool) -> None:
        self.sock = sock
        self.proto: str = args.proto
        self.kind: str = args.kind
        self.full = full
        self.latency: bool = args.latency
        self.key: Callable[[Data, int], int] | None = None
        if self.proto == "host":
            self.key = host_key
        elif self.kind == "lines":
            self.key = seq_key
        self.next_key = 1
        self.next_seq = 1
        self.attached = self.proto == "raw"
        self.rest = b""
        self.events = 0
        self.payload = 0
        self.first_ns = self.last_ns = 0
        self.done = False
        self.dropped = False
        self.error: str | None = None
        self.latencies: list[int] = []

    def read(self, buf: bytearray, view: memoryview) -> bool:
        """One ``recv`` into ``buf``, after the partial line kept from the previous one
        (no allocation, no concatenation: ``buf`` is shared by every client and stays
        in the CPU cache); account for it. False at the end of the stream."""
        kept = len(self.rest)
        if 2 * kept > len(buf):  # a line longer than half the buffer: copy instead
            data = self.sock.recv(RECV)
            if data:
                self.feed(self.rest + data, kept + len(data), time.monotonic_ns())
            return bool(data)
        buf[:kept] = self.rest
        got = self.sock.recv_into(view[kept:])
        if got:
            self.feed(buf, kept + got, time.monotonic_ns())
        return got > 0

    def feed(self, data: Data, size: int, now: int) -> None:
        """Account for the bytes ``data[:size]``; only complete lines are looked at."""
        end = data.rfind(b"\n", 0, size) + 1
        self.rest = bytes(data[end:size])
        start = 0
        if end and not self.attached:
            start = data.index(b"\n") + 1
            self._on_response(data[:start])
        if start < end and not self.done:
            self._lines(data, start, end, now)

    def _on_response(self, line: Data) -> None:
        response = json.loads(line)
        self.attached = True
        if not response.get("success"):
            self.fail(f"attach failed: {response.get('error')}")
            self.done = True
            return
        self.next_key = response["payload"]["stream_offset"] + 1

    def fail(self, message: str) -> None:
        """Record the first thing that went wrong."""
        if self.error is None:
            self.error = message

    def _lines(self, data: Data, start: int, end: int, now: int) -> None:
        count = count_lines(data, start, end)
        if not self.events:
            self.first_ns = now
        self.events += count
        self.last_ns = now
        last = max(start, data.rfind(b"\n", start, end - 1) + 1)
        if self.key is not None:
            first_key, last_key = self.key(data, start), self.key(data, last)
            if first_key != self.next_key or last_key != first_key + count - 1:
                self.fail(
                    f"expected {self.next_key} first, got {first_key}..{last_key} in {count} lines"
                )
            self.next_key = last_key + 1
        if self.full:
            self._check_all(data, start, end, count)
        if self.latency:
            stamps = STAMP[self.proto].findall(data, start, end)
            self.latencies.extend([now - int(s) for s in stamps])
        if is_end(self.proto, self.kind, data[last : end - 1]):
            self.done = True

    def _check_all(self, data: Data, start: int, end: int, count: int) -> None:
        if self.proto == "host":
            offsets = [int(x) for x in OFFSETS.findall(data, start, end)]
            if not offsets or offsets != list(range(offsets[0], offsets[0] + count)):
                self.fail("event offsets not contiguous inside a read")
        if self.kind == "lines":
            seqs = [int(x) for x in SEQ[self.proto].findall(data, start, end)]
            if seqs != list(range(self.next_seq, self.next_seq + len(seqs))):
                self.fail(f"flood line {self.next_seq} missing or out of order")
            self.next_seq += len(seqs)
            self.payload += len(seqs)
        else:
            self.payload += data.count(ASSISTANT[self.proto], start, end)

    def verdict(self, count: int) -> None:
        """Final checks once the loop is over."""
        if not self.done:
            self.fail(f"incomplete: {self.events} lines received, no end marker")
        if self.full:
            want = count + 1 if self.kind == "lines" else count
            if self.payload != want:
                self.fail(f"{self.payload} agent lines received, {want} expected")
        if self.proto == "raw" and self.kind == "demo" and self.events != count + 2:
            self.fail(f"{self.events} lines received, {count + 2} expected")


def connect(args: argparse.Namespace, full: bool) -> Stream:
    """Open one client connection (attached when talking to a host)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.socket)
    if args.proto == "host":
        request = {"type": "host.attach", "id": "a", "payload": {"offset": LIVE}}
        sock.sendall(json.dumps(request).encode() + b"\n")
    sock.setblocking(False)
    return Stream(sock, args, full)


def trigger(path: str, text: str) -> None:
    """Send ``text`` to the host's agent (``host.send``) on a connection of its own."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        request = {"type": "host.send", "id": "t", "payload": {"input": text}}
        sock.sendall(json.dumps(request).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    if not json.loads(reply or b"{}").get("success"):
        raise SystemExit(f"host.send failed: {reply!r}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Connect, trigger, receive until every client is done or the deadline passes."""
    streams = [connect(args, i < args.full) for i in range(args.clients)]
    sel = selectors.DefaultSelector()
    buf = bytearray(RECV)
    view = memoryview(buf)
    for each in streams:
        sel.register(each.sock, selectors.EVENT_READ, each)
    cpu0 = time.process_time()
    deadline = time.monotonic() + args.timeout
    triggered = args.proto == "raw"
    started_ns = time.monotonic_ns()  # the relay floods from the connection on
    active = len(streams)
    while active and time.monotonic() < deadline:
        if not triggered and all(s.attached for s in streams):
            started_ns = time.monotonic_ns()
            trigger(args.socket, args.trigger)
            triggered = True
        for key, _ in sel.select(0.2):
            stream = key.data
            try:
                alive = stream.read(buf, view)
            except BlockingIOError:
                continue
            except OSError as exc:
                stream.fail(f"connection error: {exc}")
                alive = False
            if not alive and not stream.done:
                stream.fail(f"disconnected after {stream.events} lines (dropped)")
                stream.done = stream.dropped = True
            if stream.done or not alive:
                sel.unregister(stream.sock)
                active -= 1
    cpu = time.process_time() - cpu0
    for each in streams:
        each.verdict(args.count)
        each.sock.close()
    return summarize(streams, cpu, args, started_ns)


def summarize(
    streams: list[Stream], cpu: float, args: argparse.Namespace, started_ns: int
) -> dict[str, Any]:
    """The JSON result: counts, timing, errors and (with --latency) percentiles."""
    received = [s for s in streams if s.events]
    first = min((s.first_ns for s in received), default=0)
    last = max((s.last_ns for s in received), default=0)
    if received and last == first:
        # a flood small enough to arrive in one read has no first-to-last time: time it
        # from the trigger instead (a rate of NaN broke the report under load)
        first = started_ns
    errors = [f"client {i}: {s.error}" for i, s in enumerate(streams) if s.error]
    if args.proto == "host" and len({s.next_key for s in streams}) > 1:
        errors.append("clients ended at different offsets")
    result: dict[str, Any] = {
        "clients": len(streams),
        "complete": not errors,
        "errors": errors[:10],
        "events_per_client": max((s.events for s in streams), default=0),
        "events_min": min((s.events for s in streams), default=0),
        "dropped": sum(s.dropped for s in streams),
        "duration_s": (last - first) / 1e9,
        "clients_cpu_s": round(cpu, 4),
    }
    if args.latency:
        lat = sorted(x for s in streams for x in s.latencies)
        result["latency_us"] = {
            "samples": len(lat),
            "p50": percentile(lat, 50) / 1e3,
            "p99": percentile(lat, 99) / 1e3,
            "max": (lat[-1] if lat else 0) / 1e3,
        }
    return result


def percentile(ordered: list[int] | list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * pct // 100))
    return float(ordered[int(rank) - 1])


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--proto", choices=("host", "raw"), default="host")
    parser.add_argument("--kind", choices=("lines", "demo"), default="lines")
    parser.add_argument("--count", type=int, required=True, help="agent lines of the flood")
    parser.add_argument("--trigger", default="", help="host.send input that starts it")
    parser.add_argument("--latency", action="store_true", help="collect write->read latency")
    parser.add_argument("--full", type=int, default=1, help="clients that parse every line")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    print(json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
