"""``POST /hooks/NAME``: a signed webhook delivery starts a run of the hook's target
(:mod:`agenthost.automation.webhooks` decides, the daemon runs); ``GET /api/hooks``:
the hooks and their recent deliveries.

The delivery route takes no bearer token and no cookie: the HMAC of the body with the
hook's secret is its authentication (see :mod:`agenthost.web.access`). Its steps, each
refusal answered as JSON with its status and logged (the hook, the status, the reason
and the client, never the body nor a header's value): an unknown hook 404, a body
over 512 KiB 413 (read under the gateway's body deadline; the daemon is never asked),
a missing or forged signature 401, a body that is not a JSON object 400, an event the
hook does not take 200 ``{"ignored": "filtered"}`` (GitHub's ping: ``"ping"``), a
field of the template missing 422; then the run is asked of the daemon (started if
none runs, as a spawn does): 202 ``{"run": ...}``, or 200 ``{"ignored": "replayed"}``
for a delivery whose key the daemon has seen.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agenthost.automation import hookfiles, webhooks
from agenthost.automation.hookfiles import Hook
from agenthost.automation.hookruns import SOURCE, recent_runs
from agenthost.errors import ConfigError, HookRefused
from agenthost.web.gateway import Gateway, read_body
from agenthost.web.payloads import HttpError, query_int
from agenthost.web.tokens import TokenRecord

log = structlog.get_logger("agenthost.web")


def _refused(name: str, request: Request, status: int, reason: str, message: str) -> Response:
    client = request.client
    log.info(
        "web.hook_refused",
        hook=name,
        status=status,
        reason=reason,
        client=f"{client.host}:{client.port}" if client else None,
    )
    return JSONResponse({"error": message, "code": reason}, status_code=status)


def _load(gw: Gateway, name: str) -> tuple[Hook, bytes] | None:
    """The hook and its secret; None for no such hook. HttpError 500 for one that
    cannot be used (an untrusted or broken file: logged, as the sender cannot fix it)."""
    try:
        hookfiles.check_name(name)
    except ConfigError:
        return None
    try:
        hook = hookfiles.load_hook(gw.home, name)
        if hook is None:
            return None
        return hook, hookfiles.load_secret(gw.home, name)
    except ConfigError as exc:
        log.error("web.hook_unusable", hook=name, error=exc.message)
        raise HttpError(
            500, "hook_unusable", "the hook cannot be used: see the gateway's log"
        ) from None


async def deliver(gw: Gateway, request: Request) -> Response:
    """POST /hooks/{name}: see the module's docstring."""
    name = request.path_params["name"]
    found = _load(gw, name)
    if found is None:
        return _refused(name, request, 404, "unknown_hook", "no such hook")
    hook, secret = found
    try:
        body = await read_body(request, webhooks.MAX_BODY)
    except HttpError as exc:
        return _refused(name, request, exc.status, exc.code, exc.message)
    try:
        delivery = webhooks.verify(request.headers, body, secret)
        if delivery.is_ping:
            log.info("web.hook_ping", hook=name)
            return JSONResponse({"ignored": "ping"})
        if not webhooks.wanted(hook.events, delivery.event, delivery.action):
            log.info("web.hook_filtered", hook=name, hook_event=delivery.event)
            return JSONResponse({"ignored": "filtered"})
        message = webhooks.render(hook.template, delivery.payload)
    except HookRefused as exc:
        return _refused(name, request, exc.status, exc.reason, exc.message)
    run, duplicate = await start_run(gw, hook, delivery, message)
    if duplicate:
        log.info("web.hook_replayed", hook=name)
        return JSONResponse({"ignored": "replayed", "run": run})
    log.info("web.hook_run", hook=name, hook_event=delivery.event)
    return JSONResponse({"run": run}, status_code=202)


async def start_run(
    gw: Gateway, hook: Hook, delivery: webhooks.Delivery, message: str
) -> tuple[dict[str, Any], bool]:
    """Ask this home's daemon (started first if none runs) for a run of ``hook``'s
    target with ``message``, keyed by the delivery; the run, and whether the daemon
    had one with that key already (then nothing started)."""
    from agenthost.daemon.client import DaemonClient, ensure_daemon

    await asyncio.to_thread(ensure_daemon, gw.home)
    async with DaemonClient(gw.home) as daemon:
        answer = await daemon.run(
            hook.name,
            hook.run_target(),
            message,
            source=SOURCE,
            key=delivery.key,
            detail=delivery.detail(),
        )
    return answer.run.model_dump(mode="json", exclude_none=True), answer.duplicate


async def list_hooks(gw: Gateway, request: Request, _: TokenRecord) -> Response:
    """GET /api/hooks?limit=N: ``{"hooks": [...]}``, each as ``hook list --json``
    shows it, with its ``deliveries`` (the newest N runs, 10 by default)."""
    limit = query_int(request.query_params.get("limit"), "limit", minimum=1) or 10
    hooks: list[dict[str, Any]] = []
    for name in hookfiles.hook_names(gw.home):
        try:
            hook = hookfiles.load_hook(gw.home, name)
        except ConfigError as exc:
            hooks.append({"name": name, "path": f"/hooks/{name}", "error": exc.message})
            continue
        if hook is not None:
            hooks.append(hook.describe())
    runs = await recent_runs(gw.home, [h["name"] for h in hooks], min(limit, 1000))
    for entry in hooks:
        entry["deliveries"] = runs[entry["name"]]
    return JSONResponse({"hooks": hooks})
