"""The client's stream side against a real host: raw frames, and requests that never
wait behind events the caller has not read."""

from __future__ import annotations

import asyncio
import json

import uvloop

from agenthost import AsyncClient
from agenthost.client import EVENT_QUEUE
from agenthost.protocol import MessageType

from conftest import HostFactory
from hosttools import DEADLINE, lines_agent
from hosttools import wait_until as until

CAT = ["cat"]


def test_recv_frame_gives_the_event_and_its_bytes_as_sent(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)

    async def main() -> None:
        async with AsyncClient("a1", home=host.home) as client:
            await client.send("hello")
            await client.attach(0)
            while True:
                event, frame = await client.recv_frame(DEADLINE)
                assert not frame.endswith(b"\n")
                raw = json.loads(frame)
                assert raw["kind"] == "event" and raw["offset"] == event.offset
                assert client.last_offset == event.offset
                if event.type == "output":
                    assert raw["data"] == event.data == "hello"
                    return

    uvloop.run(asyncio.wait_for(main(), DEADLINE))


FLOOD = 20_000


def test_requests_answer_while_an_attach_is_not_read(host_factory: HostFactory) -> None:
    """A request on an attached connection whose events nobody reads is answered at
    once (it used to wait behind a full event queue until its timeout); then reading
    gives every offset 1..N exactly once, in order, although the client could not queue
    them all."""
    code = f"for i in range({FLOOD}):\n    print(i)\n"
    host = host_factory("a1", "--agent", "lines", "--linger", "600", command=lines_agent(code))
    host.wait_state("done", "error")

    async def main() -> tuple[list[int], int]:
        async with AsyncClient("a1", home=host.home, request_timeout=30) as client:
            sub = await client.attach(0)
            head = sub.response.stream_offset
            assert head > FLOOD
            # The host streams the whole journal meanwhile; nothing reads it. Wait until
            # the client holds all it queues for an idle reader.
            await until(lambda: client.events_queued >= EVENT_QUEUE)
            status = await client.request(MessageType.STATUS, timeout=5)
            assert status["agent"]["id"] == "a1"
            await client.status()  # and again, with the events still unread
            offsets = []
            async for event in sub:
                offsets.append(event.offset)
                if event.offset >= head:
                    break
            return offsets, head

    offsets, head = uvloop.run(asyncio.wait_for(main(), 120))
    assert offsets == list(range(1, head + 1))
