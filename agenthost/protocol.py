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

The models live in :mod:`agenthost.models` and the framing in :mod:`agenthost.wire.framing`;
both are re-exported here, so ``agenthost.protocol`` is the one place to import from.
"""

from __future__ import annotations

import json
import logging
import re
from json.encoder import encode_basestring
from typing import Annotated, Any, Final, TypeVar

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from agenthost.errors import ErrorCode, ProtocolError
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
from agenthost.wire.codec import (
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    Request,
    RequestError,
    Response,
    check_peer_version,
    compare_versions,
    decode_request,
    describe_validation,
    encode_error,
    encode_request,
    encode_response,
    encode_response_pieces,
    is_version_supported,
    parse_version,
    short_text,
    to_utf8,
)
from agenthost.wire.framing import CLIENT_FRAME_LIMIT, DEFAULT_FRAME_LIMIT, FrameDecoder

_log = logging.getLogger("agenthost.protocol")

_NOT_PLAIN: Final = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""A byte a JSON string cannot hold as is (controls, quote, backslash) or that is not
ASCII (needs UTF-8 validation): lines without any go into events as they are."""

# --- requests --------------------------------------------------------------------


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
            f"invalid payload for {mtype}: {describe_validation(exc)}",
            code=ErrorCode.INVALID_PAYLOAD,
            request_type=request.type,
            request_id=request.id,
        ) from None


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
        raise ProtocolError(
            f"malformed frame from host: not JSON ({short_text(exc, 120)})"
        ) from None
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
        raise ProtocolError(f"malformed frame from host: {describe_validation(exc)}") from None


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
        raise ProtocolError(f"malformed {mtype} response: {describe_validation(exc)}") from None


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
        return to_utf8(
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
