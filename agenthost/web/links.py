"""Approval links followed: ``GET /l/<token>`` shows what the link would decide and
one button; ``POST /l/<token>`` decides. No token or cookie: the signed link is the
authority (:mod:`agenthost.attention.links`).

A POST checks, in order: the client's bad-link count, the signature and expiry, single
use (:class:`~agenthost.web.linkledger.LinkLedger`), that the request is still pending
with the link's ``created_at``, then answers it with ``actor="link"``. Each refusal is
a :class:`~agenthost.errors.LinkRefused` whose ``why`` is the answer's ``code``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from agenthost.attention import links
from agenthost.attention.links import Link
from agenthost.client import AsyncClient
from agenthost.errors import (
    ConfigError,
    HostNotFound,
    InvalidAgentId,
    LinkRefused,
    NotConnected,
    UnknownRequest,
)
from agenthost.models import PermissionRequest
from agenthost.paths import validate_agent_id
from agenthost.web.gateway import Gateway, check_origin
from agenthost.web.linkpage import Asked, confirm_page, done_page, refused_page
from agenthost.web.payloads import AgentKey, HttpError

log = structlog.get_logger("agenthost.web")

STATUS: Final = {
    "malformed": 403,
    "forged": 403,
    "expired": 410,
    "used": 409,
    "answered": 409,
    "gone": 404,
}
HISTORY_LIMIT: Final = 2000
"""How far back the history is searched for who answered a request first."""
HEADERS: Final = {
    "Cache-Control": "no-store",
    # a form POSTed from a no-referrer page carries "Origin: null", which is refused
    # like any foreign origin; same-origin still sends nothing to other sites
    "Referrer-Policy": "same-origin",
}


@contextlib.contextmanager
def ledger_errors() -> Iterator[None]:
    """A ledger that cannot be used: HttpError 500 (no link is honoured), logged."""
    try:
        yield
    except ConfigError as exc:
        log.error("web.link_ledger_unusable", error=exc.message)
        raise HttpError(
            500, "link_ledger", "the gateway's record of used links is unusable: see its log"
        ) from None


class _Refusal(Exception):
    """A LinkRefused with what the page may still show about the request."""

    def __init__(self, refused: LinkRefused, asked: Asked | None = None, **extra: Any) -> None:
        super().__init__(refused.message)
        self.refused = refused
        self.asked = asked
        self.extra = extra


def _wants_html(request: Request, *, default: bool) -> bool:
    accept = request.headers.get("accept", "")
    if "text/html" in accept:
        return True
    if "json" in accept:
        return False
    return default


def _client_of(request: Request) -> str | None:
    return request.client.host if request.client else None


def _check(gw: Gateway, request: Request) -> Link:
    """The link of the URL, or _Refusal; bad ones count toward the client's limit."""
    who = _client_of(request)
    now = time.monotonic()
    if gw.failures.blocked(who, now):
        raise HttpError(429, "too_many_failures", "too many unknown tokens or links: wait a minute")
    token = request.path_params["token"]
    if gw.link_key is None:
        raise _Refusal(LinkRefused("this gateway honours no approval links", why="forged"))
    try:
        return links.verify(token, gw.link_key, now=time.time())
    except LinkRefused as exc:
        if exc.why in ("malformed", "forged"):
            gw.failures.failed(who, now)
        raise _Refusal(exc) from None


def _asked(link: Link, request: PermissionRequest | None) -> Asked:
    return Asked(
        link.agent_id,
        link.request_id,
        request.tool_name if request else "",
        request.approval_text() if request else "",  # the command whole, not its summary
        link.decision,
        link.expires,
    )


def _gone(message: str) -> LinkRefused:
    return LinkRefused(message, why="gone")


async def _answered(client: AsyncClient, link: Link, asked: Asked) -> _Refusal:
    """Why a request that is no longer pending is so: who answered it first, and how
    (its ``permission`` history entry), else gone."""
    history = await client.history(HISTORY_LIMIT)
    asked_at = _parse(link.created_at)
    # the first decision on this id since the request was asked is this request's: a
    # restarted agent may ask again under the same id, and that answer is not ours
    for entry in history.entries:
        decision: Any = getattr(entry, "decision", None)
        if entry.role != "permission" or not isinstance(decision, dict):
            continue
        if decision.get("request_id") != link.request_id:
            continue
        if entry.timestamp < asked_at:
            continue  # a request of the same id before this one's: not ours
        behavior = str(decision.get("behavior", ""))
        actor = str(decision.get("actor", "someone"))
        asked = dataclasses.replace(asked, tool_name=entry.tool_name or asked.tool_name)
        extra = {"behavior": behavior, "actor": actor}
        if behavior == "cancelled":
            return _Refusal(_gone(f"the request was withdrawn ({entry.content})"), asked, **extra)
        word = {"allow": "allowed", "deny": "denied"}.get(behavior, behavior)
        return _Refusal(
            LinkRefused(f"the request was answered first: {word} by {actor}", why="answered"),
            asked,
            **extra,
        )
    return _Refusal(_gone("the request is no longer pending (its agent restarted?)"), asked)


def _parse(text: str) -> datetime:
    """A link's ``created_at`` (the host's RFC 3339 text) as a time; the dawn of time
    for text that is not one (it then matches no request)."""
    try:
        given = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return given if given.tzinfo else given.replace(tzinfo=UTC)


async def _pending(client: AsyncClient, link: Link) -> PermissionRequest:
    """The request the link answers, still pending; _Refusal answered/gone."""
    for request in await client.pending():
        if request.request_id == link.request_id:
            if request.created_at == _parse(link.created_at):
                return request
            break  # the same id, asked again later: this link is not for it
    raise await _answered(client, link, _asked(link, None))


def _client(gw: Gateway, link: Link) -> AsyncClient:
    try:
        validate_agent_id(link.agent_id)
    except InvalidAgentId:
        raise _Refusal(_gone(f"there is no agent {link.agent_id!r}")) from None
    return gw.agents.client(AgentKey(link.agent_id, None))


async def _with_host(gw: Gateway, link: Link, call: Any) -> Any:
    """Run ``call(client)`` on the link's agent; _Refusal gone when its host does not
    answer (no such agent, or it stopped)."""
    client = _client(gw, link)
    try:
        async with client:
            return await call(client)
    except (HostNotFound, NotConnected):
        raise _Refusal(_gone(f"the agent {link.agent_id!r} is not running")) from None


def _refusal_response(request: Request, exc: _Refusal, *, html: bool) -> Response:
    why = exc.refused.why
    status = STATUS.get(why, 403)
    log.info("web.link_refused", why=why, agent=exc.asked.agent_id if exc.asked else None)
    if html:
        page = refused_page(why, exc.refused.message, exc.asked)
        return HTMLResponse(page, status_code=status, headers=HEADERS)
    body: dict[str, Any] = {"error": exc.refused.message, "code": why, **exc.extra}
    if exc.asked is not None:
        body |= {"agent_id": exc.asked.agent_id, "request_id": exc.asked.request_id}
    return JSONResponse(body, status_code=status, headers=HEADERS)


async def show(gw: Gateway, request: Request) -> Response:
    """GET /l/<token>: the request and the link's decision, and a button that POSTs;
    decides nothing (prefetchers and link previews follow GETs)."""
    html = _wants_html(request, default=True)
    try:
        link = _check(gw, request)
        ledger = gw.link_ledger()
        with ledger_errors():
            used = await asyncio.to_thread(ledger.used, link.nonce)
        if used:
            raise _Refusal(
                LinkRefused("this link was used already", why="used"), _asked(link, None)
            )
        pending = await _with_host(gw, link, lambda c: _pending(c, link))
    except _Refusal as exc:
        return _refusal_response(request, exc, html=html)
    asked = _asked(link, pending)
    if html:
        return HTMLResponse(confirm_page(asked, time.time()), headers=HEADERS)
    return JSONResponse({"ok": True, **_fields(asked), "pending": True}, headers=HEADERS)


def _fields(asked: Asked) -> dict[str, Any]:
    return {
        "agent_id": asked.agent_id,
        "request_id": asked.request_id,
        "decision": asked.decision,
        "tool_name": asked.tool_name,
        "tool_input": asked.tool_input,
        "expires": asked.expires,
    }


async def follow(gw: Gateway, request: Request) -> Response:
    """POST /l/<token>: decide, once. JSON unless the client asks for HTML."""
    check_origin(gw, request)
    html = _wants_html(request, default=False)
    try:
        link = _check(gw, request)
        ledger = gw.link_ledger()
        with ledger_errors():
            claimed = await asyncio.to_thread(ledger.claim, link.nonce, link.expires)
        if not claimed:
            raise _Refusal(
                LinkRefused("this link was used already", why="used"), _asked(link, None)
            )
        try:
            asked = await _with_host(gw, link, lambda c: _decide(c, link))
        except BaseException:
            # it decided nothing: following it again says why again
            with ledger_errors():
                await asyncio.to_thread(ledger.release, link.nonce)
            raise
    except _Refusal as exc:
        return _refusal_response(request, exc, html=html)
    log.info(
        "web.link_followed", agent=link.agent_id, request_id=link.request_id, decision=link.decision
    )
    if html:
        return HTMLResponse(done_page(asked), headers=HEADERS)
    return JSONResponse({"ok": True, **_fields(asked)}, headers=HEADERS)


async def _decide(client: AsyncClient, link: Link) -> Asked:
    pending = await _pending(client, link)
    try:
        await client.respond(link.request_id, link.decision, actor="link")
    except UnknownRequest:
        # answered (or withdrawn) between the two requests
        raise await _answered(client, link, _asked(link, pending)) from None
    return _asked(link, pending)


__all__ = ["follow", "show"]
