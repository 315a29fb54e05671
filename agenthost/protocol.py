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

The names live in :mod:`agenthost.names`, the models in :mod:`agenthost.models`, the
framing in :mod:`agenthost.wire.framing` and the envelope in :mod:`agenthost.wire.codec`;
all are re-exported here, so ``agenthost.protocol`` is the one place to import from.
:data:`HOST_MESSAGES` is the host's message table
(:class:`agenthost.wire.table.MessageTable`).

The models, and pydantic with them, are imported when first asked for (PEP 562): a
host answers pings, encodes its events and reports its state without them (pydantic
and the models were over half of an exec'd host's start-up CPU), and loads them with
its first request that has a payload or a model answer. :func:`build_models` loads and
builds them all at once.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
from typing import TYPE_CHECKING, Any, Final

from agenthost.errors import ErrorCode, ProtocolError
from agenthost.linesplit import Fragment
from agenthost.names import (
    FINAL_STATES,
    MESSAGE_SINCE,
    NO_PAYLOAD,
    AgentState,
    EventType,
    MessageType,
)
from agenthost.wire.codec import (
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    Request,
    RequestError,
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

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter

    from agenthost.models import REQUEST_PAYLOADS as REQUEST_PAYLOADS
    from agenthost.models import RESPONSE_PAYLOADS as RESPONSE_PAYLOADS
    from agenthost.models import AgentInfo as AgentInfo
    from agenthost.models import AttachRequest as AttachRequest
    from agenthost.models import AttachResponse as AttachResponse
    from agenthost.models import Budget as Budget
    from agenthost.models import BudgetResponse as BudgetResponse
    from agenthost.models import EmptyRequest as EmptyRequest
    from agenthost.models import HistoryEntry as HistoryEntry
    from agenthost.models import HistoryRequest as HistoryRequest
    from agenthost.models import HistoryResponse as HistoryResponse
    from agenthost.models import HostInfo as HostInfo
    from agenthost.models import InterruptResponse as InterruptResponse
    from agenthost.models import ListResponse as ListResponse
    from agenthost.models import PendingResponse as PendingResponse
    from agenthost.models import PermissionDecision as PermissionDecision
    from agenthost.models import PermissionRequest as PermissionRequest
    from agenthost.models import PingResponse as PingResponse
    from agenthost.models import RespondRequest as RespondRequest
    from agenthost.models import RespondResponse as RespondResponse
    from agenthost.models import Response as Response
    from agenthost.models import ResumeResponse as ResumeResponse
    from agenthost.models import SendRequest as SendRequest
    from agenthost.models import SendResponse as SendResponse
    from agenthost.models import StatusResponse as StatusResponse
    from agenthost.models import StopRequest as StopRequest
    from agenthost.models import StopResponse as StopResponse
    from agenthost.models import StreamEvent as StreamEvent
    from agenthost.wire.table import MessageTable

    HOST_MESSAGES: MessageTable[MessageType, Response | StreamEvent]
    MESSAGE_ADAPTER: TypeAdapter[Response | StreamEvent]


def __getattr__(name: str) -> Any:
    if name in _MODELS:
        value = getattr(importlib.import_module("agenthost.models"), name)
    elif name == "HOST_MESSAGES":
        value = host_messages()
    elif name == "MESSAGE_ADAPTER":
        value = host_messages().frame_adapter
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


_NOT_PLAIN: Final = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""A byte a JSON string cannot hold as is (controls, quote, backslash) or that is not
ASCII (needs UTF-8 validation): lines without any go into events as they are."""

_PLAIN: Final = bytes(b for b in range(0x20, 0x7F) if b not in b'"\\')
"""The bytes :data:`_NOT_PLAIN` does not match (``bytes.translate`` deletes them)."""

# --- requests --------------------------------------------------------------------


@functools.cache
def host_messages() -> MessageTable[MessageType, Response | StreamEvent]:
    """The host's messages (:data:`HOST_MESSAGES`): its requests, their payloads and
    responses, and the frames a client receives (responses and stream events). Built,
    with the models, on first use."""
    from agenthost import models
    from agenthost.wire.table import MessageTable

    return MessageTable(
        service="host",
        peer="host",
        version=PROTOCOL_VERSION,
        types=MessageType,
        requests=models.REQUEST_PAYLOADS,
        responses=models.RESPONSE_PAYLOADS,
        frames={"response": models.Response, "event": models.StreamEvent},
        logger="agenthost.protocol",
        since=MESSAGE_SINCE,
        values={"event_type": EventType, "agent_state": AgentState},
    )


def build_models() -> None:
    """Import and build every model of the host protocol and the frame validator now,
    which are otherwise loaded and built when first used. For a process that forks
    hosts or clients: what it builds before the fork, they share (and do not build
    again)."""
    from agenthost import models

    models.build_all()
    host_messages().build()


def validate_payload(request: Request) -> tuple[MessageType, BaseModel]:
    """Return the request's message type and its validated payload model.

    Raise :class:`RequestError` (``unknown_type`` or ``invalid_payload``).
    """
    return host_messages().validate(request)


def validate_request(request: Request) -> tuple[MessageType, BaseModel | None]:
    """:func:`validate_payload` for a host: a request that takes no payload (ping,
    status, ...; any payload object is valid and ignored) gets None, without loading
    a model.

    Raise :class:`RequestError` (``unknown_type`` or ``invalid_payload``).
    """
    if request.type in NO_PAYLOAD:
        return MessageType(request.type), None
    return host_messages().validate(request)


def decode_message(frame: bytes) -> Response | StreamEvent | None:
    """Decode a frame received from a host: a response or a stream event.

    Frames of this package's hosts take one validating parse; frames without ``kind``
    (hosts of protocol 1.0 as first published), escaped lone surrogates and
    ``chat_entry`` objects of another shape are accepted too
    (:meth:`~agenthost.wire.table.MessageTable.decode_frame`). A ``kind`` this version
    does not know gives None: the protocol tells clients to ignore it. Raise
    ProtocolError, with what is wrong, if the frame is none of these.
    """
    return host_messages().decode_frame(frame)


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

    __slots__ = ("agent_id", "_prefix", "_output_head", "_heads", "_dumps", "_dumps_text")

    def __init__(self, agent_id: str) -> None:
        # orjson's import (about 15 ms of CPU in a bare process, 0.5 ms in a host) is paid
        # only where events are encoded, not by the command line
        from agenthost import jsontext

        self.agent_id = agent_id
        self._prefix = '"agent_id":' + json.dumps(agent_id) + ',"offset":'
        self._output_head = ('{"kind":"event","type":"output",' + self._prefix).encode()
        self._heads: dict[str, bytes] = {}  # event type -> the bytes before the offset
        self._dumps = jsontext.dumps
        self._dumps_text = jsontext.dumps_text

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
        middle = (',"timestamp":"' + timestamp + '","stream":"' + stream + '","data":"').encode()
        # one bytes formatting per line: a fifth less than a join of five pieces
        template = b'%b%%d%b%%b"}\n' % (
            self._output_head.replace(b"%", b"%%"),
            middle.replace(b"%", b"%%"),
        )
        if set(map(type, lines)) == {bytes} and not b"".join(lines).translate(None, _PLAIN):
            # every line whole and plain: one check for the batch, not a regex per line
            return [template % pair for pair in enumerate(lines, first_offset)]
        not_plain = _NOT_PLAIN.search
        out: list[bytes] = []
        offset = first_offset
        for line in lines:
            if type(line) is bytes and not_plain(line) is None:
                out.append(template % (offset, line))
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
        tail = b"}\n"
        if continued or escaped:
            tail = (b',"continued":true' if continued else b"") + (
                b',"escaped":true}\n' if escaped else b"}\n"
            )
        return b"".join(
            (
                self._output_head,
                b"%d" % offset,
                b',"timestamp":"',
                timestamp.encode(),
                b'","stream":"',
                stream.encode(),
                b'","data":',
                self._dumps_text(data),
                tail,
            )
        )

    def event(self, event_type: str, offset: int, timestamp: str, fields: dict[str, Any]) -> bytes:
        """Any other event; ``fields`` are added after the common ones.

        Raise ValueError or TypeError if ``fields`` cannot be encoded (NaN, objects).
        """
        body = self._dumps(fields)
        head = self._heads.get(event_type)
        if head is None:
            text = '{"kind":"event","type":' + json.dumps(event_type) + "," + self._prefix
            head = self._heads.setdefault(event_type, to_utf8(text))
        return b"".join(
            (
                head,
                b"%d" % offset,
                b',"timestamp":"',
                timestamp.encode(),
                b'"}\n' if body == b"{}" else b'",' + body[1:] + b"\n",
            )
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
    "MESSAGE_ADAPTER",
    "NO_PAYLOAD",
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
    "Budget",
    "BudgetResponse",
    "ResumeResponse",
    "Response",
    "SendRequest",
    "SendResponse",
    "StatusResponse",
    "StopRequest",
    "StopResponse",
    "StreamEvent",
    "build_models",
    "check_peer_version",
    "compare_versions",
    "decode_message",
    "decode_payload",
    "decode_request",
    "encode_error",
    "encode_request",
    "encode_response",
    "encode_response_pieces",
    "host_messages",
    "is_version_supported",
    "parse_version",
    "response_error_code",
    "validate_payload",
    "validate_request",
]

_MODELS: Final = frozenset(__all__) - set(globals()) - {"HOST_MESSAGES", "MESSAGE_ADAPTER"}
"""The names this module gives from :mod:`agenthost.models`, on first use (what
``__all__`` names that is not defined here; the table's two are built here)."""
