"""The envelope every agenthost service speaks: versions, requests, responses. Sans-IO.

Host and daemon share it (each adds its message table, see :mod:`agenthost.wire.table`):
one JSON object per ``\\n``-terminated line (:mod:`agenthost.wire.framing`),

* request  ``{"type": "host.ping", "id": "r1", "payload": {...}, "protocol_version": "1.0"}``
* response ``{"kind": "response", "type", "id", "success", "error"?, "code"?, "payload"?}``

This module never touches a socket or an event loop, and imports no pydantic: a
service decodes requests and encodes its answers with it alone; the models of payloads
and of the decoded :class:`~agenthost.models.Response` are loaded by whoever needs them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agenthost.errors import ErrorCode, ProtocolError, VersionUnsupported

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from agenthost.models import Response as Response

PROTOCOL_VERSION: Final = "1.7"
"""The protocol version this package speaks (``MAJOR.MINOR``)."""

MIN_PROTOCOL_VERSION: Final = "1.0"
"""The oldest protocol version this package still serves and talks to."""

_VERSION_RE: Final = re.compile(r"^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$")


def parse_version(version: str) -> tuple[int, int]:
    """Parse ``"MAJOR.MINOR"`` into a tuple of ints; raise ProtocolError otherwise."""
    match = _VERSION_RE.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise ProtocolError(f"invalid protocol version {version!r}: expected MAJOR.MINOR")
    return int(match.group(1)), int(match.group(2))


def compare_versions(a: str, b: str) -> int:
    """Compare two versions numerically (``1.10 > 1.9``): -1, 0 or 1."""
    va, vb = parse_version(a), parse_version(b)
    return (va > vb) - (va < vb)


def is_version_supported(version: str) -> bool:
    """Whether a peer speaking ``version`` can be served: same major, not below the minimum."""
    major, _ = parse_version(version)
    ours, _ = parse_version(PROTOCOL_VERSION)
    return major == ours and compare_versions(version, MIN_PROTOCOL_VERSION) >= 0


def check_peer_version(version: str, *, min_version: str | None = None) -> None:
    """Raise VersionUnsupported unless a peer at ``version`` (with its ``min_version``)
    and this package can talk to each other."""
    if not is_version_supported(version):
        raise VersionUnsupported(
            f"protocol version {version} is not supported "
            f"(this side speaks {PROTOCOL_VERSION}, accepts >= {MIN_PROTOCOL_VERSION})",
            hint="upgrade the older side",
        )
    if min_version is not None and compare_versions(PROTOCOL_VERSION, min_version) < 0:
        raise VersionUnsupported(
            f"peer requires protocol >= {min_version}, this side speaks {PROTOCOL_VERSION}",
            hint="upgrade agenthost",
        )


# --- requests --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request envelope (payload not yet validated)."""

    # A plain dataclass, not a model: :func:`decode_request` has checked every field
    # already, and a service answers its first request (a ``host.ping``) without
    # building a single model. The published schema is generated from it all the same
    # (:meth:`agenthost.wire.table.MessageTable.json_schema`).

    type: str
    id: str | int | None = None
    payload: dict[str, Any] | None = None
    protocol_version: str | None = None


class RequestError(ProtocolError):
    """A request that cannot be served, with what could be read of its envelope,
    so the error response can echo ``type`` and ``id``."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode,
        request_type: str = "",
        request_id: str | int | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.request_type = request_type
        self.request_id = request_id


def decode_request(frame: bytes) -> Request:
    """Decode one request frame. Raise :class:`RequestError` with the right code.

    Checks the envelope only (a JSON object with a string ``type``, an optional string
    or integer ``id``, an optional object ``payload``, a supported
    ``protocol_version``); the payload is checked by the service's message table
    (:meth:`agenthost.wire.table.MessageTable.validate`).
    """
    try:
        # Frames are UTF-8: decode explicitly (json.loads(bytes) would guess UTF-16/32).
        obj = json.loads(frame.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RequestError(
            f"malformed JSON: {short_text(exc)}", code=ErrorCode.BAD_REQUEST
        ) from None
    if not isinstance(obj, dict):
        raise RequestError(
            f"a request must be a JSON object, got {type(obj).__name__}",
            code=ErrorCode.BAD_REQUEST,
        )
    rtype = obj.get("type")
    rid = obj.get("id")
    if not isinstance(rid, str | int) or isinstance(rid, bool):
        rid_ok: str | int | None = None
        if rid is not None:
            raise RequestError(
                "request 'id' must be a string or an integer",
                code=ErrorCode.BAD_REQUEST,
                request_type=rtype if isinstance(rtype, str) else "",
            )
    else:
        rid_ok = rid
    if not isinstance(rtype, str) or not rtype:
        raise RequestError(
            "request 'type' is missing or not a string",
            code=ErrorCode.BAD_REQUEST,
            request_id=rid_ok,
        )
    version = obj.get("protocol_version")
    if version is not None:
        try:
            supported = is_version_supported(version)
        except ProtocolError as exc:
            raise RequestError(
                exc.message, code=ErrorCode.BAD_REQUEST, request_type=rtype, request_id=rid_ok
            ) from None
        if not supported:
            raise RequestError(
                f"protocol version {version} is not supported: this host serves "
                f"{MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                code=ErrorCode.VERSION_UNSUPPORTED,
                request_type=rtype,
                request_id=rid_ok,
            )
    payload = obj.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise RequestError(
            f"payload must be a JSON object, got {type(payload).__name__}",
            code=ErrorCode.INVALID_PAYLOAD,
            request_type=rtype,
            request_id=rid_ok,
        )
    return Request(type=rtype, id=rid_ok, payload=payload, protocol_version=version)


def encode_request(
    mtype: str,
    payload: dict[str, Any] | None = None,
    *,
    request_id: str | int | None = None,
    protocol_version: str | None = PROTOCOL_VERSION,
) -> bytes:
    """Encode a request frame (with its newline)."""
    obj: dict[str, Any] = {"type": str(mtype)}
    if request_id is not None:
        obj["id"] = request_id
    if protocol_version is not None:
        obj["protocol_version"] = protocol_version
    if payload:
        obj["payload"] = payload
    return dump_line(obj)


# --- responses -------------------------------------------------------------------


def encode_response(
    request_type: str,
    request_id: str | int | None,
    payload: BaseModel | dict[str, Any] | None = None,
) -> bytes:
    """Encode a success response frame (with its newline)."""
    obj: dict[str, Any] = {
        "kind": "response",
        "type": request_type,
        "id": request_id,
        "success": True,
    }
    if isinstance(payload, dict):
        obj["payload"] = payload
    elif payload is not None:
        obj["payload"] = payload.model_dump(mode="json", exclude_none=True)
    return dump_line(obj)


def encode_response_pieces(
    request_type: str,
    request_id: str | int | None,
    payload: BaseModel,
    field: str,
    items: Iterable[BaseModel],
    piece_bytes: int,
) -> Iterator[bytes]:
    """The frame ``encode_response`` gives for ``payload`` with its list ``field`` set to
    ``items``, as pieces of about ``piece_bytes`` (at least one item each).

    For answers too big to hold at once: ``items`` is consumed, and each item dumped,
    only as the pieces are asked for. ``payload`` carries ``field`` as an empty list.
    """
    frame = encode_response(request_type, request_id, payload)
    # The key of a field is found once: inside a JSON string a quote is always escaped.
    head, tail = frame.split(dump_compact(field) + b":[]", 1)
    piece = [head, dump_compact(field), b":["]
    size = 0
    comma = b""
    for item in items:
        data = dump_compact(item.model_dump(mode="json", exclude_none=True))
        piece += (comma, data)
        comma = b","
        size += len(data)
        if size >= piece_bytes:
            yield b"".join(piece)
            piece, size = [], 0
    piece += (b"]", tail)
    yield b"".join(piece)


def encode_error(
    request_type: str,
    request_id: str | int | None,
    code: ErrorCode | str,
    message: str,
) -> bytes:
    """Encode an error response frame (with its newline)."""
    return dump_line(
        {
            "kind": "response",
            "type": request_type,
            "id": request_id,
            "success": False,
            "error": message,
            "code": str(code),
        }
    )


# --- helpers ---------------------------------------------------------------------


def dump_line(obj: dict[str, Any]) -> bytes:
    return to_utf8(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def dump_compact(value: Any) -> bytes:
    return to_utf8(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def to_utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates (from JSON the agent or a peer sent,
    e.g. half an emoji) become U+FFFD, so every frame we write is valid UTF-8."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode()


def short_text(exc: BaseException, limit: int = 200) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def describe_validation(exc: ValidationError, limit: int = 5) -> str:
    """A one-line summary of a validation error (its first ``limit`` problems), the
    text of ``invalid_payload`` errors and of malformed frames."""
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "payload"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """Where the first problem of a validation error is (dotted, ``""`` for the whole
    object) and what it is, without pydantic's ``Value error, `` before the reason one
    of our validators gave: for messages that name one problem to a person."""
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"])
    return where, str(err["msg"]).removeprefix("Value error, ")


M = TypeVar("M", bound="BaseModel")


def decode_payload(model: type[M], payload: dict[str, Any], mtype: str) -> M:
    """Validate the payload of a ``mtype`` response as ``model``; raise ProtocolError
    saying which fields are wrong."""
    from pydantic import ValidationError  # a client's: loaded with its models

    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ProtocolError(f"malformed {mtype} response: {describe_validation(exc)}") from None


def __getattr__(name: str) -> Any:
    # Response moved to agenthost.models with the other models (this module imports
    # no pydantic: a service answers pings without it); still importable from here.
    if name == "Response":
        from agenthost.models import Response

        return Response
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
