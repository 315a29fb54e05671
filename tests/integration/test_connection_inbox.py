"""The host connection's inbox policy, in one process over a real socket pair.

The real :class:`Connection`, :class:`HostServer` and :class:`AgentStream`; the only
stand-in is the request handler, which answers ping, history and attach the way the
host does. The client end reads nothing until the test says so, so we can look at what
the host did meanwhile: answered one big request, stopped reading, and buffered no more
than its high-water mark plus one piece or slice.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvloop
from pydantic import BaseModel

from agenthost.agents.base import Chat
from agenthost.host.server import PUMP_BYTES, Connection, HostServer, Reply
from agenthost.host.stream import HISTORY_PIECE, AgentStream
from agenthost.protocol import (
    AttachRequest,
    HistoryRequest,
    MessageType,
    Request,
    encode_response,
)
from agenthost.wire.server import HIGH_WATER

ENTRY = 256 << 10  # bytes of text per history entry
EVENT = 64 << 10  # bytes of data per output event


class Handler:
    """Answers like the host: ping at once, history in pieces, attach then replay."""

    def __init__(self) -> None:
        self.stream = AgentStream(
            "t1",
            self.broadcast,
            lambda data: None,
            ring_size=1000,
            ring_bytes=16 << 20,
            history_size=1000,
            history_bytes=16 << 20,
        )
        self.server: HostServer | None = None
        self.served: list[Any] = []

    def broadcast(self, first: int, data: bytes, count: int) -> None:
        if self.server is not None:
            self.server.broadcast(first, data, count)

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel, request: Request
    ) -> Reply:
        self.served.append(request.id)
        if mtype is MessageType.HISTORY:
            assert isinstance(payload, HistoryRequest)
            return self.stream.history_page(request.id, payload.limit)
        if mtype is MessageType.ATTACH:
            assert isinstance(payload, AttachRequest)
            response, start = self.stream.attach_plan(payload.offset)
            conn.send(encode_response(mtype, request.id, response))
            conn.attach(start)
            return None
        return encode_response(mtype, request.id, {})


class Pair:
    """A host connection and the raw client socket at its other end."""

    def __init__(self, handler: Handler, server: HostServer, conn: Connection, sock: socket.socket):
        self.handler = handler
        self.server = server
        self.conn = conn
        self.sock = sock
        self.buf = bytearray()
        self.sending: list[asyncio.Task[None]] = []

    def send(self, data: bytes) -> None:
        """Send in the background: the host may stop reading before it has it all."""
        loop = asyncio.get_running_loop()
        self.sending.append(loop.create_task(loop.sock_sendall(self.sock, data)))

    async def until(self, predicate: Callable[[], bool], what: str) -> None:
        """Let the loop run until ``predicate`` holds (a deadline, not a fixed wait)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not predicate():
            assert loop.time() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.001)  # polling interval of the condition wait

    def buffered(self) -> int:
        assert self.conn.transport is not None
        return self.conn.transport.get_write_buffer_size()

    async def frame(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while (end := self.buf.find(b"\n")) < 0:
            chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 1 << 20), 10)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line = bytes(self.buf[:end])
        del self.buf[: end + 1]
        obj = json.loads(line)  # every frame one complete, valid line
        assert isinstance(obj, dict)
        return obj

    async def eof(self) -> bool:
        loop = asyncio.get_running_loop()
        return not self.buf and not await asyncio.wait_for(loop.sock_recv(self.sock, 1), 10)


def run(
    test: Callable[[Pair], Coroutine[Any, Any, None]], fill: Callable[[AgentStream], None]
) -> None:
    async def main() -> None:
        handler = Handler()
        fill(handler.stream)
        server = HostServer(Path("/nonexistent"), handler.stream.ring, handler)
        handler.server = server
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        theirs.setblocking(False)
        loop = asyncio.get_running_loop()
        _, conn = await loop.connect_accepted_socket(lambda: Connection(server), ours)
        try:
            await test(Pair(handler, server, conn, theirs))
        finally:
            theirs.close()
            await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def history_of_16(stream: AgentStream) -> None:
    stream.publish([Chat({"role": "user", "content": f"{i:02d}" + "c" * ENTRY}) for i in range(16)])


def request(mtype: str, rid: Any, payload: Any = None) -> bytes:
    return json.dumps({"type": mtype, "id": rid, "payload": payload or {}}).encode() + b"\n"


def test_pipelined_history_requests_wait_while_writes_are_paused() -> None:
    async def test(pair: Pair) -> None:
        frames = [request("host.history", i) for i in range(8)]
        frames += [b"{not json\n", request("host.ping", "p"), b"x" * ((1 << 20) + 2)]
        pair.send(b"".join(frames))
        await pair.until(lambda: pair.conn.write_paused, "the writes to pause")
        assert pair.handler.served == [0]
        # One answer in progress, nothing else served, the client not read any more,
        # and no more buffered than the high-water mark and one piece of the answer.
        assert pair.buffered() <= HIGH_WATER + HISTORY_PIECE + ENTRY + 1024
        assert pair.conn.transport is not None and not pair.conn.transport.is_reading()
        for i in range(8):
            resp = await pair.frame()
            assert resp["id"] == i and resp["success"], resp
            entries = resp["payload"]["entries"]
            assert [e["content"][:2] for e in entries] == [f"{n:02d}" for n in range(16)]
            assert all(len(e["content"]) == ENTRY + 2 for e in entries)
            assert resp["payload"]["total"] == 16
        assert (await pair.frame())["code"] == "bad_request"
        assert (await pair.frame())["id"] == "p"
        assert (await pair.frame())["code"] == "frame_too_large"
        assert await pair.eof()
        assert pair.handler.served == [*range(8), "p"]
        await asyncio.gather(*pair.sending)

    run(test, history_of_16)


def test_a_replay_waits_for_the_drain_and_so_do_the_requests_behind_it() -> None:
    def events(stream: AgentStream) -> None:
        stream.publish_lines([b"e" * EVENT] * 200, "stdout")

    async def test(pair: Pair) -> None:
        frames = [request("host.attach", i, {"offset": 0}) for i in range(4)]
        pair.send(b"".join([*frames, request("host.ping", "p")]))
        await pair.until(lambda: pair.conn.write_paused, "the writes to pause")
        assert pair.handler.served == [0]
        assert pair.buffered() <= HIGH_WATER + PUMP_BYTES + EVENT + 1024
        # Each attach answer in order, each replay from offset 1 without a gap until
        # the next answer; the ping answered after the last attach (between two events
        # of its replay: answers do not wait for a replay to end); the event published
        # during the replay exactly once, after offset 200.
        expected, offset, pinged = 0, 0, False
        while offset <= 201 or not pinged:
            frame = await pair.frame()
            if frame.get("id") == "p":
                assert expected == 4 and not pinged
                pinged = True
            elif frame["kind"] == "response":
                assert frame["id"] == expected and frame["payload"]["stream_offset"] == 200
                expected, offset = expected + 1, 1
            else:
                assert frame["offset"] == offset, (frame["offset"], offset)
                assert len(frame["data"]) == (EVENT if offset <= 200 else 4)
                offset += 1
                if expected == 4 and offset == 101:  # a new event while it replays
                    pair.handler.stream.publish_lines([b"live"], "stdout")
                    assert pair.buffered() <= HIGH_WATER + PUMP_BYTES + EVENT + 1024
        assert pair.handler.served == [0, 1, 2, 3, "p"]
        assert not pair.buf

    run(test, events)


def test_events_never_land_inside_an_answer_written_in_pieces() -> None:
    async def test(pair: Pair) -> None:
        pair.send(request("host.attach", "a", {"offset": 16}))
        assert (await pair.frame())["id"] == "a"
        pair.send(request("host.history", "h"))
        await pair.until(lambda: pair.conn.write_paused, "the writes to pause")
        for n in range(5):  # the agent goes on printing meanwhile
            pair.handler.stream.publish_lines([f"line {n}".encode()], "stdout")
        resp = await pair.frame()
        assert resp["id"] == "h" and len(resp["payload"]["entries"]) == 16
        assert [(await pair.frame())["data"] for _ in range(5)] == [f"line {n}" for n in range(5)]
        pair.send(request("host.ping", "p"))
        assert (await pair.frame())["id"] == "p"  # and nothing in between: exactly once

    run(test, history_of_16)
