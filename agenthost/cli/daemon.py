"""``agenthost daemon`` (run the manager) and ``agenthost run`` (spawn through it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
    remote_option,
    run_there,
)
from agenthost.cli.params import FloatRange
from agenthost.cli.spawnopts import parsed, spawn_options, spawn_spec
from agenthost.log import LEVELS
from agenthost.paths import validate_agent_id
from agenthost.remote import Remote


def _positive_duration(value: str) -> float:
    from agenthost.config import parse_duration

    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r}: a duration above zero")
    return seconds


@click.group(invoke_without_command=True, context_settings={"show_default": True})
@click.option(
    "--host-scope",
    type=click.Choice(["auto", "systemd", "session"]),
    default="auto",
    help="Start hosts in a systemd scope of their own (auto: when the daemon runs under "
    "systemd) or in a session of their own.",
)
@click.option(
    "--probe-timeout",
    type=FloatRange(min=0.05),
    default=1.0,
    help="Seconds each host has to answer the start-up probe.",
)
@click.option(
    "--scan-interval",
    type=FloatRange(min=0),
    default=5.0,
    help="Seconds between rescans of the hosts directory (0: never).",
)
@click.option(
    "--flush-interval",
    type=FloatRange(min=0.01),
    default=0.25,
    help="Seconds between batched writes of the stream positions.",
)
@click.option(
    "--watch-buffer",
    type=click.IntRange(min=1),
    default=1000,
    help="Events kept per agent for watchers that reconnect.",
)
@click.option(
    "--watch-queue",
    type=click.IntRange(min=4096),
    default=8 << 20,
    help="Bytes queued for a watcher before it lags (is served from the buffer).",
)
@click.option(
    "--host-factory/--no-host-factory",
    default=True,
    help="Fork hosts from a pre-imported factory process (a fraction of the CPU and "
    "memory of an exec'd host); without it, or in systemd scopes, hosts are exec'd.",
)
@click.option(
    "--max-agents",
    type=click.IntRange(min=1),
    default=None,
    help="Run at most this many agents; a spawn beyond is refused (or queued: --queue).",
)
@click.option("--queue", is_flag=True, help="With --max-agents: queue spawns beyond the limit.")
@click.option(
    "--idle-stop",
    metavar="DURATION",
    callback=parsed(_positive_duration),
    default=None,
    help="Stop an agent idle this long (30m, 2h); `run` of its id resumes it.",
)
@click.option("--log-level", type=click.Choice(LEVELS), default="info", help="Log verbosity.")
@home_option
@click.pass_context
@handle_errors
def daemon(
    ctx: click.Context,
    host_scope: str,
    probe_timeout: float,
    scan_interval: float,
    flush_interval: float,
    watch_buffer: int,
    watch_queue: int,
    host_factory: bool,
    max_agents: int | None,
    queue: bool,
    idle_stop: float | None,
    log_level: str,
    home: Path | None,
) -> None:
    """Run the daemon in the foreground: the manager of many hosts.

    It finds every host under the home directory, reattaches to each stream where it
    left off, then serves <home>/daemon.sock (spawn, list, stop, watch). Hosts outlive
    it: SIGTERM, SIGINT, kill -9 or an upgrade end the daemon only. Under systemd it
    reports readiness (Type=notify) after that reconcile.

    `agenthost daemon status` shows the running daemon; `agenthost daemon stop` stops
    it (its hosts keep running), e.g. to start it again with other limits.
    """
    import gc
    from typing import cast

    if ctx.invoked_subcommand is not None:
        from agenthost.cli.daemonctl import only_home

        only_home(ctx)
        return
    if queue and max_agents is None:
        raise click.UsageError(
            "--queue needs --max-agents N: without a limit nothing is ever queued"
        )

    # The daemon's modules, pydantic and the models are objects that live as long as
    # the process: collecting while they are created is wasted work (as for serve,
    # see agenthost.cli.main; run_daemon freezes them once imported).
    gc.disable()
    try:
        from agenthost.daemon.limits import Limits
        from agenthost.daemon.run import run_daemon
        from agenthost.daemon.service import DaemonConfig
        from agenthost.daemon.spawner import HostScope
        from agenthost.log import configure_logging
        from agenthost.paths import resolve_home
    finally:
        gc.enable()

    configure_logging(log_level)
    config = DaemonConfig(
        home=resolve_home(home),
        probe_timeout=probe_timeout,
        scan_interval=scan_interval,
        flush_interval=flush_interval,
        watch_buffer=watch_buffer,
        watch_queue=watch_queue,
        host_scope=cast(HostScope, host_scope),
        log_level=log_level,
        limits=Limits(max_agents, queue, idle_stop),
    )
    factory = None
    if host_factory and host_scope != "systemd":
        from agenthost.hostfactory.handle import Factory
        from agenthost.hostfactory.process import start_factory

        # now, while this process has no event loop and no thread to fork with it
        try:
            started = start_factory()
        except (OSError, RuntimeError) as exc:  # (e.g. run under a tool with threads)
            click.echo(f"agenthost: no host factory, hosts will be exec'd: {exc}", err=True)
        else:
            factory = Factory(started.pid, started.sock)
    run_daemon(config, factory)


def _add_controls() -> None:
    from agenthost.cli.daemonctl import daemon_status, daemon_stop

    daemon.add_command(daemon_status)
    daemon.add_command(daemon_stop)


_add_controls()


@contextlib.contextmanager
def _stop_first(agent_id: str) -> Iterator[None]:
    """Add what to do to the daemon's ``busy`` and ``limit_reached`` answers (hints do
    not cross the wire)."""
    from agenthost.errors import Busy, LimitReached

    try:
        yield
    except Busy as exc:
        exc.hint = exc.hint or f"stop it first: agenthost stop {agent_id}"
        raise
    except LimitReached as exc:
        exc.hint = exc.hint or (
            "stop an agent first (agenthost stop ID), or start the daemon with --queue"
        )
        raise


@click.command(context_settings={"show_default": True})
@spawn_options
@remote_option
@home_option
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def run(
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
    command: tuple[str, ...],
    **options: Any,
) -> None:
    """Start an agent through the daemon: agenthost run --agent-id ID [-- COMMAND ...]

    The daemon (started in the background if none runs) spawns a host for the agent
    and follows it; with --restart on-failure it restarts the agent in a new host when
    it fails. Answers once the host serves. With --remote, the daemon of that machine
    (started there if none runs) and --cwd a directory there.
    """
    import asyncio

    import uvloop

    from agenthost.daemon.client import DaemonClient, ensure_daemon
    from agenthost.daemon.protocol import SpawnResponse

    spec, root = spawn_spec(options, home=home, remote=remote, command=command)
    agent_id = spec.agent_id
    daemon_pid = ensure_daemon(root) if root is not None and remote is None else 0

    async def spawn() -> SpawnResponse:
        async with DaemonClient(root, remote=remote, autostart=True) as client:
            return await client.spawn(spec)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner, _stop_first(agent_id):
        result = runner.run(spawn())
    if as_json:
        body = {"ok": True, **result.model_dump(mode="json", exclude_none=True)}
        if daemon_pid:
            body["daemon_started"] = daemon_pid
        print_json(body)
        return
    if daemon_pid:
        click.echo(f"started the daemon (pid {daemon_pid})", err=True)
    if result.queued:
        click.echo(
            f"queued {agent_id}: the daemon runs as many agents as it may (--max-agents); "
            "it starts when one ends (agenthost list shows it as queued)"
        )
        return
    click.echo(
        f"host for {agent_id} started by the daemon (pid {result.host_pid}); "
        f"socket {result.socket_path}; log {result.log_path}"
    )


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option("--purge", is_flag=True, help="Also delete the agent's journal (its history).")
@remote_option
@home_option
@json_option
@handle_errors
def forget(
    agent_id: str, purge: bool, home: Path | None, remote: Remote | None, as_json: bool
) -> None:
    """Remove an agent that does not run from the daemon's registry.

    A live agent is refused (exit 6): stop it first. Its journal stays (agenthost
    export still reads it) unless --purge. Works with or without a running daemon.
    With --remote, `agenthost forget` runs there (over ssh).
    """
    from agenthost.daemon.client import forget_agent
    from agenthost.errors import HostNotFound
    from agenthost.paths import resolve_home

    remember_agent_id(agent_id)
    if remote is not None:
        validate_agent_id(agent_id)
        args = [
            "forget",
            agent_id,
            *(["--purge"] if purge else []),
            *(["--json"] if as_json else []),
        ]
        run_there(remote, [*args, *(["--home", str(home)] if home is not None else [])])
    root = resolve_home(home)
    validate_agent_id(agent_id)
    with _stop_first(agent_id):
        result = forget_agent(root, agent_id, purge=purge)
    if not result.forgotten and not result.purged:
        what = "nor a journal " if purge else ""
        raise HostNotFound(
            f"the daemon knows no agent {agent_id!r} {what}(nothing to forget)",
            hint="agenthost list shows the agents it knows",
        )
    if as_json:
        print_json({"ok": True, **result.model_dump(mode="json", exclude_none=True)})
        return
    if result.forgotten:
        purged = " and deleted its journal" if result.purged else ""
        queued = " (it was queued: it never started)" if result.previous_status == "queued" else ""
        click.echo(f"forgot {agent_id}{purged}{queued}")
    else:
        click.echo(f"deleted the journal of {agent_id} (the daemon did not know it)")
    if result.worktree is not None and result.worktree_removed:
        click.echo(f"removed its worktree {result.worktree} (its branch is kept)")
    elif result.worktree is not None:
        click.echo(
            f"kept its worktree {result.worktree}: {result.worktree_kept_reason} "
            f"(git -C {result.worktree} status)",
            err=True,
        )
