"""``agenthost serve`` (run a host) and ``agenthost demo`` (the one-command tour)."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from agenthost.cli.common import (
    Exit,
    agent_options,
    check_agent,
    check_installed,
    handle_errors,
    home_option,
    json_option,
    parse_pairs,
    print_json,
    remember_agent_id,
)
from agenthost.cli.params import FloatRange
from agenthost.hostoptions import DEFAULT_JOURNAL, DEFAULTS, HostOptions
from agenthost.journal.writer import JournalConfig, SyncPolicy
from agenthost.log import LEVELS


@click.command(context_settings={"show_default": True})
@agent_options
@click.option(
    "--linger",
    type=FloatRange(min=0),
    default=DEFAULTS.linger,
    help="Seconds the host keeps serving after the agent exited.",
)
@click.option(
    "--stop-timeout",
    type=FloatRange(min=0),
    default=DEFAULTS.stop_timeout,
    help="On SIGTERM/SIGINT: seconds between SIGTERM and SIGKILL to the agent.",
)
@click.option(
    "--ring-size", type=click.IntRange(min=1), default=DEFAULTS.ring_size, help="Events kept."
)
@click.option(
    "--ring-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULTS.ring_bytes,
    help="Bytes of events kept.",
)
@click.option(
    "--client-buffer",
    type=click.IntRange(min=4096),
    default=DEFAULTS.client_buffer,
    help="Bytes queued per client before it lags (is served from the ring instead).",
)
@click.option("--no-journal", is_flag=True, help="Keep events in memory only (no journal).")
@click.option(
    "--journal-sync",
    type=click.Choice([policy.value for policy in SyncPolicy]),
    default=DEFAULT_JOURNAL.sync.value,
    help="When the journal waits for the disk (see docs/journal.md).",
)
@click.option(
    "--journal-sync-interval",
    type=FloatRange(min=0.01),
    default=DEFAULT_JOURNAL.sync_interval,
    help="Seconds between journal fsyncs (--journal-sync interval).",
)
@click.option(
    "--journal-max-bytes",
    type=click.IntRange(min=0),
    default=DEFAULT_JOURNAL.max_bytes,
    help="Journal size kept per agent; the oldest segments go first (0: no limit).",
)
@click.option(
    "--journal-max-age",
    type=FloatRange(min=0),
    default=DEFAULT_JOURNAL.max_age,
    help="Seconds journal segments are kept (0: no limit).",
)
@click.option(
    "--journal-segment-bytes",
    type=click.IntRange(min=4096),
    default=DEFAULT_JOURNAL.segment_bytes,
    help="Size at which a new journal segment is started (advanced).",
)
@click.option(
    "--fork",
    "fork_session",
    default=None,
    help="Start on a copy of this session, in a new one (agenthost fork uses it).",
)
@click.option(
    "--fork-at",
    default=None,
    help="With --fork: copy the conversation up to this point (the agent's own id).",
)
@click.option(
    "--forked-from",
    default=None,
    metavar="ID",
    help="The agent it was forked from (shown by status; agenthost fork sets it).",
)
@click.option("--detach", is_flag=True, help="Run in the background; return once it serves.")
@click.option(
    "--log-level", type=click.Choice(LEVELS), default=DEFAULTS.log_level, help="Log verbosity."
)
@home_option
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def serve(
    agent_id: str,
    kind: str,
    cwd: Path | None,
    project: str,
    task: str | None,
    description: str | None,
    env: tuple[str, ...],
    agent_opts: tuple[str, ...],
    resume: str | None,
    budget_usd: float | None,
    budget_tokens: int | None,
    sandbox: str | None,
    size: tuple[int, int] | None,
    linger: float,
    stop_timeout: float,
    ring_size: int,
    ring_bytes: int,
    client_buffer: int,
    no_journal: bool,
    journal_sync: str,
    journal_sync_interval: float,
    journal_max_bytes: int,
    journal_max_age: float,
    journal_segment_bytes: int,
    fork_session: str | None,
    fork_at: str | None,
    forked_from: str | None,
    detach: bool,
    log_level: str,
    home: Path | None,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run the host of one agent: agenthost serve --agent-id ID [-- COMMAND ...]

    The host owns the agent process and serves its socket at
    <home>/hosts/ID.sock. In the foreground it runs until stopped (Ctrl-C, SIGTERM,
    or `agenthost stop ID`); with --detach it starts in the background.

    For --agent lines, COMMAND is the program to run; for --agent demo, extra
    arguments for the demo agent (e.g. -- --pace 0).
    """
    # usage errors before anything starts, in the foreground and with --detach alike
    check_agent(agent_id, home, kind, resume, agent_opts, command)
    options = options_from_params(click.get_current_context().params)
    # the background host must not depend on the directory it was started from
    where = (cwd or Path.cwd()).absolute()
    # and a program that is not there: no host serves an agent that can never run
    check_installed(kind, resume, options.agent_opts, command, cwd=where, env=options.env)
    # and a sandbox this machine cannot give: never run the agent unconfined instead
    from agenthost.sandbox.resolve import check_sandbox

    check_sandbox(options.home, sandbox, agent_id, project)
    if detach:
        from agenthost.launch import spawn_detached

        started = spawn_detached(replace(options, cwd=where))
        if as_json:
            print_json(
                {
                    "ok": True,
                    "agent_id": started.agent_id,
                    "pid": started.pid,
                    "socket_path": str(started.socket_path),
                    "log_path": str(started.log_path),
                }
            )
        else:
            click.echo(
                f"host for {agent_id} started (pid {started.pid}); "
                f"socket {started.socket_path}; log {started.log_path}"
            )
        return
    from agenthost.host.host import HostConfig
    from agenthost.host.run import run_host
    from agenthost.log import configure_logging

    configure_logging(options.log_level)
    # For the life of this process, not only while run_host has its handler in: a late
    # "re-create your socket" from a daemon must not turn a clean exit into a kill.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    run_host(HostConfig.from_options(options), subreaper=True)


def options_from_params(params: Mapping[str, Any]) -> HostOptions:
    """The host options of a parsed ``serve`` command line (its ``Context.params``).

    The agent's environment is what a parent that started us in the background (the
    daemon, ``serve --detach``) handed over, taken out of ours, then ``--env``.
    """
    from agenthost.agentenv import unpack
    from agenthost.paths import resolve_home

    journal = None
    if not params["no_journal"]:
        journal = JournalConfig(
            sync=SyncPolicy(params["journal_sync"]),
            sync_interval=params["journal_sync_interval"],
            max_bytes=params["journal_max_bytes"],
            max_age=params["journal_max_age"],
            segment_bytes=params["journal_segment_bytes"],
        )
    return HostOptions(
        agent_id=params["agent_id"],
        home=resolve_home(params["home"]),
        agent=params["kind"],
        command=tuple(params["command"]),
        cwd=params["cwd"],
        env={**unpack(os.environ), **parse_pairs(params["env"])},
        project=params["project"],
        task=params["task"],
        description=params["description"],
        agent_opts=parse_pairs(params["agent_opts"], "--agent-opt"),
        resume=params["resume"],
        fork=params.get("fork_session"),
        fork_at=params.get("fork_at"),
        forked_from=params.get("forked_from"),
        budget_usd=params["budget_usd"],
        budget_tokens=params["budget_tokens"],
        sandbox=params["sandbox"],
        size=params["size"],
        linger=params["linger"],
        stop_timeout=params["stop_timeout"],
        ring_size=params["ring_size"],
        ring_bytes=params["ring_bytes"],
        client_buffer=params["client_buffer"],
        journal=journal,
        log_level=params["log_level"],
    )


@click.command()
@click.option("--agent-id", default="demo", show_default=True, help="Name of the demo agent.")
@click.option("--no-attach", is_flag=True, help="Start (or find) the host, do not attach.")
@home_option
@handle_errors
def demo(agent_id: str, no_attach: bool, home: Path | None) -> None:
    """Start the built-in demo agent in the background and attach to it.

    The demo agent needs no API key: it answers each message like Claude Code would
    (text, a tool call and its result, a result with cost). A first message is sent
    when the host is new. Type messages to talk to it; Ctrl-C interrupts its turn;
    Ctrl-] detaches and leaves it running (`agenthost stop demo` ends it).
    """
    from agenthost.cli.attach import attach_loop
    from agenthost.client import Client
    from agenthost.errors import HostNotFound
    from agenthost.launch import spawn_detached
    from agenthost.paths import resolve_home

    remember_agent_id(agent_id)
    root = resolve_home(home)
    try:
        with Client(agent_id, home=root) as client:
            client.ping()
        click.echo(f"demo host {agent_id!r} is already running", err=True)
    except HostNotFound:
        started = spawn_detached(HostOptions(agent_id, root, agent="demo"))
        click.echo(f"started demo host {agent_id!r} (pid {started.pid})", err=True)
        with Client(agent_id, home=root) as client:
            client.send("Hello! What can you do?")
    if no_attach:
        return
    raise SystemExit(
        attach_loop(agent_id, home=root, offset=0, follow=True, as_json=False, read_only=False)
        or Exit.OK
    )
