"""``GET /api/automation``: the schedules and the newest runs (of schedules and webhooks)
of the home's daemon, for the page's overview. Only asked of a daemon that runs: a
read never starts one."""

from __future__ import annotations

from typing import Any, Final

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agenthost.errors import DaemonNotRunning, UnknownType
from agenthost.web.gateway import Gateway
from agenthost.web.tokens import TokenRecord

RUNS: Final = 50
"""How many runs the overview shows (the newest, every source)."""
TIMEOUT: Final = 10.0
"""Seconds the daemon has to answer each request (a busy daemon gets an error, not a
page that waits forever)."""

log = structlog.get_logger("agenthost.web")


def no_daemon() -> dict[str, Any]:
    """The answer when no daemon runs: nothing to show, and why."""
    return {"schedules": [], "runs": [], "daemon": False}


async def automation(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    """GET /api/automation: ``{"schedules": [ScheduleInfo as ``schedule list --json``],
    "runs": [the newest RunRecords], "daemon": true}``; ``daemon`` false (and empty
    lists) when no daemon runs. Query parameters are ignored (there are none)."""
    from agenthost.daemon.client import DaemonClient, daemon_alive

    # the lock first: a socket left by a killed daemon would cost a connect timeout
    if not daemon_alive(gw.home):
        return JSONResponse(no_daemon())
    try:
        async with DaemonClient(gw.home, request_timeout=TIMEOUT) as daemon:
            schedules = await daemon.schedules()
            runs = await daemon.runs(limit=RUNS)
    except DaemonNotRunning:
        return JSONResponse(no_daemon())  # it ended between the lock and the socket
    except UnknownType as exc:
        # a daemon older than automation (protocol 1.8) has none of it to show
        log.info("web.automation_unsupported", error=exc.message)
        return JSONResponse({**no_daemon(), "daemon": True, "error": exc.message})
    return JSONResponse(
        {
            "schedules": [info.model_dump(mode="json") for info in schedules],
            "runs": [run.model_dump(mode="json") for run in runs],
            "daemon": True,
        }
    )
