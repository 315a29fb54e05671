"""``agenthost attach``: watch an agent and talk to it, in a terminal or a pipe."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from agenthost.cli.common import (
    Exit,
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    remember_agent_id,
    remote_option,
    use_color,
)
from agenthost.remote import Remote
from agenthost.terminal.keys import ControlKey


def terminal_width() -> int:
    """The terminal's own width (not $COLUMNS, which may be inherited and stale)."""
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return shutil.get_terminal_size().columns


def parse_since(text: str) -> datetime:
    """``10m`` / ``2h`` / ``1d`` ago, or an ISO 8601 time (local unless it says)."""
    from agenthost.cli.journal_cmds import parse_duration

    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(text))
    except click.BadParameter:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a time (2026-11-22T09:30) nor a duration (10m, 2h)",
            param_hint="--since",
        ) from None
    return when.astimezone(UTC) if when.tzinfo else when.astimezone().astimezone(UTC)


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option(
    "--offset", type=click.IntRange(min=0), default=None, help="Replay after this offset."
)
@click.option("--last", type=click.IntRange(min=0), default=None, help="Replay the last N events.")
@click.option("--since", default=None, help="Replay from this time: 10m, 2h, 2026-11-22T09:30.")
@click.option("--no-follow", is_flag=True, help="Exit once the replay reached the head.")
@click.option("--read-only", is_flag=True, help="Watch only: nothing typed is sent.")
@click.option("--raw", is_flag=True, help="Also show the agent's raw stdout lines.")
@click.option(
    "--detach-key",
    default=None,
    metavar="KEY",
    help="The key that detaches: ctrl-] (default, or config.toml [attach] detach_key), "
    "ctrl-q, ^A...",
)
@remote_option
@home_option
@json_option
@handle_errors
def attach(
    agent_id: str,
    offset: int | None,
    last: int | None,
    since: str | None,
    no_follow: bool,
    read_only: bool,
    raw: bool,
    detach_key: str | None,
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Watch an agent: a replay of what is kept, then live. Talk to it on a terminal.

    \b
    On a terminal (unless --read-only): type a line and Enter to send it;
    y / n [reason] answers a permission question; Ctrl-C interrupts the current
    turn (for a plain program, --agent lines, press it twice: it sends SIGINT to the
    agent's processes); Ctrl-] (or Ctrl-D on an empty line) detaches. The agent keeps
    running. Elsewhere (--read-only, --json, a pipe) Ctrl-C detaches.

    \b
    A terminal agent (--agent pty) on a terminal: this terminal becomes the
    agent's (its screen, then live; every key goes to it) until the detach key,
    Ctrl-] unless --detach-key says otherwise; with --read-only nothing is sent
    and Ctrl-C detaches too. In a pipe: its screen as text, then its bytes.

    \b
    It ends when the agent it follows has exited and nothing will start it again.
    An end in the replay that a later run followed (the id was run again) is
    history; while the daemon restarts the agent (--restart on-failure), attach
    waits for the new host and goes on.

    \b
    Exit status: 0 detached, at the head (--no-follow), or the agent ended "done";
    10 the agent ended in "error"; 3 no host for that agent.
    """
    from agenthost.paths import resolve_home

    remember_agent_id(agent_id)
    if sum(x is not None for x in (offset, last, since)) > 1:
        raise click.UsageError("give at most one of --offset, --last and --since")
    # the configured key matters only where keys are read: a pipe never loads the config
    keys_read = on_a_terminal(follow=not no_follow, as_json=as_json)
    key = resolve_detach_key(
        detach_key, None if remote is not None else home, read_config=keys_read
    )
    code = attach_loop(
        agent_id,
        home=resolve_home(home) if remote is None else home,
        remote=remote,
        offset=offset,
        last=last,
        since=parse_since(since) if since else None,
        follow=not no_follow,
        as_json=as_json,
        read_only=read_only,
        raw=raw,
        detach_key=key,
    )
    sys.exit(int(code))


def on_a_terminal(*, follow: bool, as_json: bool) -> bool:
    """Whether an attach talks with a person at a terminal (keys read, the detach key
    among them) rather than printing to a pipe or as JSON."""
    return follow and not as_json and sys.stdout.isatty() and sys.stdin.isatty()


def resolve_detach_key(
    option: str | None, home: Path | None, *, read_config: bool = True
) -> ControlKey:
    """The detach key: ``--detach-key`` (a usage error when it names no key we take),
    else config.toml's ``[attach] detach_key`` of this machine's home (unless
    ``read_config`` is false), else Ctrl-]. A config.toml that cannot be used is said,
    and Ctrl-] detaches."""
    from agenthost.errors import AgentHostError
    from agenthost.paths import resolve_home
    from agenthost.terminal.keys import DEFAULT_DETACH_KEY, parse_detach_key

    if option is not None:
        try:
            return parse_detach_key(option)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--detach-key") from None
    if not read_config:
        return parse_detach_key(DEFAULT_DETACH_KEY)
    from agenthost.config import load_config

    try:
        name = load_config(resolve_home(home)).attach.detach_key
    except AgentHostError as exc:
        click.echo(f"── {exc.message}; {DEFAULT_DETACH_KEY} detaches", err=True)
        name = DEFAULT_DETACH_KEY
    return parse_detach_key(name)


def attach_loop(
    agent_id: str,
    *,
    home: Path | None,
    offset: int | None,
    follow: bool,
    as_json: bool,
    read_only: bool,
    last: int | None = None,
    since: datetime | None = None,
    raw: bool = False,
    remote: Remote | None = None,
    detach_key: ControlKey | None = None,
) -> Exit:
    """Run an attach session until it ends; return its exit status (``home`` is the
    remote's, or None for its default, with ``remote``)."""
    import uvloop

    from agenthost.cli.render import Style
    from agenthost.cli.session import AttachSession, Start
    from agenthost.terminal.keys import DEFAULT_DETACH_KEY, parse_detach_key

    detach_key = detach_key or parse_detach_key(DEFAULT_DETACH_KEY)
    tty = sys.stdout.isatty()
    on_terminal = on_a_terminal(follow=follow, as_json=as_json)
    replay = offset is not None or last is not None or since is not None
    terminal_agent = (on_terminal or not as_json) and is_terminal_agent(agent_id, home, remote)
    if on_terminal and terminal_agent:
        if replay:
            raise click.UsageError(
                "a terminal agent is shown from its screen now: --offset, --last and "
                "--since replay its events (with --json, or into a pipe)"
            )
        from agenthost.cli.passthrough import run_passthrough

        return run_passthrough(
            agent_id, home=home, remote=remote, detach_key=detach_key, read_only=read_only
        )
    interactive = on_terminal and not read_only
    style = Style(use_color())
    session = AttachSession(
        agent_id,
        home,
        start=Start(offset=offset, last=last, since=since),
        follow=follow,
        as_json=as_json,
        raw=raw,
        style=style,
        width=terminal_width() if tty else None,
        interactive=interactive,
        remote=remote,
        snapshot=terminal_agent and not replay,
    )
    session.detach_label = detach_key.label
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        try:
            if interactive:
                from agenthost.cli.terminal import Terminal

                return runner.run(Terminal(session, style, detach_key=detach_key).run())
            return runner.run(session.run())
        except KeyboardInterrupt:
            session.detached()
            return Exit.OK


def is_terminal_agent(agent_id: str, home: Path | None, remote: Remote | None) -> bool:
    """Whether the agent's host runs a terminal agent (False when no host answers:
    the session then waits for one, or says there is none, as for any agent)."""
    import uvloop

    from agenthost.client import AsyncClient
    from agenthost.errors import AgentHostError

    async def ask() -> bool:
        client = AsyncClient(agent_id, home=home, remote=remote)
        try:
            return (await client.status()).agent.terminal is not None
        except AgentHostError:
            return False
        finally:
            await client.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(ask())
