"""The routes about one agent (status, history, pending, send, interrupt, respond,
stop) and the spawn of a new one: each a request to the agent's host (or the daemon),
answered as the CLI's ``--json`` answers it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError, HostNotFound
from agenthost.protocol import AgentState
from agenthost.web.gateway import Gateway, read_body
from agenthost.web.payloads import HttpError, bad_request, fields, json_object, query_int
from agenthost.web.tokens import TokenRecord

if TYPE_CHECKING:
    from agenthost.daemon.protocol import SpawnSpec

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


async def respond(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    """POST /api/agents/{key}/respond {"request_id", "decision", "message"?,
    "option_id"?, "updated_input"?, "remember"?}; the host records the answer as the
    token's (actor ``web:<token name>``). ``remember: "session"`` (allow only) also
    allows the same for the rest of the agent's session."""
    body = fields(
        json_object(await read_body(request)),
        {"request_id": str, "decision": str},
        {"message": str, "option_id": str, "updated_input": dict, "remember": str},
    )
    decision = body["decision"]
    if decision not in ("allow", "deny"):
        raise bad_request('field "decision" must be "allow" or "deny"')
    remember = body.get("remember")
    if remember is not None and remember != "session":
        raise bad_request('field "remember" must be "session"')
    if remember is not None and decision != "allow":
        raise bad_request('field "remember" goes with "decision": "allow" only')
    result = await with_agent(
        gw,
        request,
        lambda c: c.respond(
            body["request_id"],
            "allow" if decision == "allow" else "deny",
            message=body.get("message"),
            updated_input=body.get("updated_input"),
            option_id=body.get("option_id"),
            actor=f"web:{record.name}",
            remember="session" if remember is not None else None,
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
    daemon is started if none runs). Body: ``agent_id``, the SpawnSpec fields
    (``restart`` is ``"never"``, ``"on-failure"`` or the policy object), and
    ``machine`` (one of the gateway's ``--remote`` values) for an agent there."""
    from agenthost.daemon.protocol import SpawnSpec

    body = fields(
        json_object(await read_body(request)), {"agent_id": str}, {**SPAWN_FIELDS, "machine": str}
    )
    machine = body.pop("machine", None)
    if machine is not None and machine not in gw.agents.machines:
        raise HttpError(404, "not_found", f"no remote machine {machine!r} in this gateway")
    gw.agents.key(body["agent_id"])  # a valid id (404 otherwise, as in a URL)
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
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise bad_request(f"field {where!r}: {first['msg']}") from None
    check_spec(gw, spec, local=machine is None)
    answer = await (spawn_local(gw, spec) if machine is None else spawn_remote(spec, machine))
    answer["key"] = spec.agent_id if machine is None else f"{spec.agent_id}@{machine}"
    answer["machine"] = machine
    return JSONResponse(answer, status_code=201)


def check_spec(gw: Gateway, spec: SpawnSpec, *, local: bool) -> None:
    """HttpError 400 for what would fail to start: the adapter's options and command,
    and (here) a socket path too long."""
    from agenthost.agents import AdapterOptions, make_adapter
    from agenthost.paths import check_socket_path, socket_path

    try:
        if local:
            check_socket_path(socket_path(gw.home, spec.agent_id))
        options = AdapterOptions(resume=spec.resume, params=dict(spec.agent_opts))
        make_adapter(spec.agent, options).build_command(spec.command)
    except AgentHostError as exc:
        raise bad_request(exc.message) from None


async def spawn_local(gw: Gateway, spec: SpawnSpec) -> Json:
    """Spawn through this home's daemon, started first if none runs."""
    from agenthost.daemon.client import DaemonClient, ensure_daemon

    daemon_started = await asyncio.to_thread(ensure_daemon, gw.home)
    async with DaemonClient(gw.home) as daemon:
        answer = {"ok": True, **dump(await daemon.spawn(spec))}
    if daemon_started:
        answer["daemon_started"] = daemon_started
    return answer


async def spawn_remote(spec: SpawnSpec, machine: str) -> Json:
    """Spawn through the daemon of ``machine`` (over ssh; started there if none runs)."""
    from agenthost.daemon.client import DaemonClient

    async with DaemonClient(remote=machine, autostart=True) as daemon:
        return {"ok": True, **dump(await daemon.spawn(spec))}
