"""The runs of hooks as the daemon recorded them (``hook list``, ``GET /api/hooks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import structlog

from agenthost.errors import AgentHostError

log = structlog.get_logger("agenthost.hooks")

SOURCE: Final = "hook"
"""The runs' source in the daemon's record (``DaemonClient.runs(source="hook")``)."""


async def recent_runs(home: Path, names: list[str], limit: int) -> dict[str, list[Any]]:
    """The newest ``limit`` runs of each hook of ``names``, as JSON objects, newest
    first; none when no daemon runs (reading them never starts one)."""
    from agenthost.daemon.client import DaemonClient

    runs: dict[str, list[Any]] = {name: [] for name in names}
    if not names:
        return runs
    try:
        async with DaemonClient(home) as daemon:
            for name in names:
                found = await daemon.runs(source=SOURCE, name=name, limit=limit)
                runs[name] = [r.model_dump(mode="json", exclude_none=True) for r in found]
    except AgentHostError as exc:  # no daemon (or an older one): nothing to show
        log.debug("hooks.runs_unavailable", error=exc.message)
    return runs
