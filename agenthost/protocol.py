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

The models live in :mod:`agenthost.models`, the framing in :mod:`agenthost.wire.framing`
and the envelope in :mod:`agenthost.wire.codec`; all are re-exported here, so
``agenthost.protocol`` is the one place to import from. :data:`HOST_MESSAGES` is the
host's message table (:class:`agenthost.wire.table.MessageTable`).
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import Any, Final

from pydantic import BaseModel, TypeAdapter

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
    decode_payload,
    decode_request,
    encode_error,
    encode_request,
    encode_response,
    encode_response_pieces,
    is_version_supported,
    parse_version,
    to_utf8,
)
from agenthost.wire.framing import CLIENT_FRAME_LIMIT, DEFAULT_FRAME_LIMIT, FrameDecoder
from agenthost.wire.table import MessageTable

_NOT_PLAIN: Final = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""A byte a JSON string cannot hold as is (controls, quote, backslash) or that is not
ASCII (needs UTF-8 validation): lines without any go into events as they are."""

# --- requests --------------------------------------------------------------------


HOST_MESSAGES: Final[MessageTable[MessageType, Response | StreamEvent]] = MessageTable(
    service="host",
    peer="host",
    version=PROTOCOL_VERSION,
    types=MessageType,
    requests=REQUEST_PAYLOADS,
    responses=RESPONSE_PAYLOADS,
    frames={"response": Response, "event": StreamEvent},
    logger="agenthost.protocol",
    since=MESSAGE_SINCE,
    values={"event_type": EventType, "agent_state": AgentState},
)
"""The host's messages: its requests, their payloads and responses, and the frames a
client receives (responses and stream events)."""

MESSAGE_ADAPTER: Final[TypeAdapter[Response | StreamEvent]] = HOST_MESSAGES.frame_adapter


def validate_payload(request: Request) -> tuple[MessageType, BaseModel]:
    """Return the request's message type and its validated payload model.

    Raise :class:`RequestError` (``unknown_type`` or ``invalid_payload``).
    """
    return HOST_MESSAGES.validate(request)


def decode_message(frame: bytes) -> Response | StreamEvent | None:
    """Decode a frame received from a host: a response or a stream event.

    Frames of this package's hosts take one validating parse; frames without ``kind``
    (hosts of protocol 1.0 as first published), escaped lone surrogates and
    ``chat_entry`` objects of another shape are accepted too
    (:meth:`~agenthost.wire.table.MessageTable.decode_frame`). A ``kind`` this version
    does not know gives None: the protocol tells clients to ignore it. Raise
    ProtocolError, with what is wrong, if the frame is none of these.
    """
    return HOST_MESSAGES.decode_frame(frame)


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
    "HOST_MESSAGES",
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
