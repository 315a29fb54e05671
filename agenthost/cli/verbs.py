"""The scripting verbs: list, status, ping, history, send, stop."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agenthost.cli.branch import worktree_branch
from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
    remote_option,
    remotes_option,
    use_color,
)
from agenthost.cli.params import FloatRange
from agenthost.cli.render import render_entry, render_status, table
from agenthost.cli.views import Style, pending_text, ping_text, responded_text, sent_text
from agenthost.remote import Remote
from agenthost.textsafe import escape

if TYPE_CHECKING:
    from agenthost.daemon.protocol import DaemonStopResponse


def _style() -> Style:
    return Style(use_color())


@click.command(name="list")
@click.option("--project", default=None, help="Only agents of this project.")
@click.option(
    "--timeout",
    type=FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds to wait for each host's answer.",
)
@remotes_option
@home_option
@json_option
@handle_errors
def list_(
    project: str | None,
    timeout: float,
    remotes: tuple[Remote, ...],
    home: Path | None,
    as_json: bool,
) -> None:
    """List the agents: the hosts found in the hosts directory (probed in parallel) and
    what the daemon knows (lost agents, restarts), when there is one. With --remote,
    the agents of those machines instead (each runs `agenthost list` there)."""
    from agenthost.cli.listing import CUT, table_rows
    from agenthost.client import run_blocking
    from agenthost.inventory import gather
    from agenthost.paths import resolve_home

    if remotes:
        _list_remotes(remotes, project, timeout, home, as_json)
        return
    found = run_blocking(gather(resolve_home(home), project=project, timeout=timeout))
    if as_json:
        print_json(found.items())
        return
    if not found.hosts and not found.known:
        click.echo("no agents", err=True)
        return
    click.echo(table(*table_rows(found.hosts, found.known), cut=CUT))
    if found.source == "registry":
        click.echo("(no daemon answers: the DAEMON column is what it last recorded)", err=True)


def _list_remotes(
    remotes: tuple[Remote, ...],
    project: str | None,
    timeout: float,
    home: Path | None,
    as_json: bool,
) -> None:
    import asyncio

    from agenthost.cli.listing import CUT, machine_rows
    from agenthost.client import run_blocking
    from agenthost.inventory import REMOTE_LIST_TIMEOUT, gather_remote

    # each machine gets ssh's connect on top of its hosts' answers
    wait = REMOTE_LIST_TIMEOUT + 4 * timeout

    async def ask() -> list[list[dict[str, object]]]:
        return list(
            await asyncio.gather(
                *(gather_remote(r, project=project, timeout=wait, home=home) for r in remotes)
            )
        )

    answers = run_blocking(ask())
    if as_json:
        print_json([item for items in answers for item in items])
        return
    if not any(answers):
        click.echo("no agents", err=True)
        return
    machines = [(str(r), a) for r, a in zip(remotes, answers, strict=True)]
    click.echo(table(*machine_rows(machines), cut=CUT))


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@remote_option
@home_option
@json_option
@handle_errors
def status(agent_id: str, home: Path | None, remote: Remote | None, as_json: bool) -> None:
    """Show an agent's state and its host."""
    from agenthost.client import Client

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.status()
    if as_json:
        print_json(result.model_dump(mode="json", exclude_none=True))
    else:
        from agenthost.paths import resolve_home

        mine = resolve_home(home) if remote is None else None  # (a remote's: not read here)
        branch = worktree_branch(mine, agent_id, result.agent.worktree)
        click.echo(render_status(result, _style(), branch))


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@remote_option
@home_option
@json_option
@handle_errors
def ping(agent_id: str, home: Path | None, remote: Remote | None, as_json: bool) -> None:
    """Check that an agent's host answers."""
    from agenthost.client import Client

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.ping()
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        click.echo(ping_text(agent_id, result.model_dump(mode="json")))


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option("--limit", type=click.IntRange(min=0), default=0, help="Newest N entries (0 = all).")
@remote_option
@home_option
@json_option
@handle_errors
def history(
    agent_id: str, limit: int, home: Path | None, remote: Remote | None, as_json: bool
) -> None:
    """Print an agent's chat history (user, assistant, tool entries)."""
    from agenthost.client import Client

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.history(limit)
    if as_json:
        print_json(result.model_dump(mode="json", exclude_none=True))
        return
    style = _style()
    for entry in result.entries:
        click.echo(render_entry(entry, style))


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.argument("text", nargs=-1, required=True)
@click.option("--key", default=None, help="Idempotency key: a retried send is applied once.")
@remote_option
@home_option
@json_option
@handle_errors
def send(
    agent_id: str,
    text: tuple[str, ...],
    key: str | None,
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Send a message to the agent (TEXT '-' reads it from stdin)."""
    from agenthost.client import Client

    remember_agent_id(agent_id)
    # a message read from stdin ends with the newline of its last line: not part of it
    message = sys.stdin.read().rstrip("\n") if text == ("-",) else " ".join(text)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.send(message, key=key)
    if as_json:
        print_json({"ok": True, **result.model_dump(mode="json")})
    else:
        click.echo(sent_text(agent_id, result.model_dump(mode="json")))


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option("--force", is_flag=True, help="SIGKILL at once instead of SIGTERM first.")
@click.option(
    "--timeout",
    type=FloatRange(min=0, max=86400),
    default=30.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL.",
)
@click.option("--reason", default="", help="Why (logged by the host).")
@remote_option
@home_option
@json_option
@handle_errors
def stop(
    agent_id: str,
    force: bool,
    timeout: float,
    reason: str,
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Stop an agent and its host; waits until the agent has exited.

    An agent the daemon has queued (--max-agents) or is about to restart has no host
    yet: the daemon takes it out of the queue (or calls the restart off) instead.
    """
    from agenthost.client import Client
    from agenthost.errors import HostNotFound

    remember_agent_id(agent_id)
    try:
        with Client(agent_id, home=home, remote=remote) as client:
            result = client.stop(force=force, timeout=timeout, reason=reason)
    except HostNotFound:
        hostless = _stop_hostless(agent_id, home, remote, reason)
        if hostless is None:
            raise
        result = hostless
    if as_json:
        print_json(result.model_dump(mode="json", exclude_none=True))
        return
    before = getattr(result, "previous_status", None)  # (a DaemonStopResponse's)
    if before == "queued":
        click.echo(f"took {agent_id} out of the daemon's queue: it never started")
        return
    if before == "restarting":
        click.echo(f"stopped {agent_id}: it had no host, and the daemon will not restart it")
        return
    if result.signal == "SIGKILL" and not result.graceful:
        how = "was killed with SIGKILL" + ("" if force else " (it ignored SIGTERM)")
    elif result.signal:
        how = f"was ended by {result.signal}"
    else:
        how = f"exited with code {result.exit_code}"
    said = f"the agent {how}; the stop took {result.duration} (final state {result.final_state})"
    click.echo(f"stopped {agent_id}: {escape(said)}")


def _stop_hostless(
    agent_id: str, home: Path | None, remote: Remote | None, reason: str
) -> DaemonStopResponse | None:
    """Stop, through the daemon, an agent that has no host because it waits for one
    (queued, or its restart's backoff); None when the daemon (if any) has no such
    agent."""
    from agenthost.client import run_blocking
    from agenthost.daemon.client import DaemonClient, daemon_alive
    from agenthost.daemon.protocol import AgentStatus
    from agenthost.errors import AgentHostError
    from agenthost.paths import resolve_home

    if remote is None and not daemon_alive(resolve_home(home)):
        return None

    async def ask() -> DaemonStopResponse | None:
        async with DaemonClient(home, remote=remote) as daemon:
            known = {a.agent_id: a.status for a in await daemon.list()}
            if known.get(agent_id) not in (AgentStatus.QUEUED, AgentStatus.RESTARTING):
                return None
            return await daemon.stop(agent_id, reason=reason)

    try:
        return run_blocking(ask())
    except AgentHostError:  # no daemon answers (there): the host's error says it all
        return None


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@remote_option
@home_option
@json_option
@handle_errors
def interrupt(agent_id: str, home: Path | None, remote: Remote | None, as_json: bool) -> None:
    """Interrupt the agent's current turn (the agent keeps running).

    An idle agent has no turn to interrupt: that is said, nothing is sent, and the
    exit status is 0 (with --json: "sent": false).
    """
    from agenthost.client import Client
    from agenthost.protocol import AgentState

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        # asked first: some agents (Claude Code, the demo) take an interrupt request
        # even when idle, so the host's answer alone cannot tell
        idle = client.status().agent.state == AgentState.IDLE
        result = None if idle else client.interrupt()
    if result is None or not result.sent:
        if as_json:
            print_json({"sent": False, "method": None, "reason": "nothing to interrupt"})
        else:
            click.echo(f"nothing to interrupt: {agent_id} is not in a turn", err=True)
        return
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        how = "SIGINT to its process group" if result.method == "signal" else "interrupt request"
        click.echo(f"interrupted {agent_id} ({how})")


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@remote_option
@home_option
@json_option
@handle_errors
def pending(agent_id: str, home: Path | None, remote: Remote | None, as_json: bool) -> None:
    """List the permission requests the agent is waiting on."""
    from agenthost.client import Client

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        requests = client.pending()
    if as_json:
        print_json([r.model_dump(mode="json", exclude_none=True) for r in requests])
        return
    text = pending_text([r.model_dump(mode="json") for r in requests])
    if text is None:
        click.echo("no pending requests", err=True)
    else:
        click.echo(text)


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.argument("request_id")
@click.argument("behavior", type=click.Choice(["allow", "deny"]))
@click.option("--message", default=None, help="The reason the agent is told (deny).")
@click.option(
    "--input",
    "updated_input",
    default=None,
    metavar="JSON",
    help="Replace the tool's input with this JSON object (allow).",
)
@click.option(
    "--option",
    "option_id",
    default=None,
    metavar="OPTION_ID",
    help="Pick one of the answers the agent offers (an ACP agent's options, shown by "
    "`agenthost pending --json`), e.g. its 'allow always'.",
)
@click.option(
    "--session",
    "for_session",
    is_flag=True,
    help="Allow it, and the same tool with the same command for the rest of the agent's "
    "session, without asking (allow only; see docs/policy.md).",
)
@remote_option
@home_option
@json_option
@handle_errors
def respond(
    agent_id: str,
    request_id: str,
    behavior: str,
    message: str | None,
    updated_input: str | None,
    option_id: str | None,
    for_session: bool,
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Answer a pending permission request: allow or deny."""
    import json

    from agenthost.client import Client

    remember_agent_id(agent_id)
    new_input = None
    if updated_input is not None:
        try:
            new_input = json.loads(updated_input)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--input") from None
        if not isinstance(new_input, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--input")
    if for_session and behavior != "allow":
        raise click.BadParameter(
            "only goes with allow: a denial is never remembered", param_hint="--session"
        )
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.respond(
            request_id,
            "allow" if behavior == "allow" else "deny",
            message=message,
            updated_input=new_input,
            option_id=option_id,
            actor="cli",
            remember="session" if for_session else None,
        )
    if as_json:
        print_json({"ok": True, **result.model_dump(mode="json")})
    else:
        click.echo(responded_text(agent_id, result.model_dump(mode="json"), for_session))
