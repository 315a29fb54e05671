"""The agents a gateway serves: those of its home, and of the remote machines it was
given (``--remote``, reached over ssh). Makes the client for an agent's key and the
list of ``GET /api/agents``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import structlog

from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError
from agenthost.follow import Backoff
from agenthost.inventory import gather, gather_remote, known_agents_async
from agenthost.paths import journal_dir, lock_path, socket_path
from agenthost.web.payloads import AgentKey, HttpError, parse_key
from agenthost.wire.client import StreamLimit

LIST_TIMEOUT: Final = 1.0
"""Seconds each host has to answer when the agents are listed."""
REMOTE_TIMEOUT: Final = 10.0
"""Seconds a remote machine has to list its agents (ssh's connection included)."""
STREAM_LIMIT: Final = StreamLimit(items=256, bytes=1 << 20)
"""What one browser's stream may queue in the gateway while the browser is slower than
the agent: past it the client attaches again after what it delivered, and the host
replays the rest (from its ring or journal), so a flood costs each stream at most this
much memory instead of the whole flood (measured: 457 MiB for 200 streams under a
/flood 500 with the default limit)."""
REMOTE_FRESH: Final = 5.0
"""Seconds a remote machine's list is reused (each listing is an ssh connection)."""

log = structlog.get_logger("agenthost.web")


class Agents:
    """The agents of ``home`` and of ``remotes`` (``[USER@]HOST[:PORT]``, as given:
    the ``machine`` of their agents and the part after ``@`` of their keys)."""

    def __init__(self, home: Path, remotes: tuple[str, ...] = ()) -> None:
        self.home = home
        self.remotes = tuple(dict.fromkeys(remotes))
        self.machines = frozenset(self.remotes)
        self._lists: dict[str, tuple[float, list[dict[str, Any]]]] = {}
        self._listing: dict[str, asyncio.Task[list[dict[str, Any]]]] = {}

    def key(self, text: str) -> AgentKey:
        """The agent a URL names (HttpError 404 for an invalid one)."""
        return parse_key(text, self.machines)

    def client(self, key: AgentKey) -> AsyncClient:
        """A (not yet connected) client of the agent's host (through ssh for a remote
        one)."""
        if key.machine is None:
            return AsyncClient(key.agent_id, home=self.home, stream_limit=STREAM_LIMIT)
        return AsyncClient(key.agent_id, remote=key.machine, stream_limit=STREAM_LIMIT)

    def backoff(self, key: AgentKey) -> Backoff:
        """Pauses between attempts of a stream to reach the host again (longer for a
        remote one: each attempt is an ssh connection)."""
        return Backoff(0.05, 2.0 if key.machine is None else 10.0)

    async def known(self, key: AgentKey) -> bool:
        """Whether the agent exists (runs, ran, or the daemon knows it) though its host
        may not answer now."""
        if key.machine is not None:
            items = await self.remote_items(key.machine, fresh=True)
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
        ``machine``; the local agents first, then each remote machine's (an unreachable
        machine lists none)."""
        found, *others = await asyncio.gather(
            gather(self.home, timeout=LIST_TIMEOUT), *map(self.remote_items, self.remotes)
        )
        out = [{**item, "key": item["agent_id"], "machine": None} for item in found.items()]
        for items in others:
            out.extend(items)
        return out

    async def remote_items(self, machine: str, *, fresh: bool = False) -> list[dict[str, Any]]:
        """The agents of a remote machine, as listed at most REMOTE_FRESH seconds ago
        (``fresh``: listed now); one listing at a time per machine."""
        loop = asyncio.get_running_loop()
        cached = self._lists.get(machine)
        if cached is not None and not fresh and loop.time() - cached[0] < REMOTE_FRESH:
            return cached[1]
        task = self._listing.get(machine)
        if task is None:
            task = asyncio.create_task(self._list_remote(machine))
            self._listing[machine] = task
            task.add_done_callback(lambda _: self._listing.pop(machine, None))
        items = await asyncio.shield(task)
        self._lists[machine] = (loop.time(), items)
        return items

    async def _list_remote(self, machine: str) -> list[dict[str, Any]]:
        try:
            items = await gather_remote(machine, timeout=REMOTE_TIMEOUT)
        except AgentHostError as exc:
            log.info("web.remote_unreachable", machine=machine, error=exc.message)
            return []  # its agents' own routes say why
        # the machine as the user wrote it, which the keys use
        return [
            {**item, "key": f"{item['agent_id']}@{machine}", "machine": machine} for item in items
        ]
