"""The client core against a fake server on a socketpair: responses never wait behind
unread stream frames, and the overflow policy with a small bound."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agenthost.errors import DaemonNotRunning, Forbidden, ProtocolError, RequestTimeout
from agenthost.protocol import StreamEvent, decode_message
from agenthost.wire.client import ClientCore, StreamLimit

DEADLINE = 10.0


def event(offset: int, data: str = "x") -> bytes:
    return (
        json.dumps(
            {
                "kind": "event",
                "type": "output",
                "agent_id": "a1",
                "offset": offset,
                "timestamp": "2026-01-01T00:00:00Z",
                "data": data,
            }
        ).encode()
        + b"\n"
    )


def response(request: dict[str, Any], **fields: Any) -> bytes:
    obj = {"kind": "response", "type": request["type"], "id": request.get("id"), "success": True}
    return json.dumps({**obj, **fields}).encode() + b"\n"


class FakeServer:
    """The server's end of a socketpair, driven by the test."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    async def send(self, *frames: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, b"".join(frames))

    async def request(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while b"\n" not in self.buf:
            self.buf += await loop.sock_recv(self.sock, 1 << 16)
        line, _, self.buf = self.buf.partition(b"\n")
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj


def make_core(limit: StreamLimit) -> ClientCore[StreamEvent]:
    return ClientCore(
        Path("/nonexistent/fake.sock"),
        service="host",
        peer="the fake host",
        decode=decode_message,
        connect_error=lambda exc: DaemonNotRunning(f"no fake: {exc}"),
        connect_timeout=DEADLINE,
        id_prefix="t",
        stream_limit=limit,
    )


@pytest_asyncio.fixture
async def pair() -> AsyncIterator[tuple[ClientCore[StreamEvent], FakeServer]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    theirs.setblocking(False)
    core = make_core(StreamLimit(items=3, bytes=1 << 20))
    await core.connect(ours)
    yield core, FakeServer(theirs)
    await core.close()
    theirs.close()


async def offsets(core: ClientCore[StreamEvent], count: int) -> list[int | None]:
    out: list[int | None] = []
    for _ in range(count):
        item = await core.next_stream(DEADLINE, "event")
        out.append(None if item is None else item[0].offset)
    return out


@pytest.mark.asyncio
async def test_a_response_behind_unread_events_is_resolved_at_once(
    pair: tuple[ClientCore[StreamEvent], FakeServer],
) -> None:
    core, server = pair
    asking = asyncio.ensure_future(core.request("host.status", None, DEADLINE))
    request = await server.request()
    await server.send(*(event(i) for i in range(1, 11)), response(request, payload={"n": 1}))
    answer = await asyncio.wait_for(asking, DEADLINE)
    assert answer.payload == {"n": 1}
    assert core.queued == 3 and core.discarded == 7
    # what was queued comes first, then the overflow is reported once
    assert await offsets(core, 4) == [1, 2, 3, None]


@pytest.mark.asyncio
async def test_after_an_overflow_frames_queue_again_from_the_resume_response(
    pair: tuple[ClientCore[StreamEvent], FakeServer],
) -> None:
    core, server = pair
    await server.send(*(event(i) for i in range(1, 6)))
    assert await offsets(core, 4) == [1, 2, 3, None]
    resuming = asyncio.ensure_future(
        core.request("host.attach", {"offset": 3}, DEADLINE, resume_stream=True)
    )
    request = await server.request()
    # frames of the old stream still in flight are discarded; the replay is kept
    await server.send(event(6), event(7), response(request), event(4), event(5))
    await asyncio.wait_for(resuming, DEADLINE)
    assert await offsets(core, 2) == [4, 5]
    assert core.queued == 0


@pytest.mark.asyncio
async def test_a_failed_resume_keeps_discarding(
    pair: tuple[ClientCore[StreamEvent], FakeServer],
) -> None:
    core, server = pair
    await server.send(*(event(i) for i in range(1, 5)))
    assert await offsets(core, 4) == [1, 2, 3, None]
    resuming = asyncio.ensure_future(
        core.request("host.attach", None, DEADLINE, resume_stream=True)
    )
    request = await server.request()
    await server.send(response(request, success=False, code="internal", error="no"), event(5))
    assert not (await asyncio.wait_for(resuming, DEADLINE)).success
    with pytest.raises(RequestTimeout):
        await core.next_stream(0.05, "event")  # event 5 was discarded


@pytest.mark.asyncio
async def test_the_byte_bound_counts_but_one_frame_always_passes() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    theirs.setblocking(False)
    core = make_core(StreamLimit(items=100, bytes=1000))
    try:
        await core.connect(ours)
        server = FakeServer(theirs)
        await server.send(event(1, "y" * 5000), event(2), event(3))
        item = await core.next_stream(DEADLINE, "event")
        assert item is not None and item[0].offset == 1
        assert not item[1].endswith(b"\n") and json.loads(item[1])["data"] == "y" * 5000
        assert await offsets(core, 1) == [None]  # 2 came while the big one filled the bound
        await server.send(event(9))
        with pytest.raises(RequestTimeout, match="no event within"):
            await core.next_stream(0.05, "event")  # still discarding: nothing queued
    finally:
        await core.close()
        theirs.close()


@pytest.mark.asyncio
async def test_forbidden_sent_at_connect_is_the_error_of_the_connection(
    pair: tuple[ClientCore[StreamEvent], FakeServer],
) -> None:
    core, server = pair
    refusal = {"type": "", "id": None}
    await server.send(response(refusal, success=False, code="forbidden", error="uid 5 may not"))
    server.sock.close()
    with pytest.raises(Forbidden, match="uid 5 may not"):
        await core.next_stream(DEADLINE, "event")
    with pytest.raises(Forbidden):
        await core.request("host.ping", None, DEADLINE)


@pytest.mark.asyncio
async def test_a_response_to_another_id_is_a_protocol_error(
    pair: tuple[ClientCore[StreamEvent], FakeServer],
) -> None:
    core, server = pair
    asking = asyncio.ensure_future(core.request("host.ping", None, DEADLINE))
    request = await server.request()
    await server.send(response({**request, "id": "zz"}))
    with pytest.raises(ProtocolError, match="does not match"):
        await asyncio.wait_for(asking, DEADLINE)
