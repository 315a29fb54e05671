"""What ``agenthost list`` shows: the hosts found on disk merged with what the daemon
knows, as table rows (the JSON is :func:`agenthost.inventory.json_items`). Pure
functions over already-fetched data (no sockets), so the merge is tested without
processes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenthost.agentlist import BASE_HEADERS, CUT, DAEMON_HEADERS, cost_text
from agenthost.agentlist import table_rows as item_rows
from agenthost.inventory import json_items

if TYPE_CHECKING:
    from agenthost.client import DiscoveredHost
    from agenthost.daemon.protocol import DaemonAgent


def table_rows(
    hosts: Sequence[DiscoveredHost], known: Mapping[str, DaemonAgent]
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows, sorted by agent id (:func:`agenthost.agentlist.table_rows` of
    :func:`json_items`). The daemon's columns appear only when a daemon (or its
    registry) knows something."""
    return item_rows(json_items(hosts, known))


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


__all__ = [
    "BASE_HEADERS",
    "CUT",
    "DAEMON_HEADERS",
    "cost_text",
    "json_items",
    "machine_rows",
    "table_rows",
]
