"""Pipelined requests with big answers, sent by a client that does not read.

Each `host.history` answer here is about 16 MiB and each `host.attach` replays about
15 MiB. A client that pipelines 32 of them and reads nothing must cost the host no
more than its client buffer plus a bounded constant: the host answers one request,
stops when the connection's writes are paused, and stops reading that client (see
docs/protocol.md, "Slow clients"). Once the client reads, it gets every answer, in
request order and complete.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from conftest import HostFactory
from hosttools import HostProc, lines_agent, wait_for

MiB = 1 << 20
PIPELINED = 32
RSS_BOUND = 64 * MiB  # client buffer (16 MiB) + a bounded constant; unbounded was +400-500


def rss(host: HostProc) -> int:
    return int(psutil.Process(host.pid).memory_info().rss)


def hog(host: HostProc, frames: bytes) -> socket.socket:
    """A connection that sends ``frames`` at once and then reads nothing (yet)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(host.socket_path))
    sock.sendall(frames)
    return sock


def growth_while_unread(host: HostProc, base: int) -> int:
    """The host's RSS growth once it has read the hog's requests and done what it will
    do with them. Another client's pings go round trips after the hog's bytes were
    already waiting, so they also prove the host is still responsive."""
    peak = 0
    with host.raw() as other:
        for _ in range(5):
            assert other.request("host.ping")["success"]
            peak = max(peak, rss(host) - base)
    return peak


def frames_of(sock: socket.socket) -> Iterator[dict[str, Any]]:
    """Every frame the host sends on ``sock``, parsed (each must be valid JSON)."""
    sock.settimeout(30)
    buf = bytearray()
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            assert not buf, "an incomplete last line"
            return
        scan = len(buf)  # only the new bytes can hold a newline
        buf += chunk
        start = 0
        while (end := buf.find(b"\n", scan)) >= 0:
            yield json.loads(buf[start:end])
            start = scan = end + 1
        del buf[:start]


def test_pipelined_history_answers_are_held_back_not_buffered(host_factory: HostFactory) -> None:
    host = host_factory("h1", "--agent", "lines", command=["sh", "-c", "exec cat >/dev/null"])
    # 16 entries of ~1 MiB: the history's byte bound (16 MiB) keeps all of them
    texts = [f"{i:04d}" + "h" * (1_000_000 - 4) for i in range(16)]
    with host.raw() as conn:
        for text in texts:
            # 16 MiB is more than the stdin queue (4 MiB): on a loaded machine `cat`
            # may lag, and the host then answers "busy" (the contract); send again.
            def sent(text: str = text) -> bool:
                resp = conn.request("host.send", {"input": text})
                assert resp["success"] or resp.get("code") == "busy", resp
                return bool(resp["success"])

            wait_for(sent, what="the agent's stdin queue to drain")
        assert conn.request("host.history", {"limit": 0})["payload"]["total"] == 16
    base = rss(host)
    frames = b"".join(
        json.dumps({"type": "host.history", "id": i}).encode() + b"\n" for i in range(PIPELINED)
    )
    sock = hog(host, frames)
    grown = growth_while_unread(host, base)
    print(f"history: RSS +{grown / MiB:.1f} MiB while {PIPELINED} answers are unread")
    assert grown < RSS_BOUND, f"+{grown / MiB:.0f} MiB"
    answers = frames_of(sock)
    for i in range(PIPELINED):
        resp = next(answers)
        assert resp["kind"] == "response" and resp["id"] == i and resp["success"], i
        entries = resp["payload"]["entries"]
        assert [e["content"] for e in entries] == texts
        assert [e["role"] for e in entries] == ["user"] * 16
        assert resp["payload"]["total"] == 16
    sock.shutdown(socket.SHUT_WR)
    assert list(answers) == []  # then EOF: nothing more, nothing cut
    sock.close()
    with host.raw() as other:
        assert other.request("host.ping")["success"]


@pytest.mark.parametrize("ring", ["ring", "journal"])
def test_pipelined_attach_replays_are_held_back_not_buffered(
    host_factory: HostFactory, ring: str
) -> None:
    # 240 events of 64 KiB (15 MiB): all in the ring, or (ring of 40 events) mostly
    # in the journal only, so the replay comes from there.
    count = 240
    code = (
        "import sys\n"
        "line = 'e' * 65536 + '\\n'\n"
        f"for _ in range({count}):\n"
        "    sys.stdout.write(line)\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    args = ["--agent", "lines"] + (["--ring-size", "40"] if ring == "journal" else [])
    host = host_factory("a1", *args, command=lines_agent(code))

    def head() -> int:
        with host.raw() as conn:
            offset: int = conn.request("host.history", {"limit": 1})["payload"]["offset"]
        return offset

    wait_for(lambda: head() >= count, what="the agent's output")
    last = head()
    base = rss(host)
    frames = b"".join(
        json.dumps({"type": "host.attach", "id": i, "payload": {"offset": 0}}).encode() + b"\n"
        for i in range(PIPELINED)
    )
    sock = hog(host, frames)
    grown = growth_while_unread(host, base)
    print(f"attach ({ring}): RSS +{grown / MiB:.1f} MiB while {PIPELINED} replays are unread")
    assert grown < RSS_BOUND, f"+{grown / MiB:.0f} MiB"
    # Every attach answer in order; after each, events from offset 1 on, contiguous,
    # exactly once (the next attach starts the replay again); the last one complete.
    answers = frames_of(sock)
    expected_id = 0
    next_offset = 0
    while expected_id < PIPELINED or next_offset <= last:
        frame = next(answers)
        if frame["kind"] == "response":
            assert frame["id"] == expected_id and frame["success"], frame
            assert frame["payload"]["stream_offset"] == last
            assert frame["payload"]["truncated"] is False
            expected_id += 1
            next_offset = 1
            continue
        assert expected_id > 0, "an event before the first attach answer"
        assert frame["offset"] == next_offset, (frame["offset"], next_offset)
        if frame["type"] == "output":
            assert len(frame["data"]) == 65536
        next_offset += 1
    sock.close()
    with host.raw() as other:
        assert other.request("host.ping")["success"]
