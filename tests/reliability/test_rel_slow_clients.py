"""Slow and stuck clients never slow the agent or the other clients, and cost bounded memory.

What the host does with a client that cannot keep up (docs/protocol.md section 9,
docs/architecture.md "Fan-out"): each attached connection has a send queue of at most
``--client-buffer`` bytes; past it the client *lags* and is served later from the ring,
or from the journal once the ring evicted what it needs; a client that stops reading is
never dropped while the journal still has its next event; past the transport's
high-water mark the host stops reading that connection's requests.

The stuck clients here: attached clients that never read (with a 4 KiB receive
buffer), a client that reads one byte per interval, a client gone quiet in the middle
of a request frame, and an attached client gone quiet in the middle of one. While they
hang on, a flood runs; the flood agent times its own writes, so a host that waited for
any client would show up as a slower agent (the ratio is recorded, not asserted).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from relkit import (
    QUIET,
    Figure,
    Fleet,
    HostFactory,
    StreamCheck,
    check_complete,
    flood_agent,
    request_bytes,
    rss,
)

from hosttools import HostProc, RawConn, wait_for

MiB = 1 << 20
CLIENT_BUFFER = 64 << 10
LINES = 50_000
ROUNDS = 3  # floods without, then with, the stuck clients: the best of each is compared
BEHIND = 5_000  # events behind the head (the ring holds 1000): served from the journal
NEVER_READERS = 5  # attached BEHIND: they lag at once
NEVER_LIVE = 5  # attached at the head: they fill their queue from live batches
JOURNAL_READ = 256 << 10  # bytes the host reads from the journal per catch-up step


def trigger(host: HostProc, lines: int) -> None:
    with host.raw() as conn:
        resp = conn.request("host.send", {"input": str(lines)})
    assert resp["success"], resp


def attached_count(host: HostProc) -> int:
    return host.log().count('"client.attached"')


class OneByteReader(threading.Thread):
    """An attached client that reads one byte per ``interval`` (it paces itself)."""

    def __init__(self, host: HostProc, offset: int, interval: float = 0.002) -> None:
        super().__init__(daemon=True)
        self.offset = offset
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(str(host.socket_path))
        self.sock.sendall(request_bytes("host.attach", {"offset": offset}, rid="a"))
        self.sock.settimeout(30)
        self.interval = interval
        self.received = bytearray()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):  # pacing, not a synchronisation
            byte = self.sock.recv(1)
            if not byte:
                return
            self.received += byte


def finish_half_frame(conn: RawConn, head: int) -> dict[str, Any]:
    """Complete a half-sent ``host.status`` frame on an attached connection that read
    nothing so far; read its attach response, every event up to ``head`` (checked) and
    the status response, in whatever order the host interleaves them."""
    conn.send_raw(b'load": {}}\n')
    attach = conn.response("att")
    assert attach["success"], attach
    expected = attach["payload"]["stream_offset"] + 1
    status: dict[str, Any] | None = None
    while status is None or expected <= head:
        f = conn.frame()
        if f["kind"] == "response":
            status = f
            continue
        assert f["offset"] == expected, (f["offset"], expected)
        expected += 1
    return status


def test_stuck_clients_slow_neither_the_agent_nor_a_normal_client(
    host_factory: HostFactory, figure: Figure
) -> None:
    host = host_factory(
        "slow",
        "--agent",
        "lines",
        *QUIET,
        "--client-buffer",
        str(CLIENT_BUFFER),
        command=flood_agent(),
    )
    fleet = Fleet()
    stuck = Fleet()  # read only at the end
    half_attached = host.raw(timeout=60)
    half_plain = host.raw(timeout=60)
    slow: OneByteReader | None = None

    def floods(rounds: int) -> float:
        """Run ``rounds`` floods; the agent's best time for one."""
        for _ in range(rounds):
            marks = len(normal.done_marks) + 1
            trigger(host, LINES)
            fleet.run(lambda m=marks: len(normal.done_marks) >= m, 120, f"flood {marks}")  # type: ignore[misc]
        return min(normal.agent_seconds[-rounds:])

    try:
        normal = fleet.attach(host.socket_path, 0, "normal")
        fleet.run(fleet.all_attached, 30, "the normal client's attach")
        floods(1)  # warms the host and the agent up
        base_seconds = floods(ROUNDS)
        before_head = normal.last_offset
        rss_before = rss(host.pid)

        behind = before_head - BEHIND
        never = [
            stuck.attach(host.socket_path, behind, f"never-reader {i}", rcvbuf=4096)
            for i in range(NEVER_READERS)
        ]
        never += [
            stuck.attach(host.socket_path, 1 << 62, f"never-reader live {i}", rcvbuf=4096)
            for i in range(NEVER_LIVE)
        ]
        slow = OneByteReader(host, behind)
        slow.start()
        half_attached.send("host.attach", {"offset": 1 << 62}, id="att")
        half_attached.send_raw(b'{"type": "host.status", "id": "half", "pay')
        half_plain.send_raw(b'{"type": "host.status", "id": "half", "pay')
        attached = 1 + len(never) + 2  # normal, never-readers, slow, half_attached
        wait_for(lambda: attached_count(host) >= attached, 60, "every stuck client attached")

        # the agent finishes its floods while the stuck clients are stuck
        stuck_seconds = floods(ROUNDS)
        rss_stuck = rss(host.pid)
        head = normal.last_offset
        total_lines = (1 + 2 * ROUNDS) * LINES
        check_complete([normal], head, total_lines)
        assert all(c.events == 0 and c.attach is None for c in never)  # never read a byte
        assert host.alive()

        # the half frames complete: both connections were kept and still serve
        half_plain.send_raw(b'load": {}}\n')
        assert half_plain.response("half")["success"]
        assert finish_half_frame(half_attached, head)["success"]

        # the never-readers read at last: every event after the offset they asked for,
        # exactly once (the ring holds 1000; the rest comes from the journal)
        stuck.run(
            lambda: all(c.next_offset > head for c in never), 120, "never-readers catching up"
        )
        check_complete(never, head, total_lines)
        assert all(c.first_offset == behind + 1 for c in never[:NEVER_READERS])
        assert all(c.first_offset == before_head + 1 for c in never[NEVER_READERS:])
        assert all(c.attach and c.attach["truncated"] is False for c in never)

        # the one-byte reader leaves mid-line and comes back from its last whole event
        slow.stopped.set()
        slow.join(30)
        partial = StreamCheck(slow.sock, behind, "one-byte reader")
        partial.feed(bytes(slow.received))
        assert partial.error is None, partial.error
        slow_got = partial.last_offset
        slow.sock.close()
        again = fleet.attach(host.socket_path, slow_got, "one-byte reader, again")
        fleet.run(lambda: again.next_offset > head, 120, "the one-byte reader's rest")
        assert again.attach and again.attach["truncated"] is False
        assert again.first_offset == slow_got + 1
        assert again.error is None and again.next_offset == head + 1
    finally:
        fleet.close()
        stuck.close()
        half_attached.close()
        half_plain.close()
        if slow is not None:
            slow.stopped.set()
            slow.sock.close()
    assert '"client.dropped"' not in host.log()  # with a journal nobody had to be dropped

    stuck_clients = NEVER_READERS + NEVER_LIVE + 3
    growth = rss_stuck - rss_before
    ctx = {"lines": LINES, "floods_each": ROUNDS, "client_buffer": CLIENT_BUFFER}
    ctx["stuck_clients"] = stuck_clients
    figure("flood rate without stuck clients (best)", LINES / base_seconds, "lines/s", **ctx)
    figure("flood rate with stuck clients (best)", LINES / stuck_seconds, "lines/s", **ctx)
    figure("flood rate ratio with/without stuck clients", base_seconds / stuck_seconds, "", **ctx)
    figure("host RSS growth with stuck clients", growth / MiB, "MiB", **ctx)
    figure("one-byte reader got before leaving", slow_got, "events", **ctx)
    # What the stuck clients did not read is ~100 B an event x 150k x 13, ~200 MB. The
    # host holds about a client buffer plus a journal read or two per client (measured:
    # ~0.9 MiB each), plus a fixed allowance for the allocator arenas of the worker
    # threads that read the journal.
    assert growth < 32 * MiB + stuck_clients * (CLIENT_BUFFER + 4 * JOURNAL_READ)
