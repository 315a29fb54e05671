"""The HTTP API's decisions without I/O: request bodies checked, errors of the
library mapped to HTTP statuses, agent keys parsed, and the bytes of Server-Sent
Events. :mod:`agenthost.web.app` does the I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from agenthost.errors import (
    AgentHostError,
    AgentNotRunning,
    Busy,
    ConfigError,
    DaemonStartError,
    Forbidden,
    HostAlreadyRunning,
    HostNotFound,
    InvalidAgentId,
    InvalidPayload,
    NotConnected,
    ProtocolError,
    RequestTimeout,
    UnknownRequest,
    UnknownType,
)
from agenthost.paths import validate_agent_id

MAX_BODY: Final = 256 * 1024
"""The largest request body accepted (a message to an agent fits many times)."""


class HttpError(Exception):
    """An error answer: ``status``, a stable ``code`` and a human ``message``; with
    ``retry_after`` (seconds), a ``Retry-After`` header."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def headers(self) -> dict[str, str] | None:
        """The headers of the answer besides the JSON's."""
        return None if self.retry_after is None else {"Retry-After": str(self.retry_after)}

    def body(self) -> dict[str, str]:
        """The JSON body of the answer."""
        return {"error": self.message, "code": self.code}


def bad_request(message: str) -> HttpError:
    """A 400 for a body that is not what the endpoint takes."""
    return HttpError(400, "bad_request", message)


def from_library(exc: AgentHostError) -> HttpError:
    """The HTTP answer for an error of the library (a host's or the daemon's)."""
    # order matters: subclasses first (RemoteError is a NotConnected, ...)
    table: tuple[tuple[type[AgentHostError], int, str], ...] = (
        (InvalidAgentId, 404, "not_found"),
        (HostNotFound, 409, "agent_not_running"),
        (AgentNotRunning, 409, "agent_not_running"),
        (Busy, 409, "busy"),
        (HostAlreadyRunning, 409, "already_running"),
        (DaemonStartError, 502, "daemon_start_failed"),
        (UnknownRequest, 404, "unknown_request"),
        (InvalidPayload, 400, "invalid_payload"),
        # a host older than the request (host.screen and friends are 1.7)
        (UnknownType, 409, "unsupported"),
        (ConfigError, 400, "invalid_payload"),
        (RequestTimeout, 504, "host_timeout"),
        (NotConnected, 502, "host_gone"),
        (ProtocolError, 502, "bad_host_answer"),
        (Forbidden, 502, "host_forbidden"),
    )
    for cls, status, code in table:
        if isinstance(exc, cls):
            return HttpError(status, code, exc.message)
    return HttpError(500, "internal", exc.message)


@dataclass(frozen=True, slots=True)
class AgentKey:
    """An agent as a URL names it: ``ID`` (local) or ``ID@MACHINE`` (remote)."""

    agent_id: str
    machine: str | None

    def __str__(self) -> str:
        return self.agent_id if self.machine is None else f"{self.agent_id}@{self.machine}"


def parse_key(key: str, machines: frozenset[str]) -> AgentKey:
    """The agent of a URL's key; HttpError 404 for an invalid id or unknown machine
    (agent ids never contain ``@``, so the first one splits)."""
    agent_id, at, machine = key.partition("@")
    try:
        validate_agent_id(agent_id)
    except InvalidAgentId as exc:
        raise HttpError(404, "not_found", exc.message) from None
    if not at:
        return AgentKey(agent_id, None)
    if machine not in machines:
        raise HttpError(404, "not_found", f"no remote machine {machine!r} in this gateway")
    return AgentKey(agent_id, machine)


def json_object(body: bytes, *, empty_ok: bool = False) -> dict[str, Any]:
    """A request body as a JSON object; HttpError 400 otherwise."""
    if not body.strip() and empty_ok:
        return {}
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise bad_request("the body must be a JSON object")
    return value


def fields(
    obj: dict[str, Any],
    required: dict[str, type | tuple[type, ...]],
    optional: dict[str, type | tuple[type, ...]] | None = None,
) -> dict[str, Any]:
    """Check ``obj``'s fields: each required one present with its type, optional ones
    of their type when present (null counts as absent), no other field. Return the
    fields given."""
    optional = optional or {}
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}")
    out: dict[str, Any] = {}
    for name, kind in {**required, **optional}.items():
        value = obj.get(name)
        if value is None:
            if name in required:
                raise bad_request(f"missing field {name!r}")
            continue
        # bool is an int in Python; a JSON true is not a number here
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
            raise bad_request(f"field {name!r} must be {_kind_name(kind)}")
        out[name] = value
    return out


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        dict: "an object",
        list: "an array",
    }
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in _kinds(kind)))


def query_int(value: str | None, name: str, *, minimum: int = 0) -> int | None:
    """A non-negative integer query parameter (or header); HttpError 400 otherwise."""
    if value is None or value == "":
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise bad_request(f"{name} must be a whole number, not {value[:40]!r}")
    number = int(value)
    if number < minimum:
        raise bad_request(f"{name} must be at least {minimum}")
    return number


# --- Server-Sent Events ------------------------------------------------------------------

PING: Final = b": ping\n\n"


def sse_event(offset: int, frame: bytes) -> bytes:
    """One stream event: its offset as the SSE id, the host's JSON as data (one line:
    the host's frames never contain a newline)."""
    return b"id: %d\ndata: %s\n\n" % (offset, frame)


def sse_named(name: str, data: Any) -> bytes:
    """A named event without an id (``truncated``, ``agents``)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {name}\ndata: {text}\n\n".encode()
