"""One follower per agent, always (issue 13, item 2): real daemon, real hosts.

A rescan of the hosts directory every few milliseconds races the daemon's own spawns:
a host the daemon is still starting (its socket answers, ``daemon.spawn`` has not
returned yet) must not be adopted a second time. If it is, two followers publish the
same events: the merged stream repeats offsets and says ``gap`` with ``after ==
before``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_daemon_chaos import spawn_all

from agenthost.daemon.fanout import Hub
from agenthost.daemon.registry import Registry
from agenthost.daemon.spawner import Spawner
from agenthost.daemon.startup import scan_once
from agenthost.daemon.supervisor import Supervisor

from conftest import HostFactory
from daemontools import DaemonWorld, StreamCollector, flood_command

AGENTS = 12
LINES = 100


def test_a_rescan_racing_spawns_follows_each_agent_once(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0.002")
    watch = StreamCollector(world)
    ids = [f"r{i:02d}" for i in range(AGENTS)]
    # each agent prints its lines at once, while the daemon is still in its spawn
    spawn_all(world, ids, flood_command("--count", str(LINES), "--rate", "0"))
    last = f"line {LINES}"
    try:
        watch.wait(lambda c: all(c.saw(a, last) for a in ids), what="every agent's last line")
        # the stream has settled: whatever a second follower sent came with the first
        for agent_id in ids:
            offsets = watch.offsets(agent_id)
            assert offsets == list(range(1, len(offsets) + 1)), f"{agent_id}: {offsets[:40]}"
        gaps = [n for n in watch.notices if n["type"] == "gap"]
        assert gaps == []
        attached = [n["agent_id"] for n in watch.notices if n["type"] == "host_attached"]
        assert sorted(attached) == sorted(ids)  # one attach per agent, none repeated
    finally:
        watch.close()
    assert daemon.events("host.adopted") == []  # spawned by the daemon: never adopted
    agents = world.agents()
    assert all(agents[a]["status"] == "running" and agents[a]["managed"] for a in ids)


@pytest.mark.asyncio
async def test_a_rescan_leaves_a_host_being_spawned_to_its_spawn(
    home: Path, host_factory: HostFactory
) -> None:
    # the moment the race needs, held still: the host answers, its spawn is under way
    host_factory("s1", command=flood_command("--count", "0", "--rate", "20"))
    with Registry(home / "daemon.db") as registry:
        sup = Supervisor(home, registry, Spawner(home), Hub())
        try:
            sup.spawning.add("s1")
            await scan_once(sup)
            assert "s1" not in sup.agents  # neither adopted nor followed
            sup.spawning.discard("s1")
            await scan_once(sup)  # the same host, nobody spawning it: adopted
            agent = sup.agents["s1"]
            assert agent.running and not agent.record.managed
            await asyncio.wait_for(agent.attached.wait(), 10)
            assert agent.follower is not None and agent.follower.attaches == 1
        finally:
            await sup.close()
