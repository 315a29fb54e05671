"""A DaemonClient's watch stream survives frames with escaped lone surrogates, and
skips frames of a kind it does not know.

The daemon forwards its hosts' events as they were sent; a host of another language may
escape half an emoji as ``"\\ud83d"``. A tiny server in the test plays the daemon (one
``daemon.watch`` answered, then such frames, then a plain event), so the whole client
path is proven without a daemon process.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agenthost.daemon.client import DaemonClient
from agenthost.daemon.protocol import Notice
from agenthost.protocol import StreamEvent

TS = "2026-01-01T00:00:00.000000Z"
DEADLINE = 10.0


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"  # ensure_ascii: lone surrogates as escapes


def stream_frames() -> list[bytes]:
    base = {"kind": "event", "type": "output", "agent_id": "w1", "timestamp": TS}
    return [
        line(base | {"offset": 1, "data": "half an emoji \ud83d", "stream": "stdout"}),
        line(
            {
                "kind": "notice",
                "type": "host_gone",
                "agent_id": "w1",
                "timestamp": TS,
                "status": "lost",
                "reason": "\udc00",
            }
        ),  # fmt: skip
        # a kind a later minor version may add: skipped, as the protocol tells clients
        line({"kind": "digest", "type": "summary", "agent_id": "w1", "timestamp": TS}),
        line(base | {"offset": 2, "data": "after", "stream": "stdout"}),
    ]


@pytest_asyncio.fixture
async def fake_daemon() -> AsyncIterator[Path]:
    """A Unix socket server that answers one ``daemon.watch`` and sends the stream."""
    directory = Path(tempfile.mkdtemp(prefix="ahd-", dir="/tmp"))
    path = directory / "daemon.sock"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = json.loads(await reader.readline())
        assert req["type"] == "daemon.watch"
        writer.write(
            line(
                {
                    "kind": "response",
                    "type": req["type"],
                    "id": req.get("id"),
                    "success": True,
                    "payload": {"agents": {}},
                }
            )
        )
        writer.writelines(stream_frames())
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_unix_server(serve, path)
    try:
        yield path
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.asyncio
async def test_a_watch_stream_goes_on_after_escaped_lone_surrogates(fake_daemon: Path) -> None:
    client = DaemonClient(fake_daemon.parent, socket_path=fake_daemon)
    async with client:
        await asyncio.wait_for(client.watch(), DEADLINE)
        first = await client.next_frame(DEADLINE)
        notice = await client.next_frame(DEADLINE)
        last = await client.next_frame(DEADLINE)
    assert isinstance(first, StreamEvent) and first.data == "half an emoji \ud83d"
    assert isinstance(notice, Notice) and notice.model_extra == {
        "status": "lost",
        "reason": "\udc00",
    }
    assert isinstance(last, StreamEvent) and (last.offset, last.data) == (2, "after")
