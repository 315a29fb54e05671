"""The daemon forwards each host event as the bytes the host sent: its follower relays
the frame, never a re-encoding (which changes the field order and the timestamp's
digits). One real host; the daemon's supervisor runs in the test's loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agenthost.client import AsyncClient
from agenthost.daemon.fanout import Hub
from agenthost.daemon.registry import Registry
from agenthost.daemon.spawner import Spawner
from agenthost.daemon.startup import scan_once
from agenthost.daemon.supervisor import Supervisor

from conftest import HostFactory
from hosttools import DEADLINE, HostProc, lines_agent

LINES = ["plain", "h\u00e9llo \x1b[1mbold\x1b[0m", 'quote " and \\ backslash']
PRINTER = lines_agent(f"for line in {LINES!r}:\n    print(line, flush=True)\ninput()\n")


@dataclass
class RecordingHub(Hub):
    """A hub that keeps every frame published to it."""

    want: int = 0
    frames: list[bytes] = field(default_factory=list)
    enough: asyncio.Event = field(default_factory=asyncio.Event)

    def publish(self, agent_id: str, offset: int, frame: bytes) -> None:
        self.frames.append(frame)
        if len(self.frames) >= self.want:
            self.enough.set()
        super().publish(agent_id, offset, frame)


def host_lines(host: HostProc, count: int) -> list[bytes]:
    """The first ``count`` event lines of an attach at 0, as the host sent them."""
    with host.raw() as conn:
        conn.send("host.attach", {"offset": 0})
        data = b""
        while data.count(b"\n") < count + 1:  # the response, then the events
            chunk = conn.sock.recv(1 << 16)
            assert chunk, "the host closed the connection"
            data += chunk
    lines = [line + b"\n" for line in data.split(b"\n")[: count + 1]]
    assert b'"kind":"response"' in lines[0]
    return lines[1:]


@pytest.mark.asyncio
async def test_the_daemon_publishes_the_hosts_own_bytes(
    home: Path, host_factory: HostFactory
) -> None:
    host = host_factory("b1", "--agent", "lines", command=PRINTER)
    expected = await asyncio.to_thread(host_lines, host, len(LINES) + 1)  # + the state event
    with Registry(home / "daemon.db") as registry:
        hub = RecordingHub(want=len(expected))
        sup = Supervisor(home, registry, Spawner(home), hub)
        try:
            await scan_once(sup)  # adopts the host and follows it
            await asyncio.wait_for(hub.enough.wait(), DEADLINE)
        finally:
            await sup.close()
    assert hub.frames[: len(expected)] == expected


@pytest.mark.asyncio
async def test_a_backfill_from_the_host_reads_the_hosts_own_bytes(
    host_factory: HostFactory,
) -> None:
    from agenthost.daemon.backfill import HostSource

    host = host_factory("b2", "--agent", "lines", command=PRINTER)
    expected = await asyncio.to_thread(host_lines, host, len(LINES) + 1)
    async with AsyncClient("b2", home=host.home) as client:
        epoch = (await client.attach(0)).response.epoch
    source = HostSource(host.home, "b2", epoch, DEADLINE)
    start, frames = await source.read(1, len(expected))
    assert (start, frames) == (1, expected)
