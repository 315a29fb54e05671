"""The daemon's requests that act on agents: spawn, stop, forget.

Functions of the :class:`~agenthost.daemon.supervisor.Supervisor` (as
:mod:`agenthost.daemon.startup` is), so that module keeps to the agents' lifecycles.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from agenthost.daemon import worktrees
from agenthost.daemon.files import purge_journal
from agenthost.daemon.forking import forked_record, inherit
from agenthost.daemon.journalnote import write_note
from agenthost.daemon.limits import admit
from agenthost.daemon.protocol import (
    ENDED_STATUSES,
    AgentStatus,
    DaemonStopRequest,
    DaemonStopResponse,
    ForgetRequest,
    ForgetResponse,
    NoticeType,
    SpawnResponse,
    SpawnSpec,
)
from agenthost.daemon.registry import REDACTED, AgentRecord
from agenthost.daemon.supervisor import Agent, Supervisor, resumable
from agenthost.errors import (
    AgentHostError,
    AgentNotRunning,
    Busy,
    HostAlreadyRunning,
    LimitReached,
)
from agenthost.lockfile import is_lock_held
from agenthost.paths import lock_path, log_path, socket_path
from agenthost.protocol import StopResponse
from agenthost.timefmt import short_duration

log = structlog.get_logger("agenthost.daemon.commands")


async def spawn(sup: Supervisor, spec: SpawnSpec) -> SpawnResponse:
    """Start a host for a new agent (or a known one that is not running)."""
    # the same checks `serve` makes, before anything starts (the adapters are imported
    # with the first spawn: a daemon that only reattaches its hosts needs none)
    from agenthost.agents import AdapterOptions, make_adapter

    fork = spec.fork
    options = AdapterOptions(
        resume=spec.resume,
        params=dict(spec.agent_opts),
        fork=fork.session_id if fork else None,
        fork_at=fork.point if fork else None,
    )
    make_adapter(spec.agent, options).build_command(spec.command)
    if fork is not None:
        spec = _fork_spec(sup, spec)
    sup.spawner.check_program(spec)  # installed here, or refused before anything
    sup.spawner.check_resources(spec)  # enforceable here, or refused before anything
    agent_id = spec.agent_id
    if agent_id in sup.spawning:
        raise HostAlreadyRunning(f"agent {agent_id!r} is being spawned")
    sup.spawning.add(agent_id)
    try:
        return await _spawn(sup, spec)
    finally:
        sup.spawning.discard(agent_id)


async def _spawn(sup: Supervisor, spec: SpawnSpec) -> SpawnResponse:
    agent_id = spec.agent_id
    known = sup.agents.get(agent_id)
    if known is not None and _over(sup, known):
        # its run is over: at most its host lingers (final state, history) or its
        # lifecycle is still recording the end; a new spawn replaces both
        await _retire(sup, known)
    if known is not None and (known.running or known.record.status not in ENDED_STATUSES):
        raise HostAlreadyRunning(
            f"agent {agent_id!r} is already running under the daemon "
            f"(status {known.record.status})",
            hint=f"stop it first (agenthost stop {agent_id}), or choose another --agent-id",
        )
    if is_lock_held(lock_path(sup.home, agent_id)):
        raise HostAlreadyRunning(f"a host for agent {agent_id!r} is already running")
    if spec.worktree is not None:  # its own git worktree (made now, or found again)
        spec = await asyncio.to_thread(
            worktrees.prepare, sup.home, spec, log_path(sup.home, agent_id)
        )
    old = known.record if known is not None else None
    if old is not None and old.stop_reason == "idle" and old.session_id and spec.resume is None:
        # stopped for idleness: the same id carries on where it was (its journal goes
        # on anyway), in the same session where the agent can resume one
        if resumable(spec.agent):
            spec = spec.model_copy(update={"resume": old.session_id})
    admission = admit(sup.limits, sup.live_count(exclude=agent_id))
    if admission.verdict == "refuse":
        raise LimitReached(
            admission.reason,
            hint="stop an agent first (agenthost stop ID), or start the daemon with --queue",
        )
    if spec.fork is not None:  # its journal starts with where it came from
        await asyncio.to_thread(write_note, sup.home, agent_id, forked_record(spec))
    record = AgentRecord(
        agent_id,
        AgentStatus.QUEUED if admission.verdict == "queue" else AgentStatus.SPAWNING,
        spec=spec,
        epoch=old.epoch if old else "",  # a journaled host continues its stream
        last_offset=old.last_offset if old else 0,
        created_at=old.created_at if old else time.time(),
        queued_at=time.time() if admission.verdict == "queue" else None,
    )
    agent = sup.agents[agent_id] = Agent(record)
    if admission.verdict == "queue":
        sup.save(record)
        log.info("agent.queued", agent_id=agent_id, reason=admission.reason)
        return SpawnResponse(
            agent_id=agent_id,
            host_pid=0,
            socket_path=str(socket_path(sup.home, agent_id)),
            log_path=str(log_path(sup.home, agent_id)),
            queued=True,
        )
    return await launch_host(sup, agent)


def _fork_spec(sup: Supervisor, spec: SpawnSpec) -> SpawnSpec:
    """A fork's spec, checked: a new id, and (when the daemon runs the parent) the
    parent's environment and no more than the parent's limits."""
    assert spec.fork is not None
    if spec.agent_id in sup.agents:
        raise HostAlreadyRunning(
            f"agent {spec.agent_id!r} exists already: a fork starts a new agent",
            hint=f"choose another id, or agenthost forget {spec.agent_id}",
        )
    parent = sup.agents.get(spec.fork.from_agent)
    # (in its CLI's TUI, the parent's own spec is the structured one it returns to)
    record = parent.record if parent is not None else None
    parent_spec = record.structured_spec or record.spec if record is not None else None
    if record is None or parent_spec is None or not record.managed:
        return spec  # a host started with serve: what its client built
    return inherit(spec, parent_spec, REDACTED)


def launch_queued(sup: Supervisor, agent: Agent) -> None:
    """Start the host of a queued agent whose turn came (the supervisor calls it when a
    place frees). A failure is recorded on the agent, as for any spawn."""

    async def launch() -> None:
        agent_id = agent.record.agent_id
        sup.spawning.add(agent_id)
        try:
            await launch_host(sup, agent)
        except AgentHostError as exc:
            log.warning("agent.dequeue_failed", agent_id=agent_id, error=exc.message)
        finally:
            sup.spawning.discard(agent_id)

    sup.background(launch())


async def launch_host(sup: Supervisor, agent: Agent) -> SpawnResponse:
    """Record the agent as spawning, start its host, follow it."""
    record = agent.record
    agent_id, spec = record.agent_id, record.spec
    assert spec is not None
    record.status = AgentStatus.SPAWNING
    record.queued_at = None
    try:
        # not recorded, not started (a full disk): refused, and the id stays free
        sup.registry.save(record)
        host = await sup.spawner.spawn(spec)
    except AgentHostError as exc:
        record.status = AgentStatus.FAILED
        record.last_error = exc.message
        sup.save(record)
        raise
    record.status = AgentStatus.RUNNING
    record.host_pid = host.pid
    record.host_started_at = time.time()
    sup.save(record)  # the host runs: follow it even if this cannot be written now
    sup.hub.notice(NoticeType.AGENT_SPAWNED, agent_id, host_pid=host.pid, restarts=0)
    sup.start(agent, "follow")
    return SpawnResponse(
        agent_id=agent_id,
        host_pid=host.pid,
        socket_path=str(host.socket_path),
        log_path=str(host.log_path),
        unit=host.unit,
    )


def _over(sup: Supervisor, agent: Agent) -> bool:
    """Whether the agent's run is over: it ended, or its host is gone (no lock) and
    its lifecycle is only catching up (a restart being waited for is not over)."""
    status = agent.record.status
    if status in ENDED_STATUSES:
        return True
    host_gone = not is_lock_held(lock_path(sup.home, agent.record.agent_id))
    return host_gone and status in (AgentStatus.RUNNING, AgentStatus.UNREACHABLE)


async def _retire(sup: Supervisor, agent: Agent) -> None:
    """Stop the lingering host of an agent that ended, and wait for its lifecycle."""
    agent.stop_requested = True
    agent.wakeup.set()
    if is_lock_held(lock_path(sup.home, agent.record.agent_id)):
        with contextlib.suppress(AgentHostError):
            await sup.stop_host(agent.record.agent_id, True, 5.0, "replaced by a new spawn")
    if agent.task is not None and not agent.task.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(agent.task), 30.0)


async def stop(sup: Supervisor, request: DaemonStopRequest) -> DaemonStopResponse:
    """Stop the agent's host and never restart it; answer after it exited."""
    agent = sup.agents.get(request.agent_id)
    if agent is None:
        raise AgentNotRunning(f"the daemon knows no agent {request.agent_id!r}")
    record = agent.record
    before = str(record.status)
    agent.stop_requested = True
    agent.wakeup.set()
    result: StopResponse | None = None
    started = time.monotonic()
    if is_lock_held(lock_path(sup.home, record.agent_id)):
        with contextlib.suppress(AgentHostError):  # it ended meanwhile: fine
            result = await sup.stop_host(
                record.agent_id, request.force, request.timeout, request.reason
            )
    if agent.task is not None and not agent.task.done():
        with contextlib.suppress(TimeoutError):  # the end is recorded by the lifecycle
            await asyncio.wait_for(asyncio.shield(agent.task), 30.0)
    if record.status != AgentStatus.STOPPED:
        record.status = AgentStatus.STOPPED
        record.next_restart_at = None
        sup.save(record)
    elapsed = time.monotonic() - started
    if result is None:
        return DaemonStopResponse(
            agent_id=record.agent_id,
            stopped=True,
            exit_code=record.exit_code,
            signal=record.signal,
            graceful=False,
            duration=short_duration(elapsed),
            duration_seconds=round(elapsed, 3),
            final_state=record.state,
            previous_status=before,
        )
    return DaemonStopResponse(
        agent_id=record.agent_id, previous_status=before, **result.model_dump()
    )


async def forget(sup: Supervisor, request: ForgetRequest) -> ForgetResponse:
    """Remove an agent that does not run from the registry (and, with ``purge``, its
    journal). A live agent is refused (``busy``): it must be stopped first."""
    agent_id = request.agent_id
    agent = sup.agents.get(agent_id)
    host_alive = is_lock_held(lock_path(sup.home, agent_id))
    if agent is not None and agent.running and not host_alive and _over(sup, agent):
        # stopped a moment ago (`agenthost stop`, then forget): the host is gone and
        # the lifecycle is recording the end; let it finish
        await _retire(sup, agent)
    # a queued agent has no host and no lifecycle yet: forgetting it takes it out of
    # the queue (as stopping it would)
    done = ENDED_STATUSES | {AgentStatus.QUEUED}
    live = agent is not None and (agent.running or agent.record.status not in done)
    if live or host_alive:
        status = f" (status {agent.record.status})" if agent is not None else ""
        raise Busy(
            f"agent {agent_id!r} is live{status}: a live agent is not forgotten",
            hint=f"stop it first: agenthost stop {agent_id}",
        )
    purged = purge_journal(sup.home, agent_id) if request.purge else False
    spec = agent.record.spec if agent is not None else None
    removal = await asyncio.to_thread(worktrees.remove, spec) if spec is not None else None
    sup.agents.pop(agent_id, None)
    sup.hub.forget(agent_id)
    if sup.notifier is not None:
        sup.notifier.forget(agent_id)
    forgotten = sup.registry.forget(agent_id)
    answer = worktrees.forget_response(agent_id, forgotten, purged, removal)
    if agent is None:
        return answer
    return answer.model_copy(update={"previous_status": str(agent.record.status)})
