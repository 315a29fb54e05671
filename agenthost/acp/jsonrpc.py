"""JSON-RPC 2.0 messages, one JSON object per line. Sans-IO.

:func:`parse` tells what a line is (a request to answer, a notification, a response
to one of ours, or something invalid, with the reason); the encoders return the bytes
of one line. Both ends of ACP use it: the ``acp`` adapter (client of an agent) and the
editor bridge (agent to an editor).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeGuard

JSONRPC: Final = "2.0"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
"""ACP: the request was cancelled (``$/cancel_request``)."""
AUTH_REQUIRED: Final = -32000
"""ACP: the agent needs the client to authenticate first."""
RESOURCE_NOT_FOUND: Final = -32002
"""ACP: e.g. ``session/load`` of a session the agent does not know."""

RequestId: TypeAlias = int | str


@dataclass(frozen=True, slots=True)
class Request:
    """A call the peer expects an answer to."""

    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    """A message that expects no answer."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Response:
    """The answer to one of our requests: ``result``, or ``error`` (``code``,
    ``message``, ``data``?) when it failed."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def error_text(self) -> str:
        """The error's message (with its data when short), for people."""
        if self.error is None:
            return ""
        message = self.error.get("message")
        text = message if isinstance(message, str) and message else "unknown error"
        data = self.error.get("data")
        if data is not None:
            detail = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            if len(detail) <= 500:
                text += f" ({detail})"
        return text


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line that is not a JSON-RPC message we can act on.

    ``id`` is the request's id when the line was a request with bad params (answer it
    with ``error(id, code, reason)``), else None.
    """

    reason: str
    code: int = INVALID_REQUEST
    id: RequestId | None = None


Message: TypeAlias = Request | Notification | Response | Invalid


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(line: str | bytes) -> Message:
    """What one line is. Never raises: garbage is :class:`Invalid` with the reason."""
    try:
        msg = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return Invalid("not JSON", PARSE_ERROR)
    if not isinstance(msg, dict):
        return Invalid("not a JSON object")
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params")
    if method is None:
        if not _valid_id(rid) or ("result" not in msg and "error" not in msg):
            return Invalid("neither a request, a notification nor a response")
        error = msg.get("error")
        if error is not None and not isinstance(error, dict):
            error = {"code": INTERNAL_ERROR, "message": str(error)}
        return Response(rid, msg.get("result"), error)
    if not isinstance(method, str) or not method:
        return Invalid("method is not a string", id=rid if _valid_id(rid) else None)
    if "id" in msg and not _valid_id(rid):
        return Invalid("id is neither a string nor an integer")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return Invalid("params is not an object", INVALID_PARAMS, rid if "id" in msg else None)
    if _valid_id(rid):
        return Request(rid, method, params)
    return Notification(method, params)


def _no_constant(_name: str) -> None:
    return None  # NaN and Infinity are not JSON: read as null


def encode(message: dict[str, Any]) -> bytes:
    """One line: ``message`` with ``"jsonrpc": "2.0"``, ASCII only (a peer never gets a
    line it cannot decode, whatever text a user sent), newline-terminated."""
    return (json.dumps({"jsonrpc": JSONRPC, **message}, separators=(",", ":")) + "\n").encode()


def request(rid: RequestId, method: str, params: dict[str, Any] | None = None) -> bytes:
    """A request line."""
    body: dict[str, Any] = {"id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return encode(body)


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    """A notification line."""
    body: dict[str, Any] = {"method": method}
    if params is not None:
        body["params"] = params
    return encode(body)


def result(rid: RequestId, value: Any) -> bytes:
    """A success response line (``value`` None is sent as ``null``)."""
    return encode({"id": rid, "result": value})


def error(rid: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """An error response line (``rid`` None when the request's id could not be read)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return encode({"id": rid, "error": err})


class Calls:
    """Ids for our requests, and what each was for until its response comes.

    ``issue(method, context)`` numbers a request; ``settle(response)`` gives back
    ``(method, context)`` of the request it answers, or None for a response that is not
    to one of ours (or answered already).
    """

    __slots__ = ("_next", "_open")

    def __init__(self) -> None:
        self._next = 0
        self._open: dict[RequestId, tuple[str, Any]] = {}

    def issue(
        self, method: str, params: dict[str, Any] | None = None, context: Any = None
    ) -> tuple[int, bytes]:
        """A new request: its id and its line."""
        self._next += 1
        self._open[self._next] = (method, context)
        return self._next, request(self._next, method, params)

    def settle(self, response: Response) -> tuple[str, Any] | None:
        """What the request ``response`` answers was for, now no longer open."""
        return self._open.pop(response.id, None)

    def pending(self, method: str) -> list[RequestId]:
        """Ids of our open requests of ``method``."""
        return [rid for rid, (m, _) in self._open.items() if m == method]

    def __len__(self) -> int:
        return len(self._open)
