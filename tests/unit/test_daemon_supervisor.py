"""agenthost.daemon.supervisor: one lifecycle (so one follower) per agent, always
(issue 13, item 2). No host process: the lifecycles started here find no host."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agenthost.daemon.fanout import Hub
from agenthost.daemon.protocol import AgentStatus
from agenthost.daemon.registry import AgentRecord, Registry
from agenthost.daemon.spawner import Spawner
from agenthost.daemon.supervisor import Agent, Supervisor


@pytest.mark.asyncio
async def test_start_never_runs_a_second_lifecycle(tmp_path: Path) -> None:
    with Registry(tmp_path / "daemon.db") as registry:
        sup = Supervisor(tmp_path, registry, Spawner(tmp_path), Hub())
        agent = sup.agents["a"] = Agent(AgentRecord("a", AgentStatus.RUNNING))
        before = asyncio.all_tasks()
        try:
            started = sup.start(agent, "follow")
            first = agent.task
            assert first is not None and agent.running
            # the same agent again, as a rescan racing a spawn did: nothing new
            again = [sup.start(agent, "follow"), sup.start(agent, "restart")]
            assert asyncio.all_tasks() - before == {first}
            assert agent.task is first
            assert started is True and again == [False, False]
            # once that lifecycle is over (no host here: it ends at once), a new one runs
            await asyncio.wait_for(first, 10)
            assert agent.record.status == AgentStatus.LOST
            assert sup.start(agent, "follow") is True
            assert agent.task is not first
        finally:
            await sup.close()
