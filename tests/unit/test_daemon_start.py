"""The daemon's start (issue 15, item 4). The reconcile opens one connection per live
host: the probe's status and the follower's attach go on the same connection. A fake
host here (a lock held in this process, a socket that answers ``host.status`` and
``host.attach``) counts the connections and the requests on each. The rows saved
during the reconcile are written together at its end; discovery reads process
arguments from /proc as psutil did."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from agenthost._version import __version__
from agenthost.daemon.discovery import probe, split_cmdline
from agenthost.daemon.fanout import Hub
from agenthost.daemon.protocol import AgentStatus
from agenthost.daemon.registry import AgentRecord, Registry
from agenthost.daemon.spawner import Spawner
from agenthost.daemon.startup import reconcile, scan_once
from agenthost.daemon.supervisor import Agent, Supervisor
from agenthost.lockfile import HostLock
from agenthost.paths import ensure_private_dir, hosts_dir, lock_path, socket_path
from agenthost.protocol import PROTOCOL_VERSION, AgentInfo, HostInfo, StatusResponse

from hosttools import wait_until

EPOCH = "e1"
HEAD = 7


@dataclass
class FakeHost:
    """Answers status and attach; ``connections`` holds the request types per
    connection, in the order they came."""

    agent_id: str
    connections: list[list[str]] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    """The connections the client closed (their indexes)."""

    def status(self) -> dict[str, object]:
        now = datetime.now(UTC)
        info = StatusResponse(
            host=HostInfo(
                pid=os.getpid(),
                version=__version__,
                protocol_version=PROTOCOL_VERSION,
                started_at=now,
                socket_path="/x",
            ),
            agent=AgentInfo(id=self.agent_id, state="running", started_at=now),
        )
        return info.model_dump(mode="json")

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked: list[str] = []
        self.connections.append(asked)
        index = len(self.connections) - 1
        try:
            while line := await reader.readline():
                request = json.loads(line)
                mtype = request["type"]
                asked.append(mtype)
                payload: dict[str, object] = {}
                if mtype == "host.status":
                    payload = self.status()
                elif mtype == "host.attach":
                    payload = {"agent_id": self.agent_id, "stream_offset": HEAD, "epoch": EPOCH}
                response = {"kind": "response", "type": mtype, "id": request.get("id")}
                response |= {"success": True, "payload": payload}
                writer.write(json.dumps(response).encode() + b"\n")
            self.closed.append(index)
        finally:
            writer.close()


@pytest_asyncio.fixture
async def host(tmp_path: Path) -> AsyncIterator[FakeHost]:
    ensure_private_dir(hosts_dir(tmp_path))
    fake = FakeHost("a")
    lock = HostLock(lock_path(tmp_path, "a"))
    lock.acquire()
    lock.write_info({"pid": os.getpid()})
    server = await asyncio.start_unix_server(fake.serve, socket_path(tmp_path, "a"))
    try:
        yield fake
    finally:
        server.close()
        lock.release()


@pytest.mark.asyncio
async def test_the_reconcile_attaches_on_the_probes_connection(
    tmp_path: Path, host: FakeHost
) -> None:
    with Registry(tmp_path / "daemon.db") as registry:
        registry.save(AgentRecord("a", AgentStatus.RUNNING, epoch=EPOCH, last_offset=HEAD))
        sup = Supervisor(tmp_path, registry, Spawner(tmp_path), Hub())
        try:
            report = await reconcile(sup, attach_timeout=10)
            assert report.reattached == {"a": HEAD}
            assert host.connections == [["host.status", "host.attach"]]
            assert registry.load()["a"].status == AgentStatus.RUNNING
        finally:
            await sup.close()


@pytest.mark.asyncio
async def test_a_rescan_adopts_on_the_probes_connection(tmp_path: Path, host: FakeHost) -> None:
    with Registry(tmp_path / "daemon.db") as registry:
        sup = Supervisor(tmp_path, registry, Spawner(tmp_path), Hub())
        try:
            await scan_once(sup)
            agent = sup.agents["a"]
            await asyncio.wait_for(agent.attached.wait(), 10)
            assert host.connections == [["host.status", "host.attach"]]
        finally:
            await sup.close()


@pytest.mark.asyncio
async def test_a_probe_nobody_follows_is_closed(tmp_path: Path, host: FakeHost) -> None:
    with Registry(tmp_path / "daemon.db") as registry:
        sup = Supervisor(tmp_path, registry, Spawner(tmp_path), Hub())
        agent = sup.agents["a"] = Agent(AgentRecord("a", AgentStatus.RUNNING))
        try:
            assert sup.start(agent, "follow")
            await asyncio.wait_for(agent.attached.wait(), 10)
            # a probe of a host the daemon follows already (a rescan racing a spawn):
            # its connection is closed, not kept open by nobody
            found = await probe(tmp_path, "a", 5)
            assert found.client is not None and found.client.connected
            assert sup.start(agent, "follow", found.status, found.client) is False
            await wait_until(lambda: host.closed == [1], "the probe's connection closed")
            assert host.connections == [["host.status", "host.attach"], ["host.status"]]
        finally:
            await sup.close()


def test_saves_held_are_written_together_at_the_end(tmp_path: Path) -> None:
    with Registry(tmp_path / "daemon.db") as registry:
        sup = Supervisor(tmp_path, registry, Spawner(tmp_path), Hub())
        a, b = AgentRecord("a", AgentStatus.RUNNING), AgentRecord("b", AgentStatus.RUNNING)
        with sup.saves_held():
            sup.save(a)
            sup.save(b)
            a.state = "idle"  # written as it is when the block ends
            sup.save(a)
            assert registry.load() == {}
        rows = registry.load()
        assert sorted(rows) == ["a", "b"] and rows["a"].state == "idle"
        sup.save(AgentRecord("c", AgentStatus.RUNNING))  # not held any more
        assert "c" in registry.load()


def test_split_cmdline_reads_arguments_and_process_titles() -> None:
    argv = ["python", "-m", "agenthost", "serve", "--agent-id", "a"]
    assert split_cmdline(b"\0".join(a.encode() for a in argv) + b"\0") == argv
    # a host forked by the factory: its title (setproctitle) is one string over argv
    assert split_cmdline(" ".join(argv).encode() + b"\0") == argv
    assert split_cmdline(b"") == [""]
