"""``agenthost bridge ID`` / ``agenthost bridge --daemon``: stdio to a local socket,
for clients on other machines (``--remote``, over ssh). See docs/remote.md."""

from __future__ import annotations

from pathlib import Path

import click

from agenthost.cli.common import complete_agent_ids, handle_errors, home_option


@click.command()
@click.argument("agent_id", required=False, shell_complete=complete_agent_ids)
@click.option("--daemon", "to_daemon", is_flag=True, help="The daemon's socket, not a host's.")
@click.option("--start", is_flag=True, help="With --daemon: start the daemon first if none runs.")
@home_option
@handle_errors
def bridge(agent_id: str | None, to_daemon: bool, start: bool, home: Path | None) -> None:
    """Join stdin and stdout to an agent's host (or the daemon), for ssh.

    What clients run on this machine with `--remote`: `ssh HOST agenthost bridge ID`.
    The bytes of the protocol pass unchanged; stdout carries nothing else (errors go to
    stderr). At stdin's end what was asked is still answered (and a stream goes on);
    ends when the host closes the connection or stdout is gone. Exit status 3 when no
    host (no daemon) answers.
    """
    from agenthost.bridge import bridge as run_bridge
    from agenthost.cli.common import remember_agent_id
    from agenthost.errors import AgentHostError, DaemonNotRunning, HostNotFound
    from agenthost.paths import resolve_home, socket_path

    if to_daemon == (agent_id is not None):
        raise click.UsageError("give an agent id, or --daemon")
    if start and not to_daemon:
        raise click.UsageError("--start goes with --daemon")
    root = resolve_home(home)
    if agent_id is not None:
        remember_agent_id(agent_id)
        path = socket_path(root, agent_id)

        def not_found(exc: OSError | TimeoutError) -> AgentHostError:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "no answer"
            return HostNotFound(f"no host is running for agent {agent_id!r} ({why}: {path})")

        run_bridge(path, "host", not_found)
        return
    from agenthost.daemon.client import ensure_daemon
    from agenthost.daemon.files import daemon_socket_path

    if start:
        ensure_daemon(root)
    path = daemon_socket_path(root)

    def no_daemon(exc: OSError | TimeoutError) -> AgentHostError:
        return DaemonNotRunning(
            f"no daemon answers on {path}",
            hint="start one there with `agenthost daemon` (or `agenthost run` starts it)",
        )

    run_bridge(path, "daemon", no_daemon)
