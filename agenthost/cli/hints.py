"""The hints of a command that found no host for its agent: why, and what to do (the
host ended and its journal is left, its socket was deleted, a did-you-mean, what the
daemon knows: queued, restarting, given up on). Imported only on that error path."""

from __future__ import annotations

import difflib
from pathlib import Path

from agenthost.errors import AgentHostError
from agenthost.lockfile import is_lock_held, read_lock_info
from agenthost.paths import agent_id_from_socket, hosts_dir, journal_dir, lock_path, socket_path


def diagnose(home: Path, agent_id: str) -> str | None:
    """Why no host answers for ``agent_id``, and what to do (a hint of
    :func:`agenthost.cli.common.fail`); None when there is nothing better to say."""
    try:
        lock = lock_path(home, agent_id)
        sock = socket_path(home, agent_id)
    except AgentHostError:
        return None
    if is_lock_held(lock):
        pid = (read_lock_info(lock) or {}).get("pid")
        who = f"pid {pid}" if isinstance(pid, int) else "a live process"
        if not sock.exists():
            return (
                f"a host for {agent_id!r} is alive ({who}) but its socket file was deleted; "
                f"`kill -USR1 {pid if isinstance(pid, int) else '<pid>'}` re-creates it"
            )
        return f"a host for {agent_id!r} is alive ({who}) but does not answer: stopped or busy?"
    waiting = daemon_says(home, agent_id)
    if waiting is not None:
        return waiting
    # the host ended, its agent's conversation did not: it is on disk
    export = (
        f"; its journal is still there: `agenthost export {agent_id}` prints its conversation"
        if journal_dir(home, agent_id).is_dir()
        else ""
    )
    if sock.exists():
        return (
            f"the host for {agent_id!r} is gone (its socket is left over){export}; "
            f"`agenthost serve --agent-id {agent_id}` starts a new one and cleans it up"
        )
    if export:
        return f"the host for {agent_id!r} has ended{export}"
    try:
        known = sorted(
            a for p in hosts_dir(home).iterdir() if (a := agent_id_from_socket(p)) is not None
        )
    except OSError:
        known = []
    close = difflib.get_close_matches(agent_id, known, n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    if known:
        return "running agents: " + ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
    return "no host is running; start one with `agenthost serve --agent-id ID`"


def daemon_says(home: Path, agent_id: str) -> str | None:
    """Why an agent the daemon knows has no host, when the daemon knows better than the
    hosts directory: it waits in the queue, for a restart, or the daemon gave up on it
    (its program is not installed...)."""
    from agenthost.client import run_blocking
    from agenthost.daemon.client import daemon_alive
    from agenthost.daemon.files import registry_path
    from agenthost.inventory import known_agents_async

    if not daemon_alive(home) and not registry_path(home).exists():
        return None  # (no daemon ever ran here: nothing to ask)
    try:
        records, _ = run_blocking(known_agents_async(home))
    except AgentHostError:
        return None
    record = next((r for r in records if r.agent_id == agent_id), None)
    if record is None:
        return None
    stop = f"`agenthost stop {agent_id}`"
    if record.status == "queued":
        return (
            f"{agent_id!r} is queued: the daemon starts it when a place frees "
            f"(--max-agents); {stop} takes it out of the queue"
        )
    if record.status == "restarting":
        return f"the daemon restarts {agent_id!r} after its failure; {stop} calls that off"
    if record.status == "failed" and record.last_error:
        return f"the daemon gave up on {agent_id!r}: {record.last_error}"
    return None
