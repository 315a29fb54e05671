"""What ``agenthost list`` shows: the hosts found on disk merged with what the daemon
knows, as table rows or JSON. Pure functions over already-fetched data (no sockets),
so the merge is tested without processes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agenthost.cli.render import fit, uptime_of

if TYPE_CHECKING:
    from agenthost.client import DiscoveredHost
    from agenthost.daemon.protocol import DaemonAgent

TASK_WIDTH = 32
"""Columns a task title gets in the table before it is cut with an ellipsis."""

BASE_HEADERS = ("agent", "state", "backend", "project", "task", "pid", "uptime", "cost")
DAEMON_HEADERS = ("daemon", "restarts")


def cost_text(cost: float | None) -> str:
    """A session's cost in dollars as the table shows it (``-`` when unknown)."""
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def _host_row(host: DiscoveredHost) -> list[str]:
    if host.status is None:
        state = "unreachable" if host.alive else "stale"
        return [host.agent_id, state, "", "", "", "-", "", "-"]
    a = host.status.agent
    return [
        a.id,
        a.state,
        a.backend or "",
        a.project,
        fit(a.task or "", TASK_WIDTH),
        str(a.pid or "-"),
        uptime_of(a),
        cost_text(a.cost_usd),
    ]


_NO_HOST_STATUSES = frozenset({"lost", "unreachable", "restarting", "spawning", "failed"})
"""Daemon statuses under which the agent state it last recorded is stale: no host is
running the agent now, so the table shows ``-`` rather than a misleading ``running``."""


def _record_row(record: DaemonAgent) -> list[str]:
    spec = record.spec
    state = "-" if record.status in _NO_HOST_STATUSES else (record.state or "-")
    return [
        record.agent_id,
        state,
        spec.agent if spec else "",
        spec.project if spec else "",
        fit((spec.task or "") if spec else "", TASK_WIDTH),
        "-",
        "",
        "-",
    ]


def only_daemon_known(
    hosts: Iterable[DiscoveredHost], known: Mapping[str, DaemonAgent]
) -> list[DaemonAgent]:
    """The daemon's agents that have no socket in the hosts directory (lost, failed,
    stopped, restarting), by id."""
    seen = {h.agent_id for h in hosts}
    return [r for agent_id, r in sorted(known.items()) if agent_id not in seen]


def table_rows(
    hosts: Sequence[DiscoveredHost], known: Mapping[str, DaemonAgent]
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows, sorted by agent id. The daemon's columns appear only when a
    daemon (or its registry) knows something."""
    rows = [_host_row(h) for h in hosts]
    rows += [_record_row(r) for r in only_daemon_known(hosts, known)]
    headers = list(BASE_HEADERS)
    if known:
        headers += DAEMON_HEADERS
        for row in rows:
            entry = known.get(row[0])
            row += [entry.status, str(entry.restarts)] if entry else ["-", ""]
    rows.sort(key=lambda row: row[0])
    return headers, rows


def json_items(
    hosts: Sequence[DiscoveredHost], known: Mapping[str, DaemonAgent]
) -> list[dict[str, Any]]:
    """``agenthost list --json``: one object per agent, sorted by agent id."""
    out: list[dict[str, Any]] = []
    for h in hosts:
        item: dict[str, Any] = {
            "agent_id": h.agent_id,
            "socket_path": str(h.socket_path),
            "reachable": h.status is not None,
            "alive": h.alive,
        }
        if h.status is not None:
            item["agent"] = h.status.agent.model_dump(mode="json", exclude_none=True)
            item["host"] = h.status.host.model_dump(mode="json", exclude_none=True)
        else:
            item["error"] = h.error
        if h.agent_id in known:
            item["daemon"] = known[h.agent_id].model_dump(mode="json", exclude_none=True)
        out.append(item)
    for record in only_daemon_known(hosts, known):
        out.append(
            {
                "agent_id": record.agent_id,
                "reachable": False,
                "alive": False,
                "daemon": record.model_dump(mode="json", exclude_none=True),
            }
        )
    out.sort(key=lambda item: str(item["agent_id"]))
    return out
