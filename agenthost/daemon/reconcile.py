"""The start-up reconcile: what is on disk and in the registry, and what to do about it.

:func:`survey` probes every candidate host in parallel (each probe with a short
timeout), wakes live hosts whose socket file was deleted (SIGUSR1) and probes them
again. :func:`plan` is pure: from the registry's records and the probes it decides
one :class:`Step` per agent, which the supervisor carries out before the daemon
serves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from agenthost.daemon.discovery import (
    HostProbe,
    ProbeKind,
    check_versions,
    probe,
    scan_hosts,
    wait_for_socket,
    wake,
)
from agenthost.daemon.protocol import AgentStatus
from agenthost.daemon.registry import AgentRecord

WAKE_TIMEOUT = 2.0


class Step(StrEnum):
    """What the supervisor does for one agent after the survey."""

    FOLLOW = "follow"
    """A live (or alive but unreachable) host the registry knows: reattach to it from
    the recorded epoch and offset."""
    ADOPT = "adopt"
    """A live host the registry does not know (started with ``serve``): record it and
    follow it from its oldest retained event."""
    INCOMPATIBLE = "incompatible"
    """A live host of another protocol major version: record it, do not attach."""
    LOST = "lost"
    """The registry thought the host alive, but it is gone: mark the agent lost, then
    apply its restart policy."""
    ENDED = "ended"
    """An earlier daemon saw the agent exit, and its lingering host ended while no
    daemon ran: record the run's end as exited (never lost), then apply its restart
    policy."""
    RESTART = "restart"
    """The daemon died while a restart was pending: carry it out."""
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class Planned:
    """The plan for one agent."""

    agent_id: str
    step: Step
    probe: HostProbe | None
    clean: bool = False
    """Remove the stale socket and lock file first."""


def candidates(home: Path, records: Mapping[str, AgentRecord]) -> set[str]:
    """Agent ids to probe: every host file on disk, and every agent the registry
    believes alive or about to be (re)started."""
    known = {a for a, r in records.items() if r.active or r.status == AgentStatus.RESTARTING}
    return scan_hosts(home) | known


async def survey(
    home: Path, agent_ids: set[str], timeout: float
) -> tuple[dict[str, HostProbe], list[str]]:
    """Probe every agent's host in parallel; wake socketless live hosts and probe them
    again. Return the probes by agent id and the ids woken."""
    probes = await asyncio.gather(*(probe(home, a, timeout) for a in sorted(agent_ids)))
    found = {p.agent_id: p for p in probes}
    woken = [
        p.agent_id for p in probes if p.kind is ProbeKind.SOCKETLESS and wake(home, p.agent_id)
    ]
    if woken:
        await asyncio.gather(*(wait_for_socket(home, a, WAKE_TIMEOUT) for a in woken))
        again = await asyncio.gather(*(probe(home, a, timeout) for a in woken))
        found.update((p.agent_id, p) for p in again)
    return found, woken


def plan(records: Mapping[str, AgentRecord], probes: Mapping[str, HostProbe]) -> list[Planned]:
    """One step per agent, sorted by agent id (pure)."""
    out = []
    for agent_id in sorted(set(records) | set(probes)):
        record = records.get(agent_id)
        found = probes.get(agent_id)
        out.append(_plan_one(agent_id, record, found))
    return out


def _plan_one(agent_id: str, record: AgentRecord | None, found: HostProbe | None) -> Planned:
    if found is None:  # not a candidate: the registry knows it ended
        return Planned(agent_id, Step.NOTHING, None)
    kind = found.kind
    if kind is ProbeKind.LIVE:
        assert found.status is not None
        if not check_versions(found.status).compatible:
            return Planned(agent_id, Step.INCOMPATIBLE, found)
        return Planned(agent_id, Step.FOLLOW if record else Step.ADOPT, found)
    if kind in (ProbeKind.UNREACHABLE, ProbeKind.SOCKETLESS):
        # alive (its lock is held): never declared lost; the follower keeps retrying
        return Planned(agent_id, Step.FOLLOW if record else Step.ADOPT, found)
    clean = kind is ProbeKind.STALE
    if record is None:
        return Planned(agent_id, Step.NOTHING, found, clean)
    if record.status == AgentStatus.RESTARTING:
        return Planned(agent_id, Step.RESTART, found, clean)
    if record.status == AgentStatus.EXITED:
        # its exit was seen and recorded: only a run whose end is not yet recorded
        # (a host still counted, host_pid set) has an end to record
        return Planned(agent_id, Step.ENDED if record.host_pid else Step.NOTHING, found, clean)
    if record.active:
        return Planned(agent_id, Step.LOST, found, clean)
    return Planned(agent_id, Step.NOTHING, found, clean)
