"""The daemon's limits, sans-IO: how many agents run, which queued one goes next, when an
idle agent is stopped. Rules in, decision and reason out; the supervisor applies them
(:mod:`agenthost.daemon.commands` at a spawn, :class:`~agenthost.daemon.supervisor.Supervisor`
when a place frees or an agent goes idle)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from agenthost.daemon.protocol import AgentStatus
from agenthost.timefmt import go_duration

LIVE_STATUSES: Final = frozenset(
    {
        AgentStatus.SPAWNING,
        AgentStatus.RUNNING,
        AgentStatus.UNREACHABLE,
        AgentStatus.RESTARTING,
    }
)
"""Statuses that take a place under ``--max-agents``: a host runs its agent, is being
started, or will be started again after a backoff (a restart never loses its place to a
newcomer). An agent that exited (its host may linger, with nothing running), stopped,
failed, was lost or waits in the queue takes none."""


@dataclass(frozen=True, slots=True)
class Limits:
    """``agenthost daemon --max-agents N [--queue] --idle-stop DURATION``."""

    max_agents: int | None = None
    queue: bool = False
    idle_stop: float | None = None
    """Seconds an agent may stay ``idle`` before the daemon stops it; None: never."""

    def describe(self) -> dict[str, object]:
        """What ``daemon.ping`` reports."""
        return {"max_agents": self.max_agents, "queue": self.queue, "idle_stop": self.idle_stop}


@dataclass(frozen=True, slots=True)
class Admission:
    """The decision on one spawn."""

    verdict: Literal["admit", "queue", "refuse"]
    reason: str = ""


def admit(limits: Limits, live: int) -> Admission:
    """Admit a spawn when fewer than ``max_agents`` agents are live; else queue it
    (``--queue``) or refuse it, saying why."""
    if limits.max_agents is None or live < limits.max_agents:
        return Admission("admit")
    runs = f"the daemon runs {live} agent{'s' if live != 1 else ''}"
    limit = f"its limit (--max-agents {limits.max_agents})"
    if limits.queue:
        return Admission("queue", f"{runs}, {limit}: queued until one ends")
    return Admission("refuse", f"{runs}, {limit}")


def to_start(limits: Limits, live: int, queued: Iterable[tuple[str, float]]) -> list[str]:
    """The queued agents (``(agent_id, queued_at)``) to start now, oldest first: as
    many as there are free places."""
    order = [agent for agent, _ in sorted(queued, key=lambda q: (q[1], q[0]))]
    if limits.max_agents is None:
        return order
    return order[: max(0, limits.max_agents - live)]


def idle_stop_delay(limits: Limits, state: str) -> float | None:
    """Seconds until an agent that just entered ``state`` is stopped for idleness, or
    None. Only ``idle`` counts: ``waiting`` needs a person, and a running turn works."""
    if limits.idle_stop is None or state != "idle":
        return None
    return limits.idle_stop


def idle_reason(limits: Limits) -> str:
    """The stop's reason, as the host logs it and the registry keeps it."""
    assert limits.idle_stop is not None
    return f"idle for {go_duration(limits.idle_stop)} (--idle-stop)"
