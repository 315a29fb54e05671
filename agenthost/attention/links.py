"""Signed approval links: ``<public_url>/l/<token>``. Sans-IO.

A token binds one decision (``allow`` or ``deny``) on one permission request (the
agent, the request id and the request's ``created_at``, so a request id reused later
does not match) to an expiry time and a random nonce. It is
``base64url(json) "." base64url(HMAC-SHA256(key, "agenthost-link-1." + json part))``.

What this module checks: the shape, the signature (in constant time) and the expiry.
Single use is the gateway's (it records each nonce it honours), and whether the
request is still pending is the host's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Final, Literal

from agenthost.errors import LinkRefused

VERSION: Final = 1
MAX_TOKEN: Final = 2048
"""Longer tokens are refused before any decoding."""
LINK_PATH: Final = "/l/"
_DOMAIN: Final = b"agenthost-link-1."
_B64URL: Final = re.compile(r"[A-Za-z0-9_-]+")

Decision = Literal["allow", "deny"]


@dataclass(frozen=True, slots=True)
class Link:
    """One signed decision on one permission request."""

    agent_id: str
    request_id: str
    created_at: str
    """The request's ``created_at`` as the host reported it."""
    decision: Decision
    expires: int
    """Unix time after which the link is refused."""
    nonce: str
    """Random, names this link (single use)."""


def new_link(
    agent_id: str, request_id: str, created_at: str, decision: Decision, *, now: float, ttl: float
) -> Link:
    """A fresh link for ``decision`` on the request, valid ``ttl`` seconds from ``now``."""
    return Link(agent_id, request_id, created_at, decision, int(now + ttl), secrets.token_hex(12))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> bytes:
    return hmac.new(key, _DOMAIN + body.encode("ascii"), hashlib.sha256).digest()


def sign(link: Link, key: bytes) -> str:
    """The token of ``link`` under ``key``."""
    fields = {
        "v": VERSION,
        "a": link.agent_id,
        "r": link.request_id,
        "c": link.created_at,
        "d": link.decision,
        "e": link.expires,
        "n": link.nonce,
    }
    body = _b64(json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode())
    return f"{body}.{_b64(_mac(key, body))}"


def url(base: str, token: str) -> str:
    """The address of a token under the gateway's public ``base`` URL."""
    return base.rstrip("/") + LINK_PATH + token


def verify(token: str, key: bytes, *, now: float) -> Link:
    """The link ``token`` carries, or LinkRefused (``malformed``, ``forged``,
    ``expired``). The signature is checked before anything in the token is trusted."""
    if not token or len(token) > MAX_TOKEN or token.count(".") != 1:
        raise LinkRefused("this is not an approval link", why="malformed")
    body, mac = token.split(".")
    if not _B64URL.fullmatch(body) or not _B64URL.fullmatch(mac):
        # one spelling per token: padding and stray characters are not skipped over
        raise LinkRefused("this is not an approval link", why="malformed")
    try:
        given = _unb64(mac)
        body.encode("ascii")
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise LinkRefused("this is not an approval link", why="malformed") from None
    if _b64(given) != mac:
        # base64 leaves the low bits of a last character unused, and the decoder skips
        # them: only the canonical spelling of a signature is one
        raise LinkRefused("this is not an approval link", why="malformed")
    if not hmac.compare_digest(given, _mac(key, body)):
        raise LinkRefused(
            "this link's signature is not valid: it was altered, or made with another key",
            why="forged",
        )
    try:
        fields: Any = json.loads(_unb64(body))
        link = Link(
            _text(fields["a"]),
            _text(fields["r"]),
            _text(fields["c"]),
            _decision(fields["d"]),
            _int(fields["e"]),
            _text(fields["n"]),
        )
        if fields["v"] != VERSION:
            raise ValueError("version")
    except (ValueError, KeyError, TypeError, binascii.Error):
        # signed by us yet unreadable: a link of another version
        raise LinkRefused("this approval link is of an unknown kind", why="malformed") from None
    if now > link.expires:
        raise LinkRefused("this approval link has expired", why="expired")
    return link


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 500:
        raise ValueError("text")
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise ValueError("int")
    return value


def _decision(value: Any) -> Decision:
    if value == "allow":
        return "allow"
    if value == "deny":
        return "deny"
    raise ValueError("decision")
