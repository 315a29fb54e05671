"""Every agent of a home, as ``agenthost list --json`` and ``GET /api/agents`` show it:
the hosts found in the hosts directory (probed in parallel) merged with what the daemon
knows (lost, failed, stopped agents, restarts). :func:`gather` does the I/O;
:func:`json_items` is the pure merge, tested without processes. :func:`gather_remote`
asks another machine over ssh."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agenthost.errors import AgentHostError, RegistryError, RemoteError
from agenthost.remote import Remote, as_remote

if TYPE_CHECKING:
    from agenthost.client import DiscoveredHost
    from agenthost.daemon.protocol import DaemonAgent

KnownSource = Literal["daemon", "registry", "none"]


@dataclass(frozen=True, slots=True)
class Inventory:
    """What :func:`gather` found."""

    hosts: list[DiscoveredHost]
    known: dict[str, DaemonAgent]
    """The daemon's agents by id (those of ``project`` only, when one is given)."""
    source: KnownSource
    """Where ``known`` came from: the running daemon, its registry on disk (no daemon
    answered), or nowhere."""

    def items(self) -> list[dict[str, Any]]:
        """The ``list --json`` objects (:func:`json_items`)."""
        return json_items(self.hosts, self.known)


async def known_agents_async(
    home: Path, *, timeout: float = 1.0
) -> tuple[list[DaemonAgent], KnownSource]:
    """What the daemon knows, and from where: ``"daemon"`` (asked the running daemon),
    ``"registry"`` (read its database: no daemon answers) or ``"none"`` (no daemon, no
    readable registry)."""
    from agenthost.daemon.client import DaemonClient, daemon_alive
    from agenthost.daemon.files import registry_path
    from agenthost.daemon.registry import Registry

    if daemon_alive(home):
        try:
            async with DaemonClient(
                home, connect_timeout=timeout, request_timeout=timeout * 5
            ) as client:
                return await client.list(), "daemon"
        except AgentHostError:
            pass  # reconciling, or stuck: what it wrote is the next best thing
    path = registry_path(home)
    if not path.exists():
        return [], "none"

    def read() -> list[DaemonAgent]:
        with Registry(path, readonly=True) as registry:
            return [r.to_wire() for r in registry.load().values()]

    try:
        return await asyncio.to_thread(read), "registry"
    except RegistryError:
        return [], "none"  # listing the hosts matters more than what the daemon knew


async def gather(home: Path, *, project: str | None = None, timeout: float = 1.0) -> Inventory:
    """Probe the hosts of ``home`` and ask its daemon, at the same time; every host's
    answer within ``timeout`` seconds (unreachable ones are listed as such)."""
    from agenthost.client import discover_hosts_async

    hosts, (records, source) = await asyncio.gather(
        discover_hosts_async(home, project=project, timeout=timeout, include_unreachable=True),
        known_agents_async(home, timeout=timeout),
    )
    known = {
        r.agent_id: r
        for r in records
        if project is None or (r.spec is not None and r.spec.project == project)
    }
    return Inventory(hosts, known, source)


REMOTE_LIST_TIMEOUT: float = 15.0
"""Seconds :func:`gather_remote` gives a machine (ssh's connect included)."""


async def gather_remote(
    remote: Remote | str,
    *,
    project: str | None = None,
    timeout: float = REMOTE_LIST_TIMEOUT,
    home: str | Path | None = None,
) -> list[dict[str, Any]]:
    """The ``list --json`` objects of another machine (``agenthost list --json`` run
    there over ssh, in its default home or ``home`` there), each with ``"machine"``: the
    remote as written (the string given, else ``str(remote)``). ``timeout`` covers the
    whole command; the remote gives each of its hosts a fraction of it.

    Raise RemoteError when ssh fails, agenthost is not there or fails, it does not
    finish in time, or what it prints is not a list of agents.
    """
    from agenthost.wire.ssh import run_remote

    machine = as_remote(remote)
    assert machine is not None
    args = ["list", "--json", "--timeout", f"{max(0.05, min(1.0, timeout / 4)):g}"]
    if project is not None:
        args += ["--project", project]
    if home is not None:
        args += ["--home", str(home)]
    out = await run_remote(machine, args, timeout=timeout, target="`agenthost list`")
    return remote_items(machine, out, name=remote if isinstance(remote, str) else None)


def remote_items(remote: Remote, out: bytes, *, name: str | None = None) -> list[dict[str, Any]]:
    """What ``agenthost list --json`` printed on ``remote``, checked (a list of objects
    with a string ``agent_id``), each with ``"machine"`` added: ``name`` (the remote as
    the user wrote it) or ``str(remote)``. Raise RemoteError for anything else."""
    try:
        items = json.loads(out)
    except ValueError as exc:
        raise RemoteError(
            f"{remote} did not answer `agenthost list --json` with JSON: {exc}"
        ) from None
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("agent_id"), str) for i in items
    ):
        raise RemoteError(f"{remote} answered `agenthost list --json` with something else")
    machine = str(remote) if name is None else name
    return [{**item, "machine": machine} for item in items]


def json_items(
    hosts: Sequence[DiscoveredHost], known: Mapping[str, DaemonAgent]
) -> list[dict[str, Any]]:
    """``agenthost list --json``: one object per agent, sorted by agent id
    (:func:`agenthost.agentlist.merge` of the models' JSON)."""
    from agenthost.agentlist import HostSeen, merge

    seen = [
        HostSeen(
            h.agent_id,
            str(h.socket_path),
            None if h.status is None else h.status.model_dump(mode="json", exclude_none=True),
            h.error,
            h.alive,
        )
        for h in hosts
    ]
    return merge(seen, {k: r.model_dump(mode="json", exclude_none=True) for k, r in known.items()})
