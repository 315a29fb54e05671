"""``agenthost fork ID NEW [--at OFFSET]``: a new agent on a copy of ID's conversation.

The client does the reading (the parent's record from ``daemon.list``, its journal for
``--at``, its host's status when the daemon did not start it) and sends the daemon one
``daemon.spawn`` with a ``fork`` (docs/forks.md); the daemon puts the parent's
environment back, refuses a fork that would get more than its parent, and starts the
fork's journal with a ``forked`` governance record.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
)
from agenthost.cli.spawnopts import check_worktree_branch
from agenthost.errors import ForkRefused

if TYPE_CHECKING:
    from agenthost.daemon.protocol import DaemonAgent, SpawnResponse, SpawnSpec
    from agenthost.models import StatusResponse


@dataclass(frozen=True)
class Parent:
    """What the fork copies of its parent."""

    kind: str
    session_id: str | None
    spec: SpawnSpec
    """The parent's spec with the values of its environment hidden (the daemon fills
    them in), or one built from what its host reports."""
    branch: str | None = None
    tui: bool = False
    info: dict[str, Any] | None = None
    """What its host reports of the agent (AgentInfo), when it was asked."""


@click.command()
@click.argument("agent_id", metavar="ID", shell_complete=complete_agent_ids)
@click.argument("new_id", metavar="NEW")
@click.option(
    "--at",
    "offset",
    type=int,
    default=None,
    help="Copy the conversation up to this offset of ID's journal [default: all of it].",
)
@click.option(
    "--worktree",
    default=None,
    metavar="BRANCH",
    help="The fork's branch, when ID runs in a worktree [default: agenthost/NEW].",
)
@home_option
@json_option
@handle_errors
def fork(
    agent_id: str,
    new_id: str,
    offset: int | None,
    worktree: str | None,
    home: Path | None,
    as_json: bool,
) -> None:
    """Start NEW on a copy of agent ID's conversation: agenthost fork ID NEW [--at OFFSET]

    Claude Code, Codex and ACP agents that offer session/fork can be forked
    (ID's session is left as it was); others are refused with the reason (exit
    2). --at OFFSET (Claude Code, Codex): the conversation up to that offset of
    ID's journal (agenthost history ID --json shows them). NEW runs with ID's settings
    (environment, budget, sandbox, restart policy), in a worktree of its own branched
    from ID's branch when ID runs in one (run --worktree), else in ID's directory.
    """
    import asyncio

    import uvloop

    from agenthost.daemon.client import DaemonClient, ensure_daemon
    from agenthost.errors import HostAlreadyRunning
    from agenthost.paths import resolve_home, validate_agent_id

    validate_agent_id(agent_id)
    validate_agent_id(remember_agent_id(new_id))
    if new_id == agent_id:
        raise click.UsageError("NEW must be another id than ID")
    if worktree:
        check_worktree_branch(worktree)
    root = resolve_home(home)

    async def parent_and_spawn() -> tuple[SpawnSpec, SpawnResponse]:
        async with DaemonClient(root, autostart=True) as client:
            known = {a.agent_id: a for a in await client.list()}
            if new_id in known:
                raise HostAlreadyRunning(
                    f"agent {new_id!r} exists already: a fork starts a new agent",
                    hint=f"choose another id, or agenthost forget {new_id}",
                )
            parent = await _parent(root, agent_id, known.get(agent_id))
            spec = _fork_spec(root, parent, agent_id, new_id, offset, worktree)
            return spec, await client.spawn(spec)

    daemon_pid = ensure_daemon(root)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        spec, result = runner.run(parent_and_spawn())
    assert spec.fork is not None
    if as_json:
        body: dict[str, Any] = {
            "ok": True,
            **result.model_dump(mode="json", exclude_none=True),
            "forked_from": agent_id,
            "fork": spec.fork.model_dump(mode="json", exclude_none=True),
        }
        if daemon_pid:
            body["daemon_started"] = daemon_pid
        print_json(body)
        return
    at = f" at offset {spec.fork.offset}" if spec.fork.offset is not None else ""
    click.echo(
        f"forked {agent_id}{at} into {new_id} (host pid {result.host_pid}); "
        f"session {spec.fork.session_id} left as it was"
    )


async def _parent(root: Path, agent_id: str, record: DaemonAgent | None) -> Parent:
    """The parent, from the daemon's record, or from its host when the daemon did not
    start it (``serve``)."""
    from agenthost.errors import HostNotFound, NotConnected

    if record is not None and record.managed and record.spec is not None:
        info = None
        if record.spec.agent == "acp":  # whether it offers session/fork: its host knows
            with contextlib.suppress(HostNotFound, NotConnected):
                info = (await _status(root, agent_id)).agent.model_dump()
        return Parent(
            record.spec.agent, record.session_id, record.spec, record.branch, record.tui, info
        )
    try:
        status = await _status(root, agent_id)
    except (HostNotFound, NotConnected) as exc:
        if record is not None:  # an adopted host that is gone: nothing to copy from
            raise ForkRefused(
                f"agent {agent_id!r} was not started by the daemon and its host is gone: "
                "nothing says how it ran"
            ) from None
        raise HostNotFound(
            f"no agent {agent_id!r}: the daemon does not know it and no host serves it",
            hint="agenthost list shows the agents",
        ) from exc
    return _from_status(agent_id, status)


async def _status(root: Path, agent_id: str) -> StatusResponse:
    from agenthost.client import AsyncClient

    async with AsyncClient(agent_id, home=root) as host:
        return await host.status()


def _from_status(agent_id: str, status: StatusResponse) -> Parent:
    """The spec of a host started with ``serve``, as far as its status tells it: kind,
    directory, project, budget limits, sandbox (docs/forks.md: its environment, agent
    options and command are not known, so not carried over)."""
    from agenthost.daemon.protocol import SpawnSpec

    info = status.agent
    budget = info.budget
    kind = info.backend or ""
    spec = SpawnSpec(
        agent_id=agent_id,
        agent=kind or "demo",
        cwd=info.worktree or None,
        project=info.project,
        budget_usd=budget.usd if budget is not None else None,
        budget_tokens=budget.tokens if budget is not None else None,
        sandbox=info.sandbox if info.sandbox not in (None, "off") else None,
    )
    return Parent(kind, info.session_id, spec, info=info.model_dump())


def _fork_spec(
    root: Path,
    parent: Parent,
    agent_id: str,
    new_id: str,
    offset: int | None,
    worktree: str | None,
) -> SpawnSpec:
    """The fork's spec: the parent's, under the new id, forking its session."""
    from agenthost.daemon.protocol import ForkSpec
    from agenthost.forks import refusal

    why = refusal(parent.kind, parent.session_id, parent.tui, parent.info)
    if why is not None:
        raise ForkRefused(f"agent {agent_id!r} cannot be forked: {why}")
    assert parent.session_id is not None
    point = _point(root, agent_id, parent.kind, offset) if offset is not None else None
    spec = parent.spec
    update: dict[str, Any] = {"agent_id": new_id, "resume": None}
    if spec.worktree is not None:
        update.update(worktree=worktree or "", cwd=None)
    elif worktree is not None:
        raise click.UsageError(f"--worktree: {agent_id} runs in no worktree (run --worktree)")
    update["fork"] = ForkSpec(
        from_agent=agent_id,
        session_id=parent.session_id,
        offset=offset,
        point=point,
        branch=parent.branch if spec.worktree is not None else None,
    )
    return spec.model_copy(update=update)


def _point(root: Path, agent_id: str, kind: str, offset: int) -> str:
    """The agent's name of the point at ``offset`` of the parent's journal, read once
    (only the point found so far is kept, whatever the journal's size)."""
    from agenthost.forks import check_offset, fork_point

    check_offset(offset, max(offset, 1))  # (below 1: refused before any reading)
    last = 0

    def upto() -> Iterator[dict[str, Any]]:
        nonlocal last
        for event in _journal(root, agent_id):
            at = event.get("offset")
            if isinstance(at, int):
                last = max(last, at)
                if at <= offset:
                    yield event

    events = upto()
    try:
        point = fork_point(kind, events, offset)
    except ForkRefused:
        for _ in events:  # (to its end: its last offset says why, if it is that)
            pass
        _check_last(agent_id, offset, last)
        raise
    for _ in events:
        pass
    _check_last(agent_id, offset, last)
    return point


def _check_last(agent_id: str, offset: int, last: int) -> None:
    from agenthost.forks import check_offset

    if last == 0:
        raise ForkRefused(f"agent {agent_id!r} has no journal: --at needs it")
    check_offset(offset, last)


def _journal(root: Path, agent_id: str) -> Iterator[dict[str, Any]]:
    from agenthost.journal import JournalReader
    from agenthost.paths import journal_dir

    reader = JournalReader(journal_dir(root, agent_id))
    if not reader.exists():
        return
    for record in reader.iter_records():
        try:
            event = json.loads(record)
        except ValueError:
            continue  # a damaged record names no point
        if isinstance(event, dict):
            yield event
