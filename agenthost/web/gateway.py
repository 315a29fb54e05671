"""A gateway's state and the checks every request goes through: who is asking
(:func:`authenticate`), whether they may (:func:`authorize`), from where
(:func:`check_origin`), and how much they send (:func:`read_body`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from agenthost.errors import ConfigError
from agenthost.web import access
from agenthost.web.access import COOKIE_NAME
from agenthost.web.agents import Agents
from agenthost.web.fanout import Hub
from agenthost.web.limits import RETRY_SECONDS, StreamSlots, caps_for
from agenthost.web.linkledger import LinkLedger, ledger_path
from agenthost.web.payloads import MAX_BODY, HttpError
from agenthost.web.sse import Overview
from agenthost.web.tokens import TokenRecord, TokenStore

log = structlog.get_logger("agenthost.web")


@dataclass
class Gateway:
    """What the application serves and with which keys."""

    agents: Agents
    store: TokenStore
    secret: bytes
    tls: bool = False
    allowed_hosts: frozenset[str] = frozenset()
    """Host names accepted besides IP addresses and localhost (see access.host_allowed)."""
    public_origin: access.Origin | None = None
    """The origin browsers see when a proxy is in front (``--public-url``): accepted as
    the gateway's own; cookies are Secure when it is https."""
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the gateway shuts down: open streams end."""
    overview: Overview | None = None
    failures: access.FailureLimit = field(default_factory=access.FailureLimit)
    """Unknown tokens and bad links per client address (a guesser is refused for a
    while)."""
    link_key: bytes | None = None
    """The key approval links are checked with (None: every link is refused)."""
    streams: StreamSlots = field(default_factory=lambda: StreamSlots(caps_for(1024)))
    """The event streams open, under their caps (``serve`` sizes them to the process's
    descriptor limit)."""

    fanout: Hub = field(init=False)
    """The follows of the agents' hosts, one per agent shared by its event streams."""

    def __post_init__(self) -> None:
        if self.overview is None:
            self.overview = Overview(self.agents.items)
        self.fanout = Hub(self.agents.client, self.agents.backoff, lambda: self.closing.is_set())

    @property
    def home(self) -> Path:
        return self.agents.home

    def link_ledger(self) -> LinkLedger:
        """The record of the approval links honoured (``<home>/web/links.db``)."""
        return LinkLedger(ledger_path(self.home))

    @property
    def secure_cookies(self) -> bool:
        """Whether browsers reach the gateway over https only (its own TLS, or a proxy's)."""
        return self.tls or (self.public_origin is not None and self.public_origin[0] == "https")


# --- authentication ----------------------------------------------------------------------


@contextlib.contextmanager
def store_errors() -> Iterator[None]:
    """A token store that cannot be trusted: HttpError 500 (nobody gets in), logged."""
    try:
        yield
    except ConfigError as exc:
        log.error("web.token_store_unusable", error=exc.message, hint=exc.hint)
        raise HttpError(
            500, "token_store", "the gateway's token store is unusable: see its log"
        ) from None


def verify(gw: Gateway, request: Request, token: str) -> TokenRecord | None:
    """The record of ``token``, or None (counted as a failure of the request's client:
    see :class:`~agenthost.web.access.FailureLimit`); HttpError 429 for a client with
    too many failures, 500 for a store that cannot be trusted."""
    who = request.client.host if request.client else None
    now = time.monotonic()
    if gw.failures.blocked(who, now):
        raise HttpError(429, "too_many_failures", "too many unknown tokens: wait a minute")
    with store_errors():
        record = gw.store.verify(token)
    if record is None:
        gw.failures.failed(who, now)
    return record


def authenticate(gw: Gateway, request: Request) -> TokenRecord | None:
    """The token behind a request (a Bearer token, else the session cookie), or None."""
    token = access.bearer_token(request.headers.get("authorization"))
    if token is not None:
        return verify(gw, request, token)
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie:
        session = access.read_session(gw.secret, cookie, time.time())
        if session is not None:
            with store_errors():
                return gw.store.session_record(session.name, session.token_id)
    return None


def authorize(gw: Gateway, request: Request, needed: access.Scope) -> TokenRecord:
    """The token of a request allowed to do what needs ``needed``; HttpError 401/403."""
    record = authenticate(gw, request)
    if record is None:
        raise HttpError(401, "unauthorized", "log in, or send Authorization: Bearer TOKEN")
    if not access.allows(record.scopes, needed):
        raise HttpError(
            403, "forbidden", f"the token {record.name!r} does not have the {needed} scope"
        )
    return record


def still_allowed(gw: Gateway, request: Request, needed: access.Scope) -> Callable[[], bool]:
    """Whether the credentials of ``request`` still allow what needs ``needed`` (asked
    by its open stream: a token revoked meanwhile ends it)."""

    def allowed() -> bool:
        try:
            record = authenticate(gw, request)
        except HttpError:
            return False
        return record is not None and access.allows(record.scopes, needed)

    return allowed


def check_origin(gw: Gateway, request: Request) -> None:
    """HttpError 403 for a state-changing request from another origin."""
    host = request.headers.get("host", "")
    scheme = "https" if gw.tls else "http"
    also = () if gw.public_origin is None else (gw.public_origin,)
    if not access.origin_allowed(request.headers.get("origin"), host, scheme, also):
        raise HttpError(403, "bad_origin", "requests from another origin are refused")


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body, at most ``limit`` bytes (HttpError 413 beyond, before any
    is read when its Content-Length says so; 400 when the connection ended first: the
    client left, or was too slow)."""
    length = request.headers.get("content-length")
    if length is not None and not (length.isascii() and length.isdigit() and int(length) <= limit):
        raise HttpError(413, "too_large", f"the body is over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(413, "too_large", f"the body is over {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        # nobody reads the answer: it is for the log's line, not a traceback
        raise HttpError(400, "bad_request", "the connection ended within the body") from None
    return b"".join(chunks)


def take_stream(gw: Gateway, record: TokenRecord) -> Callable[[], None]:
    """A slot for an event stream of ``record``'s token, and the function that gives
    it back (once, however often called); HttpError 429 when the token has its share
    of streams open, 503 when the gateway has as many as it serves (both with
    Retry-After)."""
    refusal = gw.streams.take(record.token_id)
    if refusal == "token":
        raise HttpError(
            429,
            "too_many_streams",
            f"the token {record.name!r} has {gw.streams.caps.streams_per_token} event "
            "streams open: close one first",
            retry_after=RETRY_SECONDS,
        )
    if refusal == "all":
        raise HttpError(
            503,
            "overloaded",
            "the gateway has as many event streams open as it serves: try again shortly",
            retry_after=RETRY_SECONDS,
        )
    held = [True]

    def give_back() -> None:
        if held:
            held.clear()
            gw.streams.give_back(record.token_id)

    return give_back


Handler = Callable[[Gateway, Request, TokenRecord], Awaitable[Response]]


def endpoint(
    gw: Gateway, needed: access.Scope, handler: Handler
) -> Callable[[Request], Awaitable[Response]]:
    """A route's function: Origin check (POST), authorization, then ``handler``."""

    async def run(request: Request) -> Response:
        if request.method == "POST":
            check_origin(gw, request)
        record = authorize(gw, request, needed)
        return await handler(gw, request, record)

    return run
