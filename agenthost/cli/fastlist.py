"""``agenthost list`` of this machine on the fast path: the standard library alone.

The hosts of the hosts directory are probed in parallel (a thread and a
:class:`QuickClient` each: a host's answer is a few hundred microseconds of CPU, and a
thread costs less to start than asyncio costs to import), the running daemon is asked
with the same client (its protocol has the same framing and handshake), and what they
sent goes, as it came, through the one merge and table (:mod:`agenthost.agentlist`).

Anything this module does not know as the click path would show it gives the command
back (:class:`NotMine`), before anything is printed: a host that does not answer in
time, a stale socket, a host or a daemon of another version, something that is not the
protocol, no daemon but its registry on disk (the click path reads it). ``list``
changes nothing, so running it again the click way is harmless.
"""

from __future__ import annotations

import sys
import threading

from agenthost.cli.quickclient import NotMine, QuickClient
from agenthost.errors import AgentHostError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from agenthost.agentlist import HostSeen

_FLAGS = frozenset({"--json"})
_VALUES = frozenset({"--home", "--project", "--timeout"})
MIN_TIMEOUT = 0.05
"""``list --timeout``'s smallest value (as the click option's range)."""


def parse(words: list[str]) -> dict[str, str] | None:
    """The options of a plain ``list`` command line (``--json`` maps to ""), or None:
    an argument, an option this path does not take, a value given twice or looking
    like an option, a ``--timeout`` that is not a plain number of at least 0.05."""
    given: dict[str, str] = {}
    it = iter(words)
    for word in it:
        if word in _FLAGS:
            given[word] = ""
        elif word in _VALUES:
            value = next(it, None)
            if value is None or value.startswith("-") or word in given:
                return None
            given[word] = value
        else:
            return None  # help, --remote, --opt=value, an argument: click's
    if "--timeout" in given:
        try:
            seconds = float(given["--timeout"])
        except ValueError:
            return None
        if (
            not MIN_TIMEOUT <= seconds < float("inf")
            or given["--timeout"].strip() != given["--timeout"]
        ):
            return None
    return given


def run_list(words: list[str]) -> int | None:
    """Run ``agenthost list WORDS`` and return its exit status, or None when the click
    path must run it (nothing was printed)."""
    given = parse(words)
    if given is None:
        return None
    from agenthost.agentlist import CUT, merge, table_rows
    from agenthost.paths import check_home, resolve_home

    try:
        home = resolve_home(check_home(given["--home"]) if "--home" in given else None)
    except AgentHostError:
        return None  # refused: in the click path's words
    project = given.get("--project")
    hosts, known = gather(home, project, float(given.get("--timeout", "1")))
    items = merge(hosts, known)
    if "--json" in given:
        from agenthost.cli.views import json_text

        text = json_text(items)
    elif not items:
        sys.stderr.write("no agents\n")
        sys.stderr.flush()
        return 0
    else:
        from agenthost.cli.views import table

        try:
            text = table(*table_rows(items), cut=CUT)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NotMine from exc  # not the shape a host of ours sends
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def gather(
    home: Path, project: str | None, timeout: float
) -> tuple[list[HostSeen], dict[str, Any]]:
    """The hosts of ``home`` (of ``project``, when given) and the daemon's agents by id,
    asked at the same time; NotMine for anything the fast path does not show."""
    from agenthost.paths import agent_id_from_socket, hosts_dir

    try:
        candidates = sorted(
            (agent_id, path)
            for path in hosts_dir(home).iterdir()
            if (agent_id := agent_id_from_socket(path)) is not None
        )
    except FileNotFoundError:
        candidates = []
    results: list[Any] = [None] * (len(candidates) + 1)

    def run(index: int, job: Any, *args: Any) -> None:
        try:
            results[index] = job(*args)
        except (NotMine, AgentHostError, KeyError, TypeError, ValueError, AttributeError):
            results[index] = NotMine  # (the thread's end is the answer: nothing raised)

    threads = [
        threading.Thread(target=run, args=(i, _probe, agent_id, path, timeout), daemon=True)
        for i, (agent_id, path) in enumerate(candidates)
    ]
    for thread in threads:
        thread.start()
    run(len(candidates), _known, home, timeout)  # (the daemon, on this thread)
    for thread in threads:
        thread.join()
    if any(r is NotMine for r in results):
        raise NotMine
    from agenthost.agentlist import HostSeen

    hosts = [
        HostSeen(agent_id, str(path), status)
        for (agent_id, path), status in zip(candidates, results, strict=False)
        if project is None or status["agent"]["project"] == project
    ]
    known: dict[str, Any] = results[-1]
    if project is not None:
        known = {k: r for k, r in known.items() if (r.get("spec") or {}).get("project") == project}
    return hosts, known


def _probe(agent_id: str, path: Path, timeout: float) -> dict[str, Any]:
    with QuickClient(
        str(path), agent_id, connect_timeout=timeout, request_timeout=timeout
    ) as client:
        client.connect()
        status: dict[str, Any] = client.request("host.status")
    agent, host = status["agent"], status["host"]
    # what the table reads, of the types it reads (anything else: the click path's
    # models say what is wrong, and list the host as unreachable)
    for key in ("id", "state", "project", "worktree", "started_at"):
        if not isinstance(agent[key], str):
            raise TypeError(key)
    if not isinstance(host, dict) or not isinstance(agent.get("pid", 0), int):
        raise TypeError("host")
    return status


def _known(home: Path, timeout: float) -> dict[str, Any]:
    from agenthost.daemon.files import daemon_lock_path, daemon_socket_path, registry_path
    from agenthost.lockfile import is_lock_held

    if not is_lock_held(daemon_lock_path(home)):
        if registry_path(home).exists():
            raise NotMine  # its registry: read by the click path's models
        return {}
    with QuickClient(
        str(daemon_socket_path(home)),
        "daemon",
        connect_timeout=timeout,
        request_timeout=timeout * 5,  # (as the click path gives it)
        ping="daemon.ping",
    ) as client:
        client.connect()
        agents: list[dict[str, Any]] = client.request("daemon.list")["agents"]  # type: ignore[assignment]
    known: dict[str, Any] = {}
    for record in agents:
        if not isinstance(record["agent_id"], str) or not isinstance(record["status"], str):
            raise TypeError("agent_id")
        known[record["agent_id"]] = record
    return known
