"""The routes about one agent (status, history, pending, send, interrupt, respond,
stop) and the spawn of a new one: each a request to the agent's host (or the daemon),
answered as the CLI's ``--json`` answers it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError, HostNotFound
from agenthost.protocol import AgentState
from agenthost.web.gateway import Gateway, read_body
from agenthost.web.payloads import bad_request, fields, json_object, query_int
from agenthost.web.tokens import TokenRecord

T = TypeVar("T")
Json = dict[str, Any]


async def with_agent(
    gw: Gateway, request: Request, call: Callable[[AsyncClient], Awaitable[T]]
) -> T:
    """Run ``call`` with a connected client of the agent the URL names; an agent whose
    host does not answer is 404 (none such) or 409 (it exists, does not run)."""
    key = gw.agents.key(request.path_params["key"])
    client = gw.agents.client(key)
    try:
        async with client:
            return await call(client)
    except HostNotFound as exc:
        raise await gw.agents.not_found(key, exc) from None


def dump(model: Any) -> Json:
    out: Json = model.model_dump(mode="json", exclude_none=True)
    return out


async def status(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """GET /api/agents/{key}: as ``agenthost status --json``."""
    return JSONResponse(dump(await with_agent(gw, request, lambda c: c.status())))


async def history(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """GET /api/agents/{key}/history?limit=N: as ``agenthost history --json``."""
    limit = query_int(request.query_params.get("limit"), "limit") or 0
    return JSONResponse(dump(await with_agent(gw, request, lambda c: c.history(limit))))


async def pending(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """GET /api/agents/{key}/pending: ``{"requests": [...]}``."""
    requests = await with_agent(gw, request, lambda c: c.pending())
    return JSONResponse({"requests": [dump(r) for r in requests]})


async def send(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/send {"input", "key"?}."""
    body = fields(json_object(await read_body(request)), {"input": str}, {"key": str})
    result = await with_agent(gw, request, lambda c: c.send(body["input"], key=body.get("key")))
    return JSONResponse({"ok": True, **result.model_dump(mode="json")})


async def interrupt(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/interrupt: as ``agenthost interrupt --json`` (an idle
    agent has nothing to interrupt: ``"sent": false``)."""
    fields(json_object(await read_body(request), empty_ok=True), {})

    async def call(client: AsyncClient) -> Json:
        # asked first: some agents take an interrupt even when idle
        if (await client.status()).agent.state == AgentState.IDLE:
            return {"sent": False, "method": None, "reason": "nothing to interrupt"}
        return dump(await client.interrupt())

    return JSONResponse(await with_agent(gw, request, call))


async def respond(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/respond {"request_id", "decision", "message"?,
    "option_id"?, "updated_input"?}."""
    body = fields(
        json_object(await read_body(request)),
        {"request_id": str, "decision": str},
        {"message": str, "option_id": str, "updated_input": dict},
    )
    decision = body["decision"]
    if decision not in ("allow", "deny"):
        raise bad_request('field "decision" must be "allow" or "deny"')
    result = await with_agent(
        gw,
        request,
        lambda c: c.respond(
            body["request_id"],
            "allow" if decision == "allow" else "deny",
            message=body.get("message"),
            updated_input=body.get("updated_input"),
            option_id=body.get("option_id"),
        ),
    )
    return JSONResponse({"ok": True, **result.model_dump(mode="json")})


async def stop(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents/{key}/stop {"force"?, "timeout"?, "reason"?}: as ``agenthost
    stop --json``; answers once the agent has exited."""
    body = fields(
        json_object(await read_body(request), empty_ok=True),
        {},
        {"force": bool, "timeout": (int, float), "reason": str},
    )
    timeout = body.get("timeout")
    if timeout is not None and not 0 <= timeout <= 86400:
        raise bad_request('field "timeout" must be between 0 and 86400 seconds')
    result = await with_agent(
        gw,
        request,
        lambda c: c.stop(
            force=body.get("force", False), timeout=timeout, reason=body.get("reason", "")
        ),
    )
    return JSONResponse(dump(result))


SPAWN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "agent": str,
    "command": list,
    "cwd": str,
    "env": dict,
    "project": str,
    "task": str,
    "description": str,
    "agent_opts": dict,
    "resume": str,
    "linger": (int, float),
    "stop_timeout": (int, float),
    "ring_size": int,
    "ring_bytes": int,
    "restart": (str, dict),
}


async def spawn(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """POST /api/agents: start an agent through the daemon, as ``agenthost run`` (the
    daemon is started if none runs). Body: ``agent_id`` and the SpawnSpec fields;
    ``restart`` is ``"never"``, ``"on-failure"`` or the policy object."""
    from agenthost.agents import AdapterOptions, make_adapter
    from agenthost.daemon.client import DaemonClient, ensure_daemon
    from agenthost.daemon.protocol import SpawnSpec
    from agenthost.paths import check_socket_path, socket_path

    body = fields(json_object(await read_body(request)), {"agent_id": str}, SPAWN_FIELDS)
    key = gw.agents.key(body["agent_id"])  # a valid id (404 otherwise, as in a URL)
    if key.machine is not None:
        raise bad_request("spawn on a remote machine is not supported")
    restart = body.get("restart")
    if isinstance(restart, str):
        if restart not in ("never", "on-failure"):
            raise bad_request('field "restart" must be "never", "on-failure" or an object')
        body["restart"] = {"policy": restart}
    cwd = body.get("cwd")
    if cwd is not None and not Path(cwd).is_absolute():
        raise bad_request('field "cwd" must be an absolute path')
    try:
        spec = SpawnSpec.model_validate(body)
        check_socket_path(socket_path(gw.home, spec.agent_id))
        options = AdapterOptions(resume=spec.resume, params=dict(spec.agent_opts))
        make_adapter(spec.agent, options).build_command(spec.command)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise bad_request(f"field {where!r}: {first['msg']}") from None
    except AgentHostError as exc:
        raise bad_request(exc.message) from None
    daemon_started = await asyncio.to_thread(ensure_daemon, gw.home)
    async with DaemonClient(gw.home) as daemon:
        result = await daemon.spawn(spec)
    answer = {"ok": True, **dump(result)}
    if daemon_started:
        answer["daemon_started"] = daemon_started
    return JSONResponse(answer, status_code=201)
