"""The daemon's agents as automation sees them (:class:`agenthost.daemon.automation.Agents`):
spawn, wait, send, stop, and what is known of them, over the supervisor."""

from __future__ import annotations

import asyncio

from agenthost.daemon import commands
from agenthost.daemon.protocol import AgentStatus, DaemonStopRequest, SpawnSpec
from agenthost.daemon.supervisor import Supervisor
from agenthost.errors import AgentNotRunning

SEND_TIMEOUT = 30.0


class SupervisedAgents:
    """:class:`~agenthost.daemon.automation.Agents` over the daemon's supervisor."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    async def spawn(self, spec_json: str) -> bool:
        answer = await commands.spawn(self.sup, SpawnSpec.model_validate_json(spec_json))
        return answer.queued

    async def wait_serving(self, agent_id: str, timeout: float) -> None:
        agent = self.sup.agents.get(agent_id)
        if agent is None:
            raise AgentNotRunning(f"the daemon knows no agent {agent_id!r}")
        await asyncio.wait_for(agent.attached.wait(), timeout)

    async def send(self, agent_id: str, text: str, key: str, origin: dict[str, str]) -> int | None:
        from agenthost.client import AsyncClient  # with the first run, not at start-up

        async with AsyncClient(
            agent_id, home=self.sup.home, request_timeout=SEND_TIMEOUT
        ) as client:
            answer = await client.send(text, key=key, origin=origin)
        return answer.offset

    async def stop(self, agent_id: str, reason: str) -> None:
        await commands.stop(self.sup, DaemonStopRequest(agent_id=agent_id, reason=reason))

    def known(self, agent_id: str) -> bool:
        return agent_id in self.sup.agents

    def state(self, agent_id: str) -> str | None:
        agent = self.sup.agents.get(agent_id)
        if agent is None:
            return None
        record = agent.record
        if record.status not in (AgentStatus.RUNNING, AgentStatus.UNREACHABLE):
            return None
        return record.state or "starting"

    def terminal(self, agent_id: str) -> bool:
        agent = self.sup.agents.get(agent_id)
        spec = agent.record.spec if agent is not None else None
        return spec is not None and spec.agent == "pty"
