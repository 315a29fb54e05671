"""The routes of a terminal agent (``--agent pty``, protocol 1.7): its screen, and the
keys, sizes and signals a browser sends it. Each is one request to the agent's host;
the bytes themselves come in the agent's event stream (``terminal`` and
``terminal_size`` events, :func:`agenthost.web.app.events`), after the screen's offset."""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agenthost.web.gateway import Gateway, read_body
from agenthost.web.handlers import with_agent
from agenthost.web.payloads import json_object, query_int
from agenthost.web.termbodies import input_body, resize_body, signal_body
from agenthost.web.tokens import TokenRecord

SCREEN: Final = "host.screen"
INPUT: Final = "host.input"
RESIZE: Final = "host.resize"
SIGNAL: Final = "host.signal"


async def _ask(gw: Gateway, request: Request, mtype: str, payload: dict[str, Any]) -> Any:
    return await with_agent(gw, request, lambda c: c.request(mtype, payload))


async def screen(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """GET /api/agents/{key}/screen[?offset=N]: the screen object of ``host.screen``
    (the head's, or as of offset N while the journal keeps it)."""
    offset = query_int(request.query_params.get("offset"), "offset")
    payload = {} if offset is None else {"offset": offset}
    return JSONResponse(await _ask(gw, request, SCREEN, payload))


async def input_(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/input {"data"} or {"data_b64"}: bytes to the agent's
    terminal (keys, a paste). Not an event: keys may be a password."""
    payload = input_body(json_object(await read_body(request)))
    return JSONResponse({"ok": True, **await _ask(gw, request, INPUT, payload)})


async def resize(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/resize {"cols", "rows"}: this browser's size; the answer
    is the terminal's size after it (the latest client's, or the fixed ``--size``)."""
    payload = resize_body(json_object(await read_body(request)))
    return JSONResponse(await _ask(gw, request, RESIZE, payload))


async def signal(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/signal {"signal"}: a signal to the terminal's foreground
    process group (scope ``control``)."""
    payload = signal_body(json_object(await read_body(request)))
    return JSONResponse({"ok": True, **await _ask(gw, request, SIGNAL, payload)})
