"""The client's stream side against a real host: raw frames, and requests that never
wait behind events the caller has not read."""

from __future__ import annotations

import asyncio
import json

import uvloop

from agenthost import AsyncClient

from conftest import HostFactory
from hosttools import DEADLINE

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
