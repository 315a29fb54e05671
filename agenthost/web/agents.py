"""The agents a gateway serves: those of its home, and of the remote machines it was
given (``--remote``). Makes the client for an agent's key and the list of
``GET /api/agents``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError
from agenthost.inventory import gather, gather_remote, known_agents_async
from agenthost.paths import journal_dir, lock_path, socket_path
from agenthost.web.payloads import AgentKey, HttpError, parse_key

LIST_TIMEOUT = 1.0
"""Seconds each host has to answer when the agents are listed."""
REMOTE_TIMEOUT = 10.0
"""Seconds a remote machine has to list its agents (ssh's connection included)."""

log = structlog.get_logger("agenthost.web")


class Agents:
    """The agents of ``home`` (and of ``remotes``: ``[USER@]HOST[:PORT]`` as given)."""

    def __init__(self, home: Path, remotes: tuple[str, ...] = ()) -> None:
        self.home = home
        self.remotes = remotes
        self.machines = frozenset(remotes)

    def key(self, text: str) -> AgentKey:
        """The agent a URL names (HttpError 404 for an invalid one)."""
        return parse_key(text, self.machines)

    def client(self, key: AgentKey, **options: Any) -> AsyncClient:
        """A (not yet connected) client of the agent's host."""
        if key.machine is None:
            return AsyncClient(key.agent_id, home=self.home, **options)
        return AsyncClient(key.agent_id, remote=key.machine, **options)

    async def known(self, key: AgentKey) -> bool:
        """Whether the agent exists (runs, ran, or the daemon knows it) though its host
        may not answer now."""
        if key.machine is not None:
            items = await self._remote_items(key.machine)
            return any(item.get("agent_id") == key.agent_id for item in items)
        agent_id = key.agent_id
        paths = (socket_path(self.home, agent_id), lock_path(self.home, agent_id))
        if any(p.exists() for p in paths) or journal_dir(self.home, agent_id).is_dir():
            return True
        records, _ = await known_agents_async(self.home, timeout=LIST_TIMEOUT)
        return any(r.agent_id == agent_id for r in records)

    async def not_found(self, key: AgentKey, exc: AgentHostError) -> HttpError:
        """The answer when the agent's host could not be reached: 404 for an agent that
        does not exist, else 409 (it exists but does not run)."""
        if await self.known(key):
            return HttpError(409, "agent_not_running", exc.message)
        return HttpError(404, "not_found", f"no agent {str(key)!r}")

    async def items(self) -> list[dict[str, Any]]:
        """``GET /api/agents``: the ``list --json`` objects, each with ``key`` and
        ``machine``; the local agents first, then each remote machine's."""
        local = gather(self.home, timeout=LIST_TIMEOUT)
        remote = [self._remote_items(m) for m in self.remotes]
        found, *others = await asyncio.gather(local, *remote)
        out = [{**item, "key": item["agent_id"], "machine": None} for item in found.items()]
        for items in others:
            out.extend(items)
        return out

    async def _remote_items(self, machine: str) -> list[dict[str, Any]]:
        try:
            items = await gather_remote(machine, timeout=REMOTE_TIMEOUT)
        except AgentHostError as exc:
            log.info("web.remote_unreachable", machine=machine, error=exc.message)
            return []  # an unreachable machine lists nothing; its agents' routes say why
        return [{**item, "key": f"{item['agent_id']}@{machine}"} for item in items]
