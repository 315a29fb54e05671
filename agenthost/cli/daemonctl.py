"""``agenthost daemon stop`` and ``agenthost daemon status``: the daemon's controls.

Changing the daemon's limits (``--max-agents``, ``--idle-stop``) means running it again
with others; until these, stopping it meant ``kill`` with a pid read from the JSON of
``<home>/daemon.lock``. A stop is graceful and only ever the daemon's: the hosts and
their agents keep running, and the next daemon (``agenthost daemon``, or the next
``agenthost run``) finds them all again.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json
from agenthost.cli.params import FloatRange


def only_home(ctx: click.Context) -> None:
    """``daemon --home X stop`` is fine; the options that run a daemon are not, with a
    subcommand (they would be silently ignored)."""
    from click.core import ParameterSource

    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name != "home"
        and ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)}: an option of `agenthost daemon` itself (running the "
            f"daemon), not of `agenthost daemon {ctx.invoked_subcommand}`"
        )


def _home(home: Path | None) -> Path:
    """This command's ``--home``, else the one given to ``agenthost daemon`` (``daemon
    --home X stop`` works as ``daemon stop --home X``), else the default."""
    from agenthost.paths import resolve_home

    group = click.get_current_context().parent
    if home is None and group is not None:
        home = group.params.get("home")
    return resolve_home(home)


@click.command(name="stop")
@click.option(
    "--timeout",
    type=FloatRange(min=0.1, max=3600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the daemon to exit.",
)
@home_option
@json_option
@handle_errors
def daemon_stop(timeout: float, home: Path | None, as_json: bool) -> None:
    """Stop the daemon (SIGTERM); its hosts and agents keep running.

    Meanwhile attach, send, stop and list talk to the hosts directly (list shows what
    the daemon last recorded) and nothing restarts an agent; `agenthost daemon` (or
    the next `agenthost run`) starts a daemon again, which finds them all. Without a
    daemon, says so and exits 0.
    """
    from agenthost.daemon.client import stop_daemon

    root = _home(home)
    pid = stop_daemon(root, timeout=timeout)
    if as_json:
        print_json({"ok": True, "stopped": pid is not None, "pid": pid, "home": str(root)})
    elif pid is None:
        click.echo(f"no daemon runs for {root}: nothing to stop", err=True)
    else:
        click.echo(
            f"stopped the daemon (pid {pid}); its hosts and agents keep running "
            "(`agenthost daemon` or the next `agenthost run` starts it again)"
        )


@click.command(name="status")
@home_option
@json_option
@handle_errors
def daemon_status(home: Path | None, as_json: bool) -> None:
    """Show the daemon: pid, uptime, limits, agents.

    Exits 3 when no daemon runs for the home.
    """
    from agenthost.client import run_blocking
    from agenthost.daemon.client import DaemonClient, daemon_alive
    from agenthost.daemon.files import daemon_socket_path
    from agenthost.daemon.protocol import DaemonAgent, DaemonPingResponse
    from agenthost.errors import DaemonNotRunning

    root = _home(home)
    if not daemon_alive(root):
        raise DaemonNotRunning(
            f"no daemon runs for {root}",
            hint="`agenthost daemon` runs one (`agenthost run` starts one in the background)",
        )

    async def ask() -> tuple[DaemonPingResponse, list[DaemonAgent]]:
        async with DaemonClient(root) as client:
            return await client.ping(), await client.list()

    ping, agents = run_blocking(ask())
    statuses = dict(sorted(Counter(a.status for a in agents).items()))
    log = _log_of(ping.pid)
    if as_json:
        print_json(
            {
                "ok": True,
                **ping.model_dump(mode="json", exclude_none=True),
                "home": str(root),
                "socket_path": str(daemon_socket_path(root)),
                "log": log,
                "statuses": statuses,
            }
        )
        return
    rows = [
        ("daemon", f"running, pid {ping.pid}"),
        ("version", f"{ping.version} (daemon protocol {ping.protocol_version})"),
        ("started", f"{ping.started_at.astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')}"),
        ("uptime", ping.uptime),
        ("home", str(root)),
        ("hosts", _scope(ping.host_scope)),
        ("limits", _limits(ping.limits or {})),
        ("agents", _agents(len(agents), statuses)),
    ]
    if log is not None:
        rows.append(("log", _log_text(log)))
    width = max(len(key) for key, _ in rows)
    click.echo("\n".join(f"{key + ':':<{width + 1}} {value}" for key, value in rows))


def _log_of(pid: int) -> str | None:
    """Where the daemon's log goes: what its stderr is (the file ``run`` gave it, a
    terminal, ``socket:[N]`` under systemd's journal); None when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/fd/2")
    except OSError:
        return None


def _log_text(log: str) -> str:
    if log.startswith("socket:"):  # (systemd's journal, most likely)
        return f"{log} (under systemd: journalctl --user -u agenthost-daemon)"
    return log


def _scope(scope: str) -> str:
    if scope == "systemd":
        return "started in systemd scopes of their own"
    return "started in sessions of their own"


def _limits(limits: dict[str, Any]) -> str:
    """``--max-agents 3 --queue --idle-stop 30m0s``, as the daemon was started."""
    from agenthost.timefmt import go_duration

    parts = []
    if limits.get("max_agents") is not None:
        parts.append(f"--max-agents {limits['max_agents']}")
        if limits.get("queue"):
            parts.append("--queue")
    if isinstance(limits.get("idle_stop"), int | float):
        parts.append(f"--idle-stop {go_duration(limits['idle_stop'])}")
    return " ".join(parts) or "none"


def _agents(total: int, statuses: dict[str, int]) -> str:
    """``3 (2 running, 1 queued)``."""
    if not total:
        return "none"
    return f"{total} ({', '.join(f'{n} {status}' for status, n in statuses.items())})"
