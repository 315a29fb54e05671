"""What ``agenthost list`` shows: the hosts found on disk merged with what the daemon
knows, as table rows (the JSON is :func:`agenthost.inventory.json_items`). Pure
functions over already-fetched data (no sockets), so the merge is tested without
processes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenthost.cli.render import uptime_of
from agenthost.inventory import json_items, only_daemon_known

if TYPE_CHECKING:
    from agenthost.client import DiscoveredHost
    from agenthost.daemon.protocol import DaemonAgent

TASK_WIDTH = 32
"""Columns a task title gets in the table before it is cut with an ellipsis."""
CUT = {"task": TASK_WIDTH}
"""The columns :func:`agenthost.cli.render.table` cuts (rows hold whole raw text)."""

BASE_HEADERS = ("agent", "state", "backend", "project", "task", "pid", "uptime", "cost")
DAEMON_HEADERS = ("daemon", "restarts")


def cost_text(cost: float | None) -> str:
    """A session's cost in dollars as the table shows it (``-`` when unknown)."""
    from agenthost.governance.budget import usd

    return "-" if cost is None else usd(cost)


def _host_row(host: DiscoveredHost) -> list[str]:
    if host.status is None:
        state = "unreachable" if host.alive else "stale"
        return [host.agent_id, state, "", "", "", "-", "", "-"]
    a = host.status.agent
    return [
        a.id,
        a.state,
        (a.backend or "")
        + (f" {a.terminal.cols}x{a.terminal.rows}" if a.terminal else "")
        + (f" [{a.sandbox}]" if a.sandbox else ""),
        a.project,
        a.task or "",
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
        (spec.task or "") if spec else "",
        "-",
        "",
        "-",
    ]


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
        branches = any(entry.branch for entry in known.values())
        if branches:  # (agents in worktrees of their own: run --worktree)
            headers.append("branch")
        for row in rows:
            entry = known.get(row[0])
            row += [entry.status, str(entry.restarts)] if entry else ["-", ""]
            if branches:
                row.append((entry.branch or "") if entry else "")
    rows.sort(key=lambda row: row[0])
    return headers, rows


def machine_rows(
    machines: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
) -> tuple[list[str], list[list[str]]]:
    """``list --remote``: headers and rows of several machines' ``list --json`` items
    (``(machine, items)`` in order), each row starting with its machine; the machines
    in the order given, each one's agents sorted by id."""
    headers = ["machine", *BASE_HEADERS]
    rows: list[list[str]] = []
    tables = [(machine, table_rows(*_from_items(items))) for machine, items in machines]
    if any(len(h) > len(BASE_HEADERS) for _, (h, _) in tables):
        headers += DAEMON_HEADERS
    if any("branch" in h for _, (h, _) in tables):
        headers.append("branch")
    for machine, (_, machine_table) in tables:
        for row in machine_table:
            rows.append([machine, *row, *[""] * (len(headers) - 1 - len(row))])
    return headers, rows


def _from_items(
    items: Sequence[Mapping[str, Any]],
) -> tuple[list[DiscoveredHost], dict[str, DaemonAgent]]:
    # the inverse of json_items, for what another machine printed: an item that does
    # not read as one is shown unreachable rather than failing the whole listing
    from agenthost.client import DiscoveredHost
    from agenthost.daemon.protocol import DaemonAgent
    from agenthost.protocol import StatusResponse

    hosts: list[DiscoveredHost] = []
    known: dict[str, DaemonAgent] = {}
    for item in items:
        agent_id = str(item.get("agent_id", "?"))
        record = _read(DaemonAgent, item.get("daemon"))
        if record is not None:
            known[agent_id] = record
        if "socket_path" not in item and record is not None:
            continue  # only the daemon knows it
        status = None
        if isinstance(item.get("agent"), dict):
            status = _read(StatusResponse, {"agent": item["agent"], "host": item.get("host")})
        error = str(item.get("error") or "") or None
        path = Path(str(item.get("socket_path") or ""))
        hosts.append(DiscoveredHost(agent_id, path, status, error, bool(item.get("alive"))))
    return hosts, known


def _read(model: Any, data: Any) -> Any:
    from pydantic import ValidationError

    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


__all__ = ["CUT", "cost_text", "json_items", "machine_rows", "table_rows"]
