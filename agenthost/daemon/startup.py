"""Carrying out the start-up reconcile, and the periodic rescan of the hosts directory.

The reconcile runs before the daemon serves (and before it tells systemd READY=1):
survey and plan (:mod:`agenthost.daemon.reconcile`), then follow every live host from
its recorded position, adopt the hosts nobody recorded, clean stale files, mark lost
agents and apply their restart policy; it returns once every live host was reattached
(or the attach timeout passed). The rescan, every few seconds while the daemon runs,
adopts hosts started behind its back, cleans leftovers, and wakes (SIGUSR1) followed
hosts whose socket file a cleanup job deleted.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import structlog

from agenthost.daemon.discovery import (
    HostProbe,
    ProbeKind,
    check_versions,
    discard,
    probe,
    remove_stale,
    scan_hosts,
    wake,
)
from agenthost.daemon.policy import Outcome
from agenthost.daemon.protocol import AgentStatus, OlderHost, ReconcileReport, SpawnSpec
from agenthost.daemon.reconcile import Planned, Step, candidates, plan, survey
from agenthost.daemon.registry import AgentRecord
from agenthost.daemon.supervisor import Agent, Supervisor
from agenthost.lockfile import is_lock_held
from agenthost.paths import lock_path, socket_path
from agenthost.protocol import FINAL_STATES

log = structlog.get_logger("agenthost.daemon.startup")


async def reconcile(sup: Supervisor, *, attach_timeout: float = 10.0) -> ReconcileReport:
    """Bring the daemon's view in line with the hosts that are really there."""
    started_at = datetime.now(UTC)
    t0 = time.monotonic()
    records = sup.registry.load()
    for agent_id, record in records.items():
        sup.agents[agent_id] = Agent(record)
    probes, woken = await survey(sup.home, candidates(sup.home, records), sup.probe_timeout)
    report = ReconcileReport(started_at=started_at, found=len(probes), woken=woken)
    waiting: list[Agent] = []
    # the rows of every agent in one transaction at the end, not one or two each
    # (a hundred hosts were two hundred transactions); nobody reads the registry
    # meanwhile: the daemon does not serve yet
    with sup.saves_held():
        for planned in plan(records, probes):
            await _carry_out(sup, planned, report, waiting)
        if waiting:
            await _wait_attached(waiting, attach_timeout)
    for agent in waiting:
        if agent.reattached_from is not None:
            report.reattached[agent.record.agent_id] = agent.reattached_from
    report = report.model_copy(update={"seconds": round(time.monotonic() - t0, 4)})
    for older in report.older:
        log.warning(
            "host.older_version",
            agent_id=older.agent_id,
            version=older.version,
            protocol_version=older.protocol_version,
        )
    log.info(
        "daemon.reconciled",
        seconds=report.seconds,
        found=report.found,
        reattached=len(report.reattached),
        adopted=len(report.adopted),
        lost=len(report.lost),
        stale_removed=len(report.stale_removed),
        woken=len(report.woken),
    )
    return report


async def _carry_out(
    sup: Supervisor, planned: Planned, report: ReconcileReport, waiting: list[Agent]
) -> None:
    """One agent's step of the plan; the agent of a live host followed joins ``waiting``."""
    agent_id, found = planned.agent_id, planned.probe
    if planned.clean and remove_stale(sup.home, agent_id):
        report.stale_removed.append(agent_id)
    if planned.step in (Step.FOLLOW, Step.ADOPT):
        assert found is not None
        agent = follow(sup, agent_id, found)
        if planned.step is Step.ADOPT:
            report.adopted.append(agent_id)
        if found.kind is ProbeKind.LIVE:
            assert found.status is not None
            waiting.append(agent)
            host = found.status.host
            if check_versions(found.status).older:
                report.older.append(
                    OlderHost(
                        agent_id=agent_id,
                        version=host.version,
                        protocol_version=host.protocol_version,
                    )
                )
        else:
            report.unreachable.append(agent_id)
    elif planned.step is Step.INCOMPATIBLE:
        assert found is not None
        await discard(found)
        _mark_incompatible(sup, agent_id, found)
        report.incompatible.append(agent_id)
    elif planned.step is Step.LOST:
        agent = sup.agents[agent_id]
        outcome = sup.vanished_outcome(agent)  # its log may say how its agent ended
        if outcome is Outcome.LOST:
            report.lost.append(agent_id)
            reason = "the host was gone when the daemon started"
        else:
            reason = "the agent exited while no daemon ran (its host's log)"
        if sup.end_run(agent, outcome, reason).restart:
            sup.start(agent, "restart")
            report.restarting.append(agent_id)
    elif planned.step is Step.ENDED:
        agent = sup.agents[agent_id]
        reason = "the host ended while no daemon ran"
        if sup.end_run(agent, Outcome.EXITED, reason).restart:
            sup.start(agent, "restart")
            report.restarting.append(agent_id)
    elif planned.step is Step.RESTART:
        sup.start(sup.agents[agent_id], "restart")
        report.restarting.append(agent_id)


async def _wait_attached(agents: list[Agent], timeout: float) -> None:
    waits = [asyncio.ensure_future(a.attached.wait()) for a in agents]
    _, pending = await asyncio.wait(waits, timeout=timeout)
    for task in pending:
        task.cancel()
    if pending:
        log.warning("daemon.reattach_slow", waiting=len(pending), timeout=timeout)


def follow(sup: Supervisor, agent_id: str, found: HostProbe) -> Agent:
    """Start following a live host (recording it first if it is new to the registry),
    on the connection its probe kept open."""
    agent = sup.agents.get(agent_id)
    if agent is None:
        agent = sup.agents[agent_id] = Agent(_adopted(agent_id, found))
    record = agent.record
    ended = found.status is not None and found.status.agent.state in FINAL_STATES
    if not (record.status == AgentStatus.EXITED and (ended or found.status is None)):
        # RUNNING also for an agent that ended unseen: the follower records its end
        live = found.kind is ProbeKind.LIVE
        record.status = AgentStatus.RUNNING if live else AgentStatus.UNREACHABLE
    record.host_pid = found.host_pid or record.host_pid
    sup.save(record)  # (a full disk must not keep the daemon from following it)
    sup.start(agent, "follow", found.status, found.client)
    return agent


def _adopted(agent_id: str, found: HostProbe) -> AgentRecord:
    """A record for a host the daemon did not start (no restart policy)."""
    spec = None
    if found.status is not None:
        info = found.status.agent
        spec = SpawnSpec(
            agent_id=agent_id,
            agent=info.backend or "lines",
            cwd=info.worktree or None,
            project=info.project,
            task=info.task,
            description=info.description,
        )
    return AgentRecord(agent_id, AgentStatus.RUNNING, managed=False, spec=spec)


async def scan_once(sup: Supervisor) -> None:
    """One rescan of the hosts directory (see the module doc)."""
    home = sup.home
    for agent_id in sorted(scan_hosts(home)):
        agent = sup.agents.get(agent_id)
        if agent is not None and agent.running:
            _check_socket(sup, agent)
            continue
        if _ours(sup, agent_id):
            continue
        found = await probe(home, agent_id, sup.probe_timeout)
        if _ours(sup, agent_id):
            await discard(found)
            continue  # a spawn began, or a lifecycle started, while the probe waited
        if found.kind is ProbeKind.LIVE:
            assert found.status is not None
            if check_versions(found.status).compatible:
                log.info("host.adopted", agent_id=agent_id)
                follow(sup, agent_id, found)
                continue
            await discard(found)
            if agent is None or agent.record.status != AgentStatus.INCOMPATIBLE:
                # as the start-up reconcile does: listed, never followed (a rescan used
                # to skip it silently, so a host of another major started while the
                # daemon ran was never reported)
                _mark_incompatible(sup, agent_id, found)
        elif found.kind is ProbeKind.SOCKETLESS:
            if wake(home, agent_id):
                log.info("host.woken", agent_id=agent_id)
        elif found.kind is ProbeKind.STALE and remove_stale(home, agent_id):
            log.info("host.stale_removed", agent_id=agent_id)


def _ours(sup: Supervisor, agent_id: str) -> bool:
    """Whether the daemon itself deals with the agent's host: a ``daemon.spawn`` for it
    is under way (its host answers before the spawn returns and starts the follower;
    adopting it then made a second follower), or its lifecycle runs."""
    agent = sup.agents.get(agent_id)
    return agent_id in sup.spawning or (agent is not None and agent.running)


def _mark_incompatible(sup: Supervisor, agent_id: str, found: HostProbe) -> None:
    """Record a live host of another protocol major: listed, never followed."""
    assert found.status is not None
    known = sup.agents.get(agent_id)
    record = (
        known.record
        if known is not None
        else AgentRecord(agent_id, AgentStatus.INCOMPATIBLE, managed=False)
    )
    record.status = AgentStatus.INCOMPATIBLE
    record.host_version = found.status.host.version
    record.host_protocol_version = found.status.host.protocol_version
    sup.agents[agent_id] = known or Agent(record)
    sup.save(record)
    log.warning(
        "host.incompatible",
        agent_id=agent_id,
        protocol_version=found.status.host.protocol_version,
    )


def _check_socket(sup: Supervisor, agent: Agent) -> None:
    """Wake a followed host whose socket file is gone (seen twice in a row, so a host
    that is exiting, socket removed and lock not yet released, is left alone)."""
    agent_id = agent.record.agent_id
    if socket_path(sup.home, agent_id).exists() or not is_lock_held(lock_path(sup.home, agent_id)):
        agent.socketless_seen = 0
        return
    agent.socketless_seen += 1
    if agent.socketless_seen >= 2 and wake(sup.home, agent_id):
        agent.socketless_seen = 0
        log.info("host.woken", agent_id=agent_id)
