"""``agenthost list``'s merge and table, on the JSON-shaped dicts of the protocol.

One merge and one table for both ways ``list`` runs: :func:`agenthost.inventory.json_items`
hands in its models' ``model_dump(mode="json", exclude_none=True)``, the fast path
(:mod:`agenthost.cli.fastlist`) the payloads as the hosts and the daemon sent them. Pure
functions (no sockets, no asyncio), and neither click nor pydantic nor ``typing`` at run
time: the fast path's start-up is what it costs.
"""

from __future__ import annotations

from agenthost.money import usd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Json = Mapping[str, Any]

TASK_WIDTH = 32
"""Columns a task title gets in the table before it is cut with an ellipsis."""
CUT = {"task": TASK_WIDTH}
"""The columns :func:`agenthost.cli.views.table` cuts (rows hold whole raw text)."""

BASE_HEADERS = ("agent", "state", "backend", "project", "task", "pid", "uptime", "cost")
DAEMON_HEADERS = ("daemon", "restarts")


class HostSeen:
    """A socket of the hosts directory and what probing it gave: the ``host.status``
    payload, or the error text and whether its lock is held (False: a dead host's
    leftover)."""

    # (written out, not a dataclass: importing dataclasses is start-up the fast path pays)
    __slots__ = ("agent_id", "alive", "error", "socket_path", "status")

    def __init__(
        self,
        agent_id: str,
        socket_path: str,
        status: Json | None,
        error: str | None = None,
        alive: bool = True,
    ) -> None:
        self.agent_id = agent_id
        self.socket_path = socket_path
        self.status = status
        self.error = error
        self.alive = alive


def merge(hosts: Sequence[HostSeen], known: Mapping[str, Json]) -> list[dict[str, Any]]:
    """``agenthost list --json``: one object per agent, sorted by agent id; ``known``
    is what the daemon knows (``daemon.list`` entries by agent id)."""
    out: list[dict[str, Any]] = []
    for h in hosts:
        item: dict[str, Any] = {
            "agent_id": h.agent_id,
            "socket_path": h.socket_path,
            "reachable": h.status is not None,
            "alive": h.alive,
        }
        if h.status is not None:
            item["agent"] = h.status["agent"]
            item["host"] = h.status["host"]
        else:
            item["error"] = h.error
        if h.agent_id in known:
            item["daemon"] = known[h.agent_id]
        out.append(item)
    seen = {h.agent_id for h in hosts}
    for agent_id, record in sorted(known.items()):
        if agent_id not in seen:  # lost, failed, stopped, restarting: no socket
            out.append({"agent_id": agent_id, "reachable": False, "alive": False, "daemon": record})
    out.sort(key=lambda item: str(item["agent_id"]))
    return out


def cost_text(cost: float | None) -> str:
    """A session's cost in dollars as the table shows it (``-`` when unknown)."""
    return "-" if cost is None else usd(cost)


def _host_row(item: Json) -> list[str]:
    from agenthost.timefmt import uptime

    if "agent" not in item:
        state = "unreachable" if item["alive"] else "stale"
        return [item["agent_id"], state, "", "", "", "-", "", "-"]
    a = item["agent"]
    terminal = a.get("terminal")
    return [
        a["id"],
        a["state"],
        (a.get("backend") or "")
        + (f" {terminal['cols']}x{terminal['rows']}" if terminal else "")
        + (f" [{a['sandbox']}]" if a.get("sandbox") else ""),
        a["project"],
        a.get("task") or "",
        str(a.get("pid") or "-"),
        uptime(a["started_at"], a.get("ended_at")),
        cost_text(a.get("cost_usd")),
    ]


_NO_HOST_STATUSES = frozenset({"lost", "unreachable", "restarting", "spawning", "failed"})
"""Daemon statuses under which the agent state it last recorded is stale: no host is
running the agent now, so the table shows ``-`` rather than a misleading ``running``."""


def _record_row(record: Json) -> list[str]:
    spec = record.get("spec")
    state = "-" if record["status"] in _NO_HOST_STATUSES else (record.get("state") or "-")
    return [
        record["agent_id"],
        state,
        spec["agent"] if spec else "",
        spec["project"] if spec else "",
        (spec.get("task") or "") if spec else "",
        "-",
        "",
        "-",
    ]


def table_rows(items: Sequence[Json]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of :func:`merge`'s items, sorted by agent id. The daemon's
    columns appear only when a daemon (or its registry) knows something."""
    known = {item["agent_id"]: item["daemon"] for item in items if "daemon" in item}
    rows = [_host_row(i) for i in items if "socket_path" in i]
    rows += [_record_row(i["daemon"]) for i in items if "socket_path" not in i]
    headers = list(BASE_HEADERS)
    if known:
        headers += DAEMON_HEADERS
        branches = any(entry.get("branch") for entry in known.values())
        if branches:  # (agents in worktrees of their own: run --worktree)
            headers.append("branch")
        for row in rows:
            entry = known.get(row[0])
            row += [entry["status"], str(entry.get("restarts", 0))] if entry else ["-", ""]
            if branches:
                row.append((entry.get("branch") or "") if entry else "")
    rows.sort(key=lambda row: row[0])
    return headers, rows
