"""The host protocol, version 1: versions, envelopes, encoding and decoding. Sans-IO.

Transport-independent: this module never touches a socket or an event loop. The host
and the client feed it bytes and get frames, requests, responses and events back.

Wire format (see ``docs/protocol.md``): one JSON object per ``\\n``-terminated line.

* request  ``{"type": "host.ping", "id": "r1", "payload": {...}, "protocol_version": "1.0"}``
* response ``{"kind": "response", "type", "id", "success", "error"?, "code"?, "payload"?}``
* event    ``{"kind": "event", "type", "agent_id", "offset", "timestamp", ...}``

Requests and payloads from peers are validated here, at the edge. Our own events are
encoded by :class:`EventEncoder` without a model round trip because they are on the hot
path; tests check that its output validates as :class:`StreamEvent`.

The models live in :mod:`agenthost.models` and the framing in :mod:`agenthost.framing`;
both are re-exported here, so ``agenthost.protocol`` is the one place to import from.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agenthost.errors import ErrorCode, ProtocolError, VersionUnsupported
from agenthost.framing import CLIENT_FRAME_LIMIT, DEFAULT_FRAME_LIMIT, FrameDecoder
from agenthost.linesplit import Fragment
from agenthost.models import (
    FINAL_STATES,
    MESSAGE_SINCE,
    REQUEST_PAYLOADS,
    RESPONSE_PAYLOADS,
    AgentInfo,
    AgentState,
    AttachRequest,
    AttachResponse,
    EmptyRequest,
    EventType,
    HistoryEntry,
    HistoryRequest,
    HistoryResponse,
    HostInfo,
    InterruptResponse,
    ListResponse,
    MessageType,
    PeerModel,
    PendingResponse,
    PermissionDecision,
    PermissionRequest,
    PingResponse,
    RespondRequest,
    RespondResponse,
    SendRequest,
    SendResponse,
    StatusResponse,
    StopRequest,
    StopResponse,
    StreamEvent,
)

PROTOCOL_VERSION: Final = "1.1"
"""The protocol version this package speaks (``MAJOR.MINOR``)."""

MIN_PROTOCOL_VERSION: Final = "1.0"
"""The oldest protocol version this package still serves and talks to."""

_log = logging.getLogger("agenthost.protocol")

# --- versions --------------------------------------------------------------------

_NOT_PLAIN: Final = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""A byte a JSON string cannot hold as is (controls, quote, backslash) or that is not
ASCII (needs UTF-8 validation): lines without any go into events as they are."""

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


class Request(BaseModel):
    """A decoded request envelope (payload not yet validated)."""

    model_config = ConfigDict(frozen=True)

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
    ``protocol_version``); the payload is checked by :func:`validate_payload`.
    """
    try:
        # Frames are UTF-8: decode explicitly (json.loads(bytes) would guess UTF-16/32).
        obj = json.loads(frame.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RequestError(f"malformed JSON: {_short(exc)}", code=ErrorCode.BAD_REQUEST) from None
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


def validate_payload(request: Request) -> tuple[MessageType, BaseModel]:
    """Return the request's message type and its validated payload model.

    Raise :class:`RequestError` (``unknown_type`` or ``invalid_payload``).
    """
    try:
        mtype = MessageType(request.type)
    except ValueError:
        raise RequestError(
            f"unknown message type: {request.type}",
            code=ErrorCode.UNKNOWN_TYPE,
            request_type=request.type,
            request_id=request.id,
        ) from None
    model = REQUEST_PAYLOADS[mtype]
    try:
        return mtype, model.model_validate(request.payload or {})
    except ValidationError as exc:
        raise RequestError(
            f"invalid payload for {mtype}: {_describe_validation(exc)}",
            code=ErrorCode.INVALID_PAYLOAD,
            request_type=request.type,
            request_id=request.id,
        ) from None


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
    return _dumps(obj)


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
    if isinstance(payload, BaseModel):
        obj["payload"] = payload.model_dump(mode="json", exclude_none=True)
    elif payload is not None:
        obj["payload"] = payload
    return _dumps(obj)


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
    head, tail = frame.split(_dumps_compact(field) + b":[]", 1)
    piece = [head, _dumps_compact(field), b":["]
    size = 0
    comma = b""
    for item in items:
        data = _dumps_compact(item.model_dump(mode="json", exclude_none=True))
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
    return _dumps(
        {
            "kind": "response",
            "type": request_type,
            "id": request_id,
            "success": False,
            "error": message,
            "code": str(code),
        }
    )


class Response(PeerModel):
    """A decoded response envelope."""

    kind: Literal["response"] = "response"
    type: str = ""
    id: str | int | None = None
    success: bool
    error: str | None = None
    code: str | None = None
    payload: dict[str, Any] | None = None


Message = Annotated[Response | StreamEvent, Field(discriminator="kind")]
MESSAGE_ADAPTER: Final[TypeAdapter[Response | StreamEvent]] = TypeAdapter(Message)


def decode_message(frame: bytes) -> Response | StreamEvent | None:
    """Decode a frame received from a host: a response or a stream event.

    Frames of this package's hosts take one validating parse. Anything else goes
    through a liberal second pass (see :func:`_decode_liberally`): frames without
    ``kind`` (hosts of protocol 1.0 as first published), escaped lone surrogates, and
    ``chat_entry`` objects of another shape are accepted. An object whose ``kind`` is a
    string this version does not know gives None: the protocol tells clients to ignore
    it (a later minor version may add kinds). Raise ProtocolError, with what is wrong,
    if the frame is none of these.
    """
    try:
        return MESSAGE_ADAPTER.validate_json(frame)
    except ValidationError:
        pass
    return _decode_liberally(frame)


def _decode_liberally(frame: bytes) -> Response | StreamEvent | None:
    # Off the hot path: only frames our own hosts never send get here, so the extra
    # parse costs nothing to them.
    try:
        # json.loads, unlike pydantic's parser, takes escaped lone surrogates ("\ud800")
        # that other encoders send; decode explicitly (bytes would be guessed UTF-16/32).
        obj = json.loads(frame.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"malformed frame from host: not JSON ({_short(exc, 120)})") from None
    if not isinstance(obj, dict):
        raise ProtocolError(
            f"malformed frame from host: a JSON {type(obj).__name__}, not an object"
        )
    if "kind" not in obj:
        # The reference host of protocol 1.0 sends no ``kind``: only its responses
        # carry ``success``.
        obj["kind"] = "response" if "success" in obj else "event"
    kind = obj["kind"]
    if isinstance(kind, str) and kind not in ("response", "event"):
        _log.debug("frame of an unknown kind %r ignored", kind[:40])
        return None
    if kind == "event" and obj.get("chat_entry") is not None:
        _tolerate_chat_entry(obj)
    try:
        return MESSAGE_ADAPTER.validate_python(obj)
    except ValidationError as exc:
        raise ProtocolError(f"malformed frame from host: {_describe_validation(exc)}") from None


def _tolerate_chat_entry(event: dict[str, Any]) -> None:
    """A ``chat_entry`` that is not a HistoryEntry (e.g. Go field names, ``Role`` and
    ``Content``) must not end the stream: the event keeps its place, the entry goes
    into ``data`` as JSON text and ``chat_entry`` is left out."""
    entry = event["chat_entry"]
    try:
        HistoryEntry.model_validate(entry)
    except ValidationError:
        pass
    else:
        return
    event["chat_entry"] = None
    if event.get("data") is None:
        event["data"] = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
    keys = sorted(entry)[:8] if isinstance(entry, dict) else type(entry).__name__
    _log.info(
        "chat_entry of an unknown shape at offset %s, delivered as raw data (%s)",
        event.get("offset"),
        keys,
    )


M = TypeVar("M", bound=BaseModel)


def decode_payload(model: type[M], payload: dict[str, Any], mtype: str) -> M:
    """Validate the payload of a ``mtype`` response as ``model``; raise ProtocolError
    saying which fields are wrong."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ProtocolError(f"malformed {mtype} response: {_describe_validation(exc)}") from None


_CODES_BY_MESSAGE: Final = (
    (re.compile(r"unknown (message )?type", re.IGNORECASE), ErrorCode.UNKNOWN_TYPE),
    (re.compile(r"agent is not running", re.IGNORECASE), ErrorCode.AGENT_NOT_RUNNING),
)


def response_error_code(response: Response, host_version: str | None = None) -> str | None:
    """The error code of a failed response.

    A host of protocol 1.0 as first published sends ``error`` without ``code``: the
    code is then read from its message (``unknown message type: ...`` is
    ``unknown_type``), or is ``unknown_type`` when the request's type is newer than
    ``host_version``. None when nothing tells (the client raises InternalError).
    """
    if response.code is not None:
        return response.code
    message = response.error or ""
    for pattern, code in _CODES_BY_MESSAGE:
        if pattern.search(message):
            return code
    since = MESSAGE_SINCE.get(response.type)
    if since is not None and host_version is not None:
        try:
            if compare_versions(host_version, since) < 0:
                return ErrorCode.UNKNOWN_TYPE
        except ProtocolError:
            return None
    return None


# --- events (hot path) -------------------------------------------------------------


class EventEncoder:
    """Encode this host's stream events to wire bytes, each exactly once.

    No model is built: events are ours and already valid, and this runs for every
    line the agent prints. The output is a JSON object that validates as
    :class:`StreamEvent`, terminated by a newline.
    """

    __slots__ = ("agent_id", "_prefix", "_output_head")

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self._prefix = '"agent_id":' + json.dumps(agent_id) + ',"offset":'
        self._output_head = ('{"kind":"event","type":"output",' + self._prefix).encode()

    def output_lines(
        self, first_offset: int, timestamp: str, lines: list[bytes], stream: str
    ) -> list[bytes]:
        """``output`` events for raw lines numbered from ``first_offset``, byte for byte
        what :meth:`output` gives for each (``Fragment`` pieces are ``continued``;
        invalid UTF-8 is escaped).

        The hot path of a flooding agent: a line of plain printable ASCII (most tool
        output) is copied into its event as bytes, with no decoding, escaping or
        re-encoding; only the others take the general path.
        """
        head = self._output_head
        middle = (',"timestamp":"' + timestamp + '","stream":"' + stream + '","data":"').encode()
        not_plain = _NOT_PLAIN.search
        out: list[bytes] = []
        offset = first_offset
        for line in lines:
            if type(line) is bytes and not_plain(line) is None:
                out.append(b"".join((head, b"%d" % offset, middle, line, b'"}\n')))
            else:
                continued = isinstance(line, Fragment)
                try:
                    text, escaped = line.decode(), False
                except UnicodeDecodeError:
                    text, escaped = line.decode("utf-8", "backslashreplace"), True
                out.append(self.output(offset, timestamp, text, stream, continued, escaped))
            offset += 1
        return out

    def output(
        self,
        offset: int,
        timestamp: str,
        data: str,
        stream: str,
        continued: bool = False,
        escaped: bool = False,
    ) -> bytes:
        """An ``output`` event. ``data`` must be free of lone surrogates."""
        tail = "}\n"
        if continued or escaped:
            tail = (',"continued":true' if continued else "") + (
                ',"escaped":true}\n' if escaped else "}\n"
            )
        return (
            '{"kind":"event","type":"output",'
            + self._prefix
            + str(offset)
            + ',"timestamp":"'
            + timestamp
            + '","stream":"'
            + stream
            + '","data":'
            + encode_basestring(data)
            + tail
        ).encode()

    def event(self, event_type: str, offset: int, timestamp: str, fields: dict[str, Any]) -> bytes:
        """Any other event; ``fields`` are added after the common ones.

        Raise ValueError or TypeError if ``fields`` cannot be encoded (NaN, objects).
        """
        body = json.dumps(fields, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        rest = "}" if body == "{}" else "," + body[1:]
        return _utf8(
            '{"kind":"event","type":'
            + json.dumps(event_type)
            + ","
            + self._prefix
            + str(offset)
            + ',"timestamp":"'
            + timestamp
            + '"'
            + rest
            + "\n"
        )


# --- helpers ---------------------------------------------------------------------


def _dumps(obj: dict[str, Any]) -> bytes:
    return _utf8(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def _dumps_compact(value: Any) -> bytes:
    return _utf8(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates (from JSON the agent or a peer sent,
    e.g. half an emoji) become U+FFFD, so every frame we write is valid UTF-8."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode()


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "payload"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


__all__ = [
    "CLIENT_FRAME_LIMIT",
    "DEFAULT_FRAME_LIMIT",
    "FINAL_STATES",
    "MESSAGE_SINCE",
    "MIN_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "REQUEST_PAYLOADS",
    "RESPONSE_PAYLOADS",
    "AgentInfo",
    "AgentState",
    "AttachRequest",
    "AttachResponse",
    "EmptyRequest",
    "EventEncoder",
    "EventType",
    "FrameDecoder",
    "HistoryEntry",
    "HistoryRequest",
    "HistoryResponse",
    "HostInfo",
    "InterruptResponse",
    "ListResponse",
    "MessageType",
    "PendingResponse",
    "PermissionDecision",
    "PermissionRequest",
    "PingResponse",
    "Request",
    "RequestError",
    "RespondRequest",
    "RespondResponse",
    "Response",
    "SendRequest",
    "SendResponse",
    "StatusResponse",
    "StopRequest",
    "StopResponse",
    "StreamEvent",
    "check_peer_version",
    "compare_versions",
    "decode_message",
    "decode_payload",
    "decode_request",
    "encode_error",
    "encode_request",
    "encode_response",
    "encode_response_pieces",
    "is_version_supported",
    "parse_version",
    "response_error_code",
    "validate_payload",
]
