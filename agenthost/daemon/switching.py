"""``daemon.switch``: a structured agent's own TUI on the same session, and back.

To the TUI: the structured host is stopped (refused while a turn runs or a permission
request waits: a person would lose it), then, under the same agent id (so the same
journal goes on, offsets and all), a terminal agent runs the CLI's own resume of the
agent's session (:mod:`agenthost.daemon.tuispec`). The registry keeps the structured
spec (``structured_spec``), so a daemon killed meanwhile still knows the agent is
switched. Back: the TUI's host is stopped and the structured agent starts again,
resuming the newest session the TUI reported. When the TUI ends on its own (the person
quits it), the supervisor returns to the structured agent itself
(:meth:`~agenthost.daemon.supervisor.Supervisor.returns_from_tui`). Each switch is a
``governance`` record in the journal (:mod:`agenthost.daemon.journalnote`).

A function of the :class:`~agenthost.daemon.supervisor.Supervisor`, as
:mod:`agenthost.daemon.commands` is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from typing import Any

import structlog

from agenthost.client import AsyncClient
from agenthost.daemon.commands import launch_host
from agenthost.daemon.journalnote import governance_record, write_note
from agenthost.daemon.protocol import (
    ENDED_STATUSES,
    AgentStatus,
    SwitchRequest,
    SwitchResponse,
)
from agenthost.daemon.registry import AgentRecord
from agenthost.daemon.supervisor import Agent, Supervisor
from agenthost.daemon.tuispec import (
    check_kind,
    check_switchable,
    program_for,
    to_structured,
    to_tui,
)
from agenthost.errors import AgentHostError, AgentNotRunning, Busy, ConfigError
from agenthost.lockfile import is_lock_held
from agenthost.paths import lock_path, socket_path

log = structlog.get_logger("agenthost.daemon.switching")

BUSY_STATES = frozenset({"running", "waiting", "starting"})
"""Agent states in which a switch is refused: a turn or a question would be lost."""


async def switch(
    sup: Supervisor, request: SwitchRequest, daemon_env: Mapping[str, str] | None = None
) -> SwitchResponse:
    """Carry out ``daemon.switch``; answer once the new host serves."""
    agent = sup.agents.get(request.agent_id)
    if agent is None:
        raise AgentNotRunning(f"the daemon knows no agent {request.agent_id!r}")
    agent_id = request.agent_id
    if agent_id in sup.spawning:
        raise Busy(f"agent {agent_id!r} is being spawned or switched", hint="try again")
    sup.spawning.add(agent_id)
    try:
        if request.to == "tui":
            env = os.environ if daemon_env is None else daemon_env
            return await _to_tui(sup, agent, request, env)
        return await _to_structured(sup, agent, request)
    finally:
        sup.spawning.discard(agent_id)


def _unchanged(sup: Supervisor, agent: Agent, to: str) -> SwitchResponse:
    record = agent.record
    return SwitchResponse(
        agent_id=record.agent_id,
        to=to,
        switched=False,
        session_id=record.session_id,
        host_pid=record.host_pid,
        socket_path=str(socket_path(sup.home, record.agent_id)),
        command=list(record.spec.command) if record.spec is not None else [],
    )


async def _to_tui(
    sup: Supervisor, agent: Agent, request: SwitchRequest, daemon_env: Mapping[str, str]
) -> SwitchResponse:
    record = agent.record
    agent_id = record.agent_id
    if record.structured_spec is not None:
        if record.status == AgentStatus.RUNNING:
            return _unchanged(sup, agent, "tui")  # in its TUI already: attach to it
        raise Busy(
            f"agent {agent_id!r} is leaving its TUI (status {record.status})",
            hint=f"wait for it: agenthost wait {agent_id} idle",
        )
    if not record.managed:
        raise ConfigError(
            f"agent {agent_id!r} was started with `serve`: the daemon has no spec to switch",
            hint="start it through the daemon: agenthost run --agent claude|codex",
        )
    spec = check_kind(record.spec)
    alive = is_lock_held(lock_path(sup.home, agent_id))
    session = record.session_id
    if alive:
        session = await _check_quiet(sup, agent_id) or session
    elif record.status not in ENDED_STATUSES:
        raise Busy(
            f"agent {agent_id!r} is {record.status}: it cannot be switched now",
            hint=f"wait for it (agenthost wait {agent_id} idle), or stop it first",
        )
    check_switchable(spec, session)
    tui = to_tui(spec, session, program_for(spec.agent, spec.env, daemon_env))
    sup.spawner.check_program(tui)  # installed here, or refused before anything stops
    original = spec.model_copy(update={"resume": None})
    await _end_run(sup, agent, alive, request.timeout, "switched to its TUI (agenthost tui)")
    record.session_id = session
    record.structured_spec = original
    record.spec = tui
    record.stop_reason = None
    note = governance_record(
        "switched",
        "cli",
        f"opened the {_product(spec.agent)} TUI on session {session} (agenthost tui)",
        to="tui",
        session_id=session,
    )
    try:
        return await _start(sup, record, note, "tui")
    except AgentHostError as exc:
        # the TUI did not start: the structured agent goes on, where it was
        log.warning("switch.tui_failed", agent_id=agent_id, error=exc.message)
        record.spec = to_structured(original, session)
        record.structured_spec = None
        with contextlib.suppress(AgentHostError):
            await _start(sup, record, None, "structured")
        raise


async def _to_structured(sup: Supervisor, agent: Agent, request: SwitchRequest) -> SwitchResponse:
    record = agent.record
    agent_id = record.agent_id
    if record.structured_spec is None:
        return _unchanged(sup, agent, "structured")
    alive = is_lock_held(lock_path(sup.home, agent_id))
    if alive:
        with contextlib.suppress(AgentHostError):  # the newest session the hooks reported
            async with _client(sup, agent_id) as client:
                status = await client.status()
            record.session_id = status.agent.session_id or record.session_id
    reason = "back to the structured agent (agenthost tui --back)"
    # stopped through the daemon: the supervisor gives the agent its structured spec
    # back (resuming the newest session) without starting it; it starts here
    await _end_run(sup, agent, alive, request.timeout, reason)
    if record.structured_spec is not None:  # its lifecycle had ended already
        record.spec = to_structured(record.structured_spec, record.session_id)
        record.structured_spec = None
    session = record.session_id
    note = governance_record(
        "switched",
        "cli",
        reason + (f", resuming session {session}" if session else ""),
        to="structured",
        session_id=session,
    )
    return await _start(sup, record, note, "structured")


async def _check_quiet(sup: Supervisor, agent_id: str) -> str | None:
    """Refuse (``busy``) while a turn runs or a request waits; the session otherwise."""
    async with _client(sup, agent_id) as client:
        status = await client.status()
        state = str(status.agent.state)
        pending = await client.pending() if state not in BUSY_STATES else []
    if state in BUSY_STATES or pending:
        what = "a permission request waits" if pending or state == "waiting" else "a turn runs"
        raise Busy(
            f"agent {agent_id!r} is {state}: {what}, and a switch would lose it",
            hint=f"wait until it is idle (agenthost wait {agent_id} idle), answer it "
            f"(agenthost pending {agent_id}), or interrupt it (agenthost interrupt {agent_id})",
        )
    return status.agent.session_id


def _client(sup: Supervisor, agent_id: str) -> AsyncClient:
    return AsyncClient(
        agent_id, home=sup.home, connect_timeout=sup.probe_timeout * 5, check_version=False
    )


async def _end_run(sup: Supervisor, agent: Agent, alive: bool, timeout: float, reason: str) -> None:
    """Stop the agent's host as ``daemon.stop`` does (never restarted) and wait until its
    lifecycle recorded the end."""
    agent.stop_requested = True
    agent.stop_text = reason
    agent.wakeup.set()
    if alive:
        with contextlib.suppress(AgentHostError):  # it ended meanwhile: as good
            await sup.stop_host(agent.record.agent_id, False, timeout, reason)
    if agent.task is not None and not agent.task.done():
        await asyncio.wait_for(asyncio.shield(agent.task), 30.0)
    if is_lock_held(lock_path(sup.home, agent.record.agent_id)):
        raise Busy(f"the host of {agent.record.agent_id!r} did not end", hint="try again")


async def _start(
    sup: Supervisor, record: AgentRecord, note: dict[str, Any] | None, to: str
) -> SwitchResponse:
    """Journal ``note`` (no host runs now), then start the agent's host on its spec."""
    spec = record.spec
    assert spec is not None
    if note is not None:
        try:
            await asyncio.to_thread(write_note, sup.home, record.agent_id, note)
        except AgentHostError as exc:  # the record is lost, not the switch
            log.warning("journal.note_failed", agent_id=record.agent_id, error=exc.message)
    agent = sup.agents[record.agent_id] = Agent(record)  # a new run: fresh runtime state
    answer = await launch_host(sup, agent)
    log.info("agent.switched", agent_id=record.agent_id, to=to, session_id=record.session_id)
    return SwitchResponse(
        agent_id=record.agent_id,
        to=to,
        session_id=record.session_id,
        host_pid=answer.host_pid,
        socket_path=answer.socket_path,
        command=list(spec.command),
    )


def _product(kind: str) -> str:
    return {"claude": "Claude Code", "codex": "Codex"}.get(kind, kind)
