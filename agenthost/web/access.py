"""Who may do what through the web gateway: scopes, token hashes, signed session
cookies, and the Host and Origin checks. Sans-IO: the decisions only;
:mod:`agenthost.web.tokens` keeps the token store on disk and
:mod:`agenthost.web.app` applies these to requests.

Every route needs a token (Bearer or session cookie) of the scope it names but these:
the page and its static files (nothing of an agent in them), ``/api/login`` (it takes
the token), the approval links ``/l/TOKEN`` (the signed link is the credential), and
``POST /hooks/NAME``, a webhook delivery, which no token could come with (GitHub sends
what it was told when the webhook was made): the HMAC-SHA256 of its body with the
hook's secret is its authentication (:mod:`agenthost.automation.webhooks`), checked
before anything of the body is used. Without the secret a sender is refused, whatever
it sends; nothing can be read through that route either.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from agenthost.attention.links import LINK_PATH

Scope: TypeAlias = Literal["read", "send", "respond", "control", "admin"]
SCOPES: Final[tuple[Scope, ...]] = ("read", "send", "respond", "control", "admin")
"""Every scope includes ``read``; ``admin`` includes them all. ``control`` sends signals
to a terminal agent's foreground processes (``SIGKILL`` among them: more than the
``send`` of keys and messages, less than ``admin``'s stop and spawn)."""

TOKEN_PREFIX: Final = "aht_"
"""Tokens start with it, so secret scanners and people can tell one when they see it."""
TOKEN_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
COOKIE_NAME: Final = "agenthost_session"
SESSION_SECONDS: Final = 30 * 24 * 3600
"""How long a session cookie is honoured after login (its token may die sooner)."""
LOCAL_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


_TOKEN_RE: Final = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]*")
_LINK_RE: Final = re.compile(r"[A-Za-z0-9_=-]{16,}\.[A-Za-z0-9_=-]{16,}")
"""Shaped like a link's token (base64url "." base64url), wherever it is pasted."""


def redact(text: str) -> str:
    """``text`` with anything shaped like a token cut to its prefix (for a logged path:
    someone may paste a token where an agent id goes), and an approval link's path cut
    to ``/l/...`` (a link is a credential until it expires)."""
    head, sep, _ = text.partition(LINK_PATH)
    if sep:  # anywhere: "//l/TOKEN" is not a link's route, yet carries one
        text = head + LINK_PATH + "..."
    text = _LINK_RE.sub("...", text)
    return _TOKEN_RE.sub(TOKEN_PREFIX + "...", text)


def check_token_name(name: str) -> str:
    """Return ``name`` if it is a valid token name, else raise ValueError."""
    if not isinstance(name, str) or not TOKEN_NAME_RE.fullmatch(name):
        raise ValueError(f"invalid token name {name!r}: use 1-64 letters, digits, '_' and '-'")
    return name


def new_token() -> str:
    """A new secret token: 32 random bytes, URL-safe base64, with :data:`TOKEN_PREFIX`."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256, hex (tokens are random, so no salt or
    slow hash is needed: nothing to guess from the hash)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def effective_scopes(scopes: Iterable[str]) -> frozenset[Scope]:
    """The scopes a token has, given the ones it was granted (read is implied; admin
    implies all)."""
    granted = {s for s in SCOPES if s in set(scopes)}
    if "admin" in granted:
        return frozenset(SCOPES)
    return frozenset({"read", *granted})


def allows(scopes: Collection[str], needed: Scope) -> bool:
    """Whether a token with ``scopes`` (as granted) may do what needs ``needed``."""
    return needed in effective_scopes(scopes)


@dataclass(frozen=True, slots=True)
class Session:
    """What a valid session cookie says: the token's name, the token's id (a non-secret
    identifier that changes when a token of that name is replaced), and when it was
    issued (Unix seconds)."""

    name: str
    token_id: str
    issued: int


def sign_session(secret: bytes, session: Session) -> str:
    """The cookie value for ``session``: its fields and an HMAC-SHA256 of them."""
    body = f"v1.{session.name}.{session.token_id}.{session.issued}"
    return f"{body}.{_mac(secret, body)}"


def read_session(secret: bytes, value: str, now: float) -> Session | None:
    """The session of a cookie value, or None if it is not one we signed, or expired."""
    body, _, mac = value.rpartition(".")
    if not body or not hmac.compare_digest(mac.encode(), _mac(secret, body).encode()):
        return None
    parts = body.split(".")
    if len(parts) != 4 or parts[0] != "v1" or not (parts[3].isascii() and parts[3].isdigit()):
        return None
    issued = int(parts[3])
    if not 0 <= now - issued <= SESSION_SECONDS:
        return None
    return Session(parts[1], parts[2], issued)


def _mac(secret: bytes, body: str) -> str:
    digest = hmac.new(secret, body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None."""
    if not authorization:
        return None
    kind, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if kind.lower() == "bearer" and token else None


def split_host(host: str) -> tuple[str, int | None] | None:
    """A ``Host`` header's name and port (None when absent); None if malformed."""
    host = host.strip().lower()
    if not host:
        return None
    if host.startswith("["):
        name, sep, rest = host[1:].partition("]")
        if not sep:
            return None
        port = rest[1:] if rest.startswith(":") else None
        if rest and port is None:
            return None
    else:
        name, sep, port = host.partition(":")
        if not sep:
            port = None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    if not name:
        return None
    return name.rstrip("."), None if port is None else int(port)


def host_allowed(host: str | None, allowed: Collection[str]) -> bool:
    """Whether a request's ``Host`` header names this gateway (against DNS rebinding:
    a page of another site whose name was pointed at this address sends its own name).

    Accepted: an IP address (a browser that sends one was pointed at it by the user),
    the local names (localhost), and the names in ``allowed`` (the listen address and
    those the user added), case-insensitively.
    """
    if host is None:
        return False
    parts = split_host(host)
    if parts is None:
        return False
    name = parts[0]
    if _is_ip(name) or name in LOCAL_NAMES:
        return True
    return name in {a.lower().rstrip(".") for a in allowed}


Origin: TypeAlias = tuple[str, str, int]
"""An origin as compared: scheme, host name, port."""


def parse_origin(text: str) -> Origin | None:
    """``scheme://host[:port]`` (an ``Origin`` header, or a public URL without a path
    beyond ``/``) as an :data:`Origin`; None if it is not one."""
    scheme, sep, rest = text.strip().lower().partition("://")
    rest = rest.removesuffix("/")
    if not sep or scheme not in ("http", "https") or "/" in rest or "@" in rest:
        return None
    parts = split_host(rest)
    if parts is None:
        return None
    return scheme, parts[0], parts[1] or (443 if scheme == "https" else 80)


def origin_allowed(
    origin: str | None, host: str, scheme: str, also: Collection[Origin] = ()
) -> bool:
    """Whether a request with this ``Origin`` header may change state: no header (not
    a browser's cross-site request), exactly this gateway's own origin
    (``scheme://host`` as the request addressed it), or one of ``also`` (the public
    origin of a proxy in front). ``null`` never is."""
    if origin is None:
        return True
    theirs = parse_origin(origin)
    if theirs is None:
        return False
    mine = split_host(host)
    if mine is not None:
        port = mine[1] or (443 if scheme == "https" else 80)
        if theirs == (scheme, mine[0], port):
            return True
    return theirs in also


def is_loopback(host: str) -> bool:
    """Whether a listen address is a loopback one (127.0.0.0/8, ::1, localhost)."""
    name = host.strip("[]").lower()
    if name in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class FailureLimit:
    """Failed authentications (an unknown token, at login or as Bearer) per client
    address: past ``limit`` in ``window`` seconds, that address is refused until the
    oldest of them is ``window`` old. Loopback addresses are never limited (the
    machine's own users share them; locally, the threat is not a guesser). At most
    ``clients`` addresses are remembered (the oldest are forgotten first)."""

    def __init__(self, limit: int = 20, window: float = 60.0, clients: int = 10_000) -> None:
        self.limit = limit
        self.window = window
        self.clients = clients
        self._failures: dict[str, deque[float]] = {}

    def blocked(self, who: str | None, now: float) -> bool:
        """Whether ``who`` is refused now."""
        times = self._failures.get(who or "")
        if times is None:
            return False
        while times and now - times[0] >= self.window:
            times.popleft()
        if not times:
            del self._failures[who or ""]
            return False
        return len(times) >= self.limit

    def failed(self, who: str | None, now: float) -> None:
        """Count a failure of ``who``."""
        if who is None or is_loopback(who):
            return
        times = self._failures.pop(who, None) or deque(maxlen=self.limit)
        times.append(now)
        self._failures[who] = times  # the most recent last: the oldest go first
        while len(self._failures) > self.clients:
            del self._failures[next(iter(self._failures))]
