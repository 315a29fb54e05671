"""The gateway's HTTP application (Starlette): the API of docs/web.md, its Server-Sent
Events and the static page. :func:`make_app` builds it around a :class:`Gateway`."""

from __future__ import annotations

import mimetypes
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Final

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError, HostNotFound
from agenthost.web import access, automation, handlers, hooks, links, terminal
from agenthost.web.access import COOKIE_NAME, SESSION_SECONDS
from agenthost.web.fanout import shared_stream
from agenthost.web.gateway import (
    Gateway,
    Handler,
    check_origin,
    endpoint,
    read_body,
    still_allowed,
    take_stream,
    verify,
)
from agenthost.web.payloads import (
    AgentKey,
    HttpError,
    fields,
    from_library,
    json_object,
    query_int,
)
from agenthost.web.sse import Watch
from agenthost.web.tokens import TokenRecord

log = structlog.get_logger("agenthost.web")

STATIC: Final = Path(__file__).parent / "static"
# The vendored xterm.js is an ES module (.mjs): a browser runs a module only when it is
# served as JavaScript, whatever the system's mime.types says of the extension.
mimetypes.add_type("text/javascript", ".mjs")
SECURITY_HEADERS: Final = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        b"frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
]
HSTS: Final = (b"strict-transport-security", b"max-age=31536000")
"""Sent when browsers reach the gateway over https only (its own TLS, or a TLS proxy's
``--public-url https://...``): a year of https for this host name. Not
``includeSubDomains``: the gateway speaks for its own host name, not for the other
sites of its domain. Browsers ignore it over plain http (RFC 6797, 8.1)."""
SSE_HEADERS: Final = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


# --- the routes --------------------------------------------------------------------------


async def login(gw: Gateway, request: Request) -> Response:
    """POST /api/login {"token"}: a session cookie for the token."""
    check_origin(gw, request)
    body = fields(json_object(await read_body(request)), {"token": str})
    record = verify(gw, request, body["token"])
    if record is None:
        log.info("web.login_refused", client=_peer(request.scope))
        raise HttpError(401, "unauthorized", "unknown token")
    log.info("web.login", token_name=record.name, client=_peer(request.scope))
    session = access.Session(record.name, record.token_id, int(time.time()))
    response = Response(status_code=204)
    response.set_cookie(
        COOKIE_NAME,
        access.sign_session(gw.secret, session),
        max_age=SESSION_SECONDS,
        path="/",
        secure=gw.secure_cookies,
        httponly=True,
        samesite="strict",
    )
    return response


async def logout(gw: Gateway, request: Request) -> Response:
    """POST /api/logout: the cookie is removed."""
    check_origin(gw, request)
    response = Response(status_code=204)
    response.delete_cookie(
        COOKIE_NAME, path="/", secure=gw.secure_cookies, httponly=True, samesite="strict"
    )
    return response


async def me(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    scopes = access.effective_scopes(record.scopes)
    return JSONResponse({"name": record.name, "scopes": [s for s in access.SCOPES if s in scopes]})


async def list_agents(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    return JSONResponse(await gw.agents.items())


class EventStream(StreamingResponse):
    """An SSE answer that holds a stream's slot (:func:`take_stream`) and gives it
    back when it ends, however it ends (the browser went away, the gateway stops)."""

    def __init__(self, body: AsyncIterator[bytes], give_back: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=SSE_HEADERS)
        self.give_back = give_back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.give_back()


async def overview(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    assert gw.overview is not None
    give_back = take_stream(gw, record)
    watch = Watch(gw.closing, still_allowed(gw, request, "read"))
    return EventStream(gw.overview.stream(watch), give_back)


async def events(gw: Gateway, request: Request, record: TokenRecord) -> Response:
    """GET /api/agents/{key}/events: the stream as SSE (Last-Event-ID > after > tail)."""
    key = gw.agents.key(request.path_params["key"])
    resume = query_int(request.headers.get("last-event-id"), "Last-Event-ID")
    after = query_int(request.query_params.get("after"), "after")
    tail = query_int(request.query_params.get("tail"), "tail")
    give_back = take_stream(gw, record)  # before the host is asked: a refusal costs nothing
    client = None
    shared = gw.fanout.shared(key)
    if shared is None or not shared.position.epoch or shared.ended:
        # nobody follows the agent now: whether it exists is asked of its host
        try:
            client = await connect_agent(gw, key)
        except BaseException:
            give_back()
            raise
    watch = Watch(gw.closing, still_allowed(gw, request, "read"))
    body = shared_stream(
        gw.fanout,
        key,
        watch,
        client=client,
        after=resume if resume is not None else after,
        tail=tail,
    )
    return EventStream(body, give_back)


async def connect_agent(gw: Gateway, key: AgentKey) -> AsyncClient:
    """A client of the agent's host, connected if the host answers; HttpError 404 for
    an agent that does not exist (one that exists waits for its host: it may be
    restarting)."""
    client = gw.agents.client(key)
    try:
        await client.connect()
    except HostNotFound as exc:
        await client.close()
        if not await gw.agents.known(key):
            raise await gw.agents.not_found(key, exc) from None
    except AgentHostError:
        await client.close()
        raise
    return client


def routes(gw: Gateway) -> list[BaseRoute]:
    """Every route of the gateway."""

    def e(needed: access.Scope, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        return endpoint(gw, needed, handler)

    def plain(
        fn: Callable[[Gateway, Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            return await fn(gw, request)

        return run

    agent = "/api/agents/{key}"
    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/l/{token:path}", plain(links.show), methods=["GET"]),
        Route("/l/{token:path}", plain(links.follow), methods=["POST"]),
        Route("/api/login", plain(login), methods=["POST"]),
        # no token: the HMAC of the body with the hook's secret authenticates it
        Route("/hooks/{name}", plain(hooks.deliver), methods=["POST"]),
        Route("/api/hooks", e("read", hooks.list_hooks), methods=["GET"]),
        Route("/api/logout", plain(logout), methods=["POST"]),
        Route("/api/me", e("read", me), methods=["GET"]),
        Route("/api/agents", e("read", list_agents), methods=["GET"]),
        Route("/api/agents", e("admin", handlers.spawn), methods=["POST"]),
        Route("/api/events", e("read", overview), methods=["GET"]),
        Route("/api/automation", e("read", automation.automation), methods=["GET"]),
        Route(agent, e("read", handlers.status), methods=["GET"]),
        Route(agent + "/history", e("read", handlers.history), methods=["GET"]),
        Route(agent + "/pending", e("read", handlers.pending), methods=["GET"]),
        Route(agent + "/events", e("read", events), methods=["GET"]),
        Route(agent + "/send", e("send", handlers.send), methods=["POST"]),
        Route(agent + "/interrupt", e("send", handlers.interrupt), methods=["POST"]),
        Route(agent + "/respond", e("respond", handlers.respond), methods=["POST"]),
        Route(agent + "/stop", e("admin", handlers.stop), methods=["POST"]),
        Route(agent + "/screen", e("read", terminal.screen), methods=["GET"]),
        Route(agent + "/input", e("send", terminal.input_), methods=["POST"]),
        Route(agent + "/resize", e("send", terminal.resize), methods=["POST"]),
        Route(agent + "/signal", e("control", terminal.signal), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
    ]


async def index(request: Request) -> Response:
    page = STATIC / "index.html"
    if not page.is_file():
        raise HttpError(404, "not_found", "the page is not installed")
    return FileResponse(page, headers={"Cache-Control": "no-cache"})


# --- errors and the outer layer ----------------------------------------------------------


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())


async def _starlette_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
    message = "no such route" if exc.status_code == 404 else str(exc.detail)
    return JSONResponse(
        {"error": message, "code": code}, status_code=exc.status_code, headers=exc.headers
    )


async def _library_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentHostError)
    error = from_library(exc)
    return JSONResponse(error.body(), status_code=error.status)


class Guard:
    """The outer ASGI layer: a Host header that does not name this gateway gets 403
    (DNS rebinding), every answer gets the security headers (and HSTS when browsers
    reach it over https only), and one log line per request (the path only: never a
    query string, a header or a body)."""

    def __init__(self, app: ASGIApp, gw: Gateway) -> None:
        self.app = app
        self.gw = gw
        self.headers = SECURITY_HEADERS + ([HSTS] if gw.secure_cookies else [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
                break

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {name.lower() for name, _ in headers}
                # a route may set its own (the link pages' Referrer-Policy)
                headers += [(n, v) for n, v in self.headers if n not in have]
                message["headers"] = headers
                # as the answer starts: a stream's line comes when it opens
                log.info(
                    "web.request",
                    method=scope["method"],
                    path=access.redact(scope["path"]),
                    status=message["status"],
                    client=_peer(scope),
                )
            await send(message)

        if not access.host_allowed(host, self.gw.allowed_hosts):
            response = JSONResponse(
                {"error": "this gateway does not serve that host name", "code": "bad_host"},
                status_code=403,
            )
            await response(scope, receive, send_with_headers)
        else:
            await self.app(scope, receive, send_with_headers)


def _peer(scope: Scope) -> str | None:
    """The client's address, for the log."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


def make_app(gw: Gateway) -> ASGIApp:
    """The ASGI application of a gateway."""
    app = Starlette(
        routes=routes(gw),
        exception_handlers={
            HttpError: _http_error,
            HTTPException: _starlette_error,
            AgentHostError: _library_error,
        },
    )
    app.router.redirect_slashes = False  # a redirect would echo a path as the client wrote it
    app.state.gateway = gw
    return Guard(app, gw)


__all__ = ["make_app"]
