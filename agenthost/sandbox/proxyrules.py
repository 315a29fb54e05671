"""What the sandbox's proxy does with a request it read: tunnel it, forward it, or refuse
it, and the bytes of its own answers. Sans-IO (h11 events in, decisions out); the
sockets are in :mod:`agenthost.sandbox.proxy`.

The decision is made on the request's TARGET only: ``CONNECT host:port``, or an
absolute ``http://host[:port]/path`` for plain HTTP. The ``Host`` header is never
trusted for it; on plain HTTP a ``Host`` that names another host or port than the
target is refused (400), since the upstream would read it. (A ``CONNECT``'s ``Host``
is not sent anywhere and is ignored.) The host is the canonical one of
:mod:`~agenthost.sandbox.allowlist`, and the connection is made to that same string,
so what is checked is what is resolved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import h11

from agenthost.sandbox.allowlist import AllowList, canonical_host, split_authority

CONFIG_KEY: Final = "sandbox.allow_hosts"
"""The configuration key a refusal tells the user to add the host to."""

HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"expect",
        b"host",
    }
)
"""Headers that describe one hop (or that the proxy sets itself: ``Host`` from the
target, ``Expect`` answered here); never passed on."""


@dataclass(frozen=True)
class Tunnel:
    """``CONNECT`` to an allowed host: connect, answer 200, splice the bytes."""

    host: str
    port: int


@dataclass(frozen=True)
class Forward:
    """A plain HTTP request to an allowed host: send ``request`` (origin-form, one hop's
    headers removed, ``Connection: close``) upstream and stream its response back."""

    host: str
    port: int
    request: h11.Request
    expects_continue: bool
    """The client waits for ``100 Continue`` before it sends its body."""


@dataclass(frozen=True)
class Refuse:
    """An answer of the proxy itself (then the connection is closed). ``host`` is set
    when the request named one (the refusal is then logged with it)."""

    status: int
    reason: str
    host: str | None = None
    port: int = 0

    def response(self) -> bytes:
        """The whole response: status line, headers, a one-line text body."""
        return error_response(self.status, self.body())

    def body(self) -> str:
        """The text of the answer: what was refused and how to allow it."""
        if self.status != 403 or self.host is None:
            return f"agenthost sandbox proxy: {self.reason}\n"
        return (
            f"agenthost sandbox proxy: {_authority(self.host, self.port)} is {self.reason}. "
            f"To allow it, add {entry_for(self.host, self.port)!r} to {CONFIG_KEY} "
            "in the agenthost configuration.\n"
        )


Decision = Tunnel | Forward | Refuse

_REASONS: Final = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
NOT_ALLOWED: Final = "not on the sandbox's allow list"


def error_response(status: int, text: str) -> bytes:
    """A complete ``Connection: close`` response with a short text body."""
    body = text.encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def entry_for(host: str, port: int) -> str:
    """The allow-list entry that would allow ``host`` on ``port``."""
    if port in (80, 443):
        return f"[{host}]" if ":" in host else host
    return _authority(host, port)


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def shown(text: bytes, limit: int = 200) -> str:
    """Request bytes as text for a log or a message: printable ASCII (h11 admits no
    other bytes in a target), cut at ``limit`` characters."""
    value = text.decode("ascii", "backslashreplace")
    return value if len(value) <= limit else value[: limit - 3] + "..."


def decide(request: h11.Request, allow: AllowList) -> Decision:
    """What to do with ``request``, a request head h11 accepted."""
    if request.method == b"CONNECT":
        return _connect(request, allow)
    return _forward(request, allow)


def _check(host_text: str, port: int, allow: AllowList) -> str | Refuse:
    host = canonical_host(host_text)
    if host is None:
        return Refuse(
            400, f"{host_text[:200]!r} is not a host name or an IP address", host_text[:200], port
        )
    if not allow.allows(host, port):
        return Refuse(403, NOT_ALLOWED, host, port)
    return host


def _connect(request: h11.Request, allow: AllowList) -> Decision:
    target = shown(request.target)
    split = split_authority(target)
    if split is None:
        return Refuse(400, f"CONNECT needs host:port, not {target!r}")
    host_text, port = split
    if "@" in host_text:
        return Refuse(400, "a user name has no place in a CONNECT target", host_text, port)
    host = _check(host_text, port, allow)
    return host if isinstance(host, Refuse) else Tunnel(host, port)


def _forward(request: h11.Request, allow: AllowList) -> Decision:
    target = shown(request.target)
    scheme, sep, rest = target.partition("://")
    if not sep or "/" in scheme:
        return Refuse(400, "this is a proxy: send absolute-form requests (http://host/path)")
    if scheme.lower() != "http":
        return Refuse(400, f"only http:// is forwarded (use CONNECT for {scheme[:20]!r})")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "@" in authority:
        return Refuse(400, "a user name (user@host) is not forwarded", authority, 80)
    if "\\" in authority or "#" in target:
        return Refuse(400, f"{target[:200]!r} is not a URL this proxy forwards")
    split = split_authority(authority, 80)
    if split is None:
        return Refuse(400, f"{authority[:200]!r} is not host[:port]")
    host_text, port = split
    host = _check(host_text, port, allow)
    if isinstance(host, Refuse):
        return host
    if not path.startswith("/"):
        path = "/" + path
    stated = _host_header(request)
    if stated is not None and stated != (host, port):
        return Refuse(400, "the Host header names another host than the request's URL")
    return Forward(
        host,
        port,
        h11.Request(
            method=request.method,
            target=path.encode("ascii"),
            headers=_upstream_headers(request.headers, host, port),
            http_version="1.1",
        ),
        expects_continue=_has_token(request.headers, b"expect", b"100-continue"),
    )


def _host_header(request: h11.Request) -> tuple[str | None, int] | None:
    """The Host header's canonical host and port (None in the host: not a valid one);
    None when there is none (HTTP/1.0: h11 requires one of 1.1)."""
    for name, value in request.headers:
        if name == b"host":
            split = split_authority(shown(value), 80)
            if split is None:
                return (None, 0)
            return canonical_host(split[0]), split[1]
    return None


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    tokens: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
    return tokens


def _has_token(headers: Iterable[tuple[bytes, bytes]], header: bytes, token: bytes) -> bool:
    return any(
        name == header and token in (t.strip().lower() for t in value.split(b","))
        for name, value in headers
    )


def _end_to_end(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` without one hop's: the hop-by-hop ones and those ``Connection``
    names. A chunked message keeps its framing (h11 chunks again) and loses any
    ``Content-Length`` beside it, so the next hop cannot read another length."""
    headers = list(headers)
    drop = HOP_BY_HOP | _connection_tokens(headers)
    chunked = _has_token(headers, b"transfer-encoding", b"chunked")
    kept = [
        (name, value)
        for name, value in headers
        if name not in drop and not (chunked and name == b"content-length")
    ]
    if chunked:
        kept.append((b"transfer-encoding", b"chunked"))
    return kept


def _upstream_headers(
    headers: Iterable[tuple[bytes, bytes]], host: str, port: int
) -> list[tuple[bytes, bytes]]:
    if port != 80:
        authority = _authority(host, port)
    else:
        authority = f"[{host}]" if ":" in host else host
    return [
        (b"host", authority.encode("ascii")),
        *_end_to_end(headers),
        (b"connection", b"close"),
    ]


def downstream_response(response: h11.Response) -> h11.Response:
    """The upstream's ``response`` as sent back to the client: one hop's headers
    removed, ``Connection: close``."""
    headers = [*_end_to_end(response.headers), (b"connection", b"close")]
    return h11.Response(
        status_code=response.status_code,
        headers=headers,
        reason=response.reason,
        http_version="1.1",
    )
