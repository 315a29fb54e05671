"""agenthost.protocol: request decoding, payload validation, encoders, versions, models."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.errors import ErrorCode, ProtocolError, VersionUnsupported
from agenthost.linesplit import Fragment
from agenthost.protocol import (
    MESSAGE_ADAPTER,
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    AgentInfo,
    AttachRequest,
    AttachResponse,
    EmptyRequest,
    EventEncoder,
    HistoryEntry,
    HistoryRequest,
    HistoryResponse,
    HostInfo,
    MessageType,
    PingResponse,
    Request,
    RequestError,
    Response,
    SendRequest,
    SendResponse,
    StatusResponse,
    StopRequest,
    StopResponse,
    StreamEvent,
    check_peer_version,
    compare_versions,
    decode_message,
    decode_request,
    encode_error,
    encode_request,
    encode_response,
    is_version_supported,
    parse_version,
    response_error_code,
    validate_payload,
)
from agenthost.timefmt import rfc3339

HYPO = settings(max_examples=200, deadline=None)

BAD = ErrorCode.BAD_REQUEST
INVALID = ErrorCode.INVALID_PAYLOAD
VERSION = ErrorCode.VERSION_UNSUPPORTED

DEEP = b"[" * 100_000 + b"]" * 100_000


# --- decode_request ----------------------------------------------------------------------

# (frame, code, request_type echoed, request_id echoed)
BAD_FRAMES: dict[str, tuple[bytes, ErrorCode, str, str | int | None]] = {
    "empty": (b"", BAD, "", None),
    "whitespace": (b"   ", BAD, "", None),
    "not json": (b"{nope", BAD, "", None),
    "truncated object": (b'{"type":"host.ping"', BAD, "", None),
    "trailing garbage": (b'{"type":"host.ping"} x', BAD, "", None),
    "two objects": (b'{"type":"host.ping"}{"type":"host.ping"}', BAD, "", None),
    "invalid utf-8 in a string": (b'{"type":"host.ping","id":"\xff"}', BAD, "", None),
    "invalid utf-8 in type": (b'{"type":"host.\xc3("}', BAD, "", None),
    "lone utf-8 continuation byte": (b'{"type":"\x80"}', BAD, "", None),
    "array": (b'[{"type":"host.ping"}]', BAD, "", None),
    "empty array": (b"[]", BAD, "", None),
    "number": (b"42", BAD, "", None),
    "float": (b"4.5", BAD, "", None),
    "string": (b'"host.ping"', BAD, "", None),
    "null": (b"null", BAD, "", None),
    "true": (b"true", BAD, "", None),
    "missing type": (b'{"id":"r1"}', BAD, "", "r1"),
    "missing type, int id": (b'{"id":7,"payload":{}}', BAD, "", 7),
    "type null": (b'{"type":null,"id":"r2"}', BAD, "", "r2"),
    "type number": (b'{"type":1,"id":"r3"}', BAD, "", "r3"),
    "type bool": (b'{"type":true}', BAD, "", None),
    "type list": (b'{"type":["host.ping"],"id":3}', BAD, "", 3),
    "type object": (b'{"type":{"name":"host.ping"}}', BAD, "", None),
    "type empty": (b'{"type":"","id":"r4"}', BAD, "", "r4"),
    "id true": (b'{"type":"host.ping","id":true}', BAD, "host.ping", None),
    "id false": (b'{"type":"host.ping","id":false}', BAD, "host.ping", None),
    "id float": (b'{"type":"host.ping","id":1.5}', BAD, "host.ping", None),
    "id integral float": (b'{"type":"host.ping","id":1.0}', BAD, "host.ping", None),
    "id object": (b'{"type":"host.ping","id":{"a":1}}', BAD, "host.ping", None),
    "id list": (b'{"type":"host.status","id":[1]}', BAD, "host.status", None),
    "bad id and bad type": (b'{"type":5,"id":true}', BAD, "", None),
    "payload list": (
        b'{"type":"host.attach","id":"r5","payload":[1]}',
        INVALID,
        "host.attach",
        "r5",
    ),
    "payload string": (b'{"type":"host.send","id":6,"payload":"hi"}', INVALID, "host.send", 6),
    "payload number": (b'{"type":"host.ping","payload":0}', INVALID, "host.ping", None),
    "payload bool": (b'{"type":"host.ping","payload":false}', INVALID, "host.ping", None),
    "deep nesting": (DEEP, BAD, "", None),
    "deep nesting in payload": (
        b'{"type":"host.ping","id":"r","payload":{"a":' + DEEP + b"}}",
        BAD,
        "",
        None,
    ),
    "deep nesting of objects": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, BAD, "", None),
    "huge integer id": (b'{"type":"host.ping","id":' + b"9" * 5000 + b"}", BAD, "", None),
    "huge integer offset": (
        b'{"type":"host.attach","payload":{"offset":' + b"1" * 100_000 + b"}}",
        BAD,
        "",
        None,
    ),
    "version 2.0": (
        b'{"type":"host.ping","id":"v","protocol_version":"2.0"}',
        VERSION,
        "host.ping",
        "v",
    ),
    "version 0.9": (b'{"type":"host.ping","protocol_version":"0.9"}', VERSION, "host.ping", None),
    "version 10.0": (b'{"type":"host.list","protocol_version":"10.0"}', VERSION, "host.list", None),
    "version abc": (b'{"type":"host.ping","id":1,"protocol_version":"abc"}', BAD, "host.ping", 1),
    "version 1": (b'{"type":"host.ping","protocol_version":"1"}', BAD, "host.ping", None),
    "version 1.2.3": (b'{"type":"host.ping","protocol_version":"1.2.3"}', BAD, "host.ping", None),
    "version empty": (b'{"type":"host.ping","protocol_version":""}', BAD, "host.ping", None),
    "version v1.0": (b'{"type":"host.ping","protocol_version":"v1.0"}', BAD, "host.ping", None),
    "version 1.": (b'{"type":"host.ping","protocol_version":"1."}', BAD, "host.ping", None),
    "version -1.0": (b'{"type":"host.ping","protocol_version":"-1.0"}', BAD, "host.ping", None),
    "version spaces": (b'{"type":"host.ping","protocol_version":" 1.0"}', BAD, "host.ping", None),
    "version newline": (
        b'{"type":"host.ping","protocol_version":"1.0\\n"}',
        BAD,
        "host.ping",
        None,
    ),
    "version number": (b'{"type":"host.ping","protocol_version":1.0}', BAD, "host.ping", None),
    "version list": (b'{"type":"host.ping","protocol_version":[1,0]}', BAD, "host.ping", None),
}


@pytest.mark.parametrize(
    ("frame", "code", "request_type", "request_id"),
    list(BAD_FRAMES.values()),
    ids=list(BAD_FRAMES),
)
def test_decode_request_rejects(
    frame: bytes, code: ErrorCode, request_type: str, request_id: str | int | None
) -> None:
    with pytest.raises(RequestError) as info:
        decode_request(frame)
    err = info.value
    assert err.code == code
    assert err.request_type == request_type
    assert err.request_id == request_id
    assert isinstance(err, ProtocolError)
    assert err.message
    assert len(err.message) < 1000  # no echo of a huge frame


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-32-le"], ids=str)
def test_decode_request_accepts_only_utf8(encoding: str) -> None:
    """The transport is UTF-8 (DESIGN §3); other encodings are not JSON text for us."""
    frame = '{"type":"host.ping","id":"r"}'.encode(encoding)
    with pytest.raises(RequestError) as info:
        decode_request(frame)
    assert info.value.code == BAD


# (frame, expected Request fields)
GOOD_FRAMES: dict[str, tuple[bytes, dict[str, Any]]] = {
    "minimal": (b'{"type":"host.ping"}', {"type": "host.ping", "id": None, "payload": None}),
    "string id": (b'{"type":"host.ping","id":"r1"}', {"id": "r1"}),
    "empty string id": (b'{"type":"host.ping","id":""}', {"id": ""}),
    "int id": (b'{"type":"host.ping","id":7}', {"id": 7}),
    "zero id": (b'{"type":"host.ping","id":0}', {"id": 0}),
    "negative id": (b'{"type":"host.ping","id":-3}', {"id": -3}),
    "big id": (
        b'{"type":"host.ping","id":123456789012345678901234567890}',
        {"id": 123456789012345678901234567890},
    ),
    "null id": (b'{"type":"host.ping","id":null}', {"id": None}),
    "unicode id": ('{"type":"host.ping","id":"ré✓"}'.encode(), {"id": "ré✓"}),
    "unknown fields ignored": (
        b'{"type":"host.ping","foo":1,"kind":"x","bar":{"b":[1]}}',
        {"type": "host.ping"},
    ),
    "empty payload": (b'{"type":"host.ping","payload":{}}', {"payload": {}}),
    "null payload": (b'{"type":"host.ping","payload":null}', {"payload": None}),
    "payload": (
        b'{"type":"host.attach","id":"a","payload":{"offset":5}}',
        {"type": "host.attach", "payload": {"offset": 5}},
    ),
    "unknown type decodes": (b'{"type":"host.nope"}', {"type": "host.nope"}),
    "whitespace around": (b'  {"type" : "host.ping" }  ', {"type": "host.ping"}),
    "trailing newline": (b'{"type":"host.ping"}\n', {"type": "host.ping"}),
    "version 1.0": (b'{"type":"host.ping","protocol_version":"1.0"}', {"protocol_version": "1.0"}),
    "version 1.9": (b'{"type":"host.ping","protocol_version":"1.9"}', {"protocol_version": "1.9"}),
    "version 1.10": (
        b'{"type":"host.ping","protocol_version":"1.10"}',
        {"protocol_version": "1.10"},
    ),
    "version 1.999999999": (
        b'{"type":"host.ping","protocol_version":"1.999999999"}',
        {"protocol_version": "1.999999999"},
    ),
    "version null": (b'{"type":"host.ping","protocol_version":null}', {"protocol_version": None}),
    "escaped type": (b'{"type":"host.\\u0070ing"}', {"type": "host.ping"}),
}


@pytest.mark.parametrize(("frame", "expected"), list(GOOD_FRAMES.values()), ids=list(GOOD_FRAMES))
def test_decode_request_accepts(frame: bytes, expected: dict[str, Any]) -> None:
    request = decode_request(frame)
    assert isinstance(request, Request)
    for key, value in expected.items():
        got = getattr(request, key)
        assert got == value, key
        assert type(got) is type(value), key  # 7 stays an int, "7" a str


def test_decode_request_id_type_is_preserved() -> None:
    assert decode_request(b'{"type":"host.ping","id":"7"}').id == "7"
    assert decode_request(b'{"type":"host.ping","id":7}').id == 7


# --- validate_payload --------------------------------------------------------------------


def _request(rtype: str, payload: dict[str, Any] | None, rid: str | int | None = "r") -> Request:
    frame = {"type": rtype, "id": rid}
    if payload is not None:
        frame["payload"] = payload
    return decode_request(json.dumps(frame).encode())


# (type, payload, expected model)
GOOD_PAYLOADS: dict[str, tuple[str, dict[str, Any] | None, Any]] = {
    "ping": ("host.ping", None, EmptyRequest()),
    "ping ignores fields": ("host.ping", {"x": 1}, EmptyRequest()),
    "status": ("host.status", {}, EmptyRequest()),
    "list": ("host.list", None, EmptyRequest()),
    "detach": ("host.detach", None, EmptyRequest()),
    "attach default": ("host.attach", None, AttachRequest(offset=0)),
    "attach 0": ("host.attach", {"offset": 0}, AttachRequest(offset=0)),
    "attach 5": ("host.attach", {"offset": 5}, AttachRequest(offset=5)),
    "attach huge": ("host.attach", {"offset": 10**30}, AttachRequest(offset=10**30)),
    "attach extra field": ("host.attach", {"offset": 1, "x": "y"}, AttachRequest(offset=1)),
    "history default": ("host.history", {}, HistoryRequest(limit=0)),
    "history 10": ("host.history", {"limit": 10}, HistoryRequest(limit=10)),
    "send": ("host.send", {"input": "hi"}, SendRequest(input="hi")),
    "send empty": ("host.send", {"input": ""}, SendRequest(input="")),
    "send key": ("host.send", {"input": "x", "key": "k1"}, SendRequest(input="x", key="k1")),
    "send key 200": (
        "host.send",
        {"input": "x", "key": "k" * 200},
        SendRequest(input="x", key="k" * 200),
    ),
    "send unicode": ("host.send", {"input": "héllo\n✓"}, SendRequest(input="héllo\n✓")),
    "stop default": ("host.stop", None, StopRequest(force=False, timeout=0, reason="")),
    "stop int timeout": ("host.stop", {"timeout": 5}, StopRequest(timeout=5.0)),
    "stop float timeout": ("host.stop", {"timeout": 2.5}, StopRequest(timeout=2.5)),
    "stop zero timeout": ("host.stop", {"timeout": 0}, StopRequest(timeout=0.0)),
    "stop max timeout": ("host.stop", {"timeout": 86400}, StopRequest(timeout=86400.0)),
    "stop force": (
        "host.stop",
        {"force": True, "reason": "bye"},
        StopRequest(force=True, reason="bye"),
    ),
}


@pytest.mark.parametrize(
    ("rtype", "payload", "expected"), list(GOOD_PAYLOADS.values()), ids=list(GOOD_PAYLOADS)
)
def test_validate_payload_accepts(
    rtype: str, payload: dict[str, Any] | None, expected: Any
) -> None:
    mtype, model = validate_payload(_request(rtype, payload))
    assert mtype == MessageType(rtype)
    assert type(model) is type(expected)
    assert model == expected


def test_stop_timeout_keeps_float_type() -> None:
    _, model = validate_payload(_request("host.stop", {"timeout": 5}))
    assert isinstance(model, StopRequest)
    assert isinstance(model.timeout, float)
    assert model.timeout == 5.0


BAD_PAYLOADS: dict[str, tuple[str, bytes]] = {
    "offset negative": ("host.attach", b'{"offset":-1}'),
    "offset string": ("host.attach", b'{"offset":"5"}'),
    "offset true": ("host.attach", b'{"offset":true}'),
    "offset false": ("host.attach", b'{"offset":false}'),
    "offset float": ("host.attach", b'{"offset":1.5}'),
    "offset integral float": ("host.attach", b'{"offset":5.0}'),
    "offset null": ("host.attach", b'{"offset":null}'),
    "offset list": ("host.attach", b'{"offset":[5]}'),
    "limit negative": ("host.history", b'{"limit":-1}'),
    "limit string": ("host.history", b'{"limit":"10"}'),
    "limit true": ("host.history", b'{"limit":true}'),
    "send without input": ("host.send", b"{}"),
    "send input number": ("host.send", b'{"input":5}'),
    "send input null": ("host.send", b'{"input":null}'),
    "send input list": ("host.send", b'{"input":["a"]}'),
    "send key number": ("host.send", b'{"input":"x","key":5}'),
    "send key too long": ("host.send", b'{"input":"x","key":"' + b"k" * 201 + b'"}'),
    "stop timeout string": ("host.stop", b'{"timeout":"5"}'),
    "stop timeout negative": ("host.stop", b'{"timeout":-1}'),
    "stop timeout negative float": ("host.stop", b'{"timeout":-0.5}'),
    "stop timeout NaN": ("host.stop", b'{"timeout":NaN}'),
    "stop timeout Infinity": ("host.stop", b'{"timeout":Infinity}'),
    "stop timeout -Infinity": ("host.stop", b'{"timeout":-Infinity}'),
    "stop timeout too big": ("host.stop", b'{"timeout":86401}'),
    "stop timeout true": ("host.stop", b'{"timeout":true}'),
    "stop timeout null": ("host.stop", b'{"timeout":null}'),
    "stop force string": ("host.stop", b'{"force":"yes"}'),
    "stop force int": ("host.stop", b'{"force":1}'),
    "stop reason number": ("host.stop", b'{"reason":5}'),
}


@pytest.mark.parametrize(("rtype", "payload"), list(BAD_PAYLOADS.values()), ids=list(BAD_PAYLOADS))
def test_validate_payload_rejects(rtype: str, payload: bytes) -> None:
    frame = b'{"type":"' + rtype.encode() + b'","id":"q9","payload":' + payload + b"}"
    request = decode_request(frame)
    with pytest.raises(RequestError) as info:
        validate_payload(request)
    err = info.value
    assert err.code == INVALID
    assert err.request_type == rtype
    assert err.request_id == "q9"
    assert rtype in err.message


@pytest.mark.parametrize(
    "rtype",
    ["host.nope", "HOST.PING", "host.ping ", "ping", "host.", "x", "héllo✓", "host.ping\n"],
)
def test_validate_payload_unknown_type(rtype: str) -> None:
    request = _request(rtype, {"offset": 1}, rid=11)
    with pytest.raises(RequestError) as info:
        validate_payload(request)
    err = info.value
    assert err.code == ErrorCode.UNKNOWN_TYPE
    assert err.message == f"unknown message type: {rtype}"
    assert str(err) == f"unknown message type: {rtype}"
    assert err.request_type == rtype
    assert err.request_id == 11


def test_unknown_type_error_response_echoes_type() -> None:
    request = decode_request(b'{"type":"host.bogus","id":"z"}')
    with pytest.raises(RequestError) as info:
        validate_payload(request)
    err = info.value
    response = decode_message(encode_error(err.request_type, err.request_id, err.code, err.message))
    assert isinstance(response, Response)
    assert response.success is False
    assert (response.type, response.id, response.code) == ("host.bogus", "z", "unknown_type")
    assert response.error == "unknown message type: host.bogus"


# --- encode / decode round trips ---------------------------------------------------------

request_ids = st.one_of(
    st.none(), st.text(max_size=20), st.integers(min_value=-(2**63), max_value=2**63)
)


def _payload_for(mtype: MessageType, n: int, text: str) -> dict[str, Any] | None:
    return {
        MessageType.ATTACH: {"offset": n},
        MessageType.HISTORY: {"limit": n},
        MessageType.SEND: {"input": text, "key": text[:200]},
        MessageType.STOP: {"force": n % 2 == 0, "timeout": n % 86400, "reason": text},
        MessageType.RESPOND: {
            "request_id": f"r{n}",
            "behavior": "allow" if n % 2 else "deny",
            "message": text,
        },
        MessageType.INPUT: {"data": text},
        MessageType.RESIZE: {"cols": 2 + n % 999, "rows": 1 + n % 1000},
        MessageType.SIGNAL: {"signal": "SIGINT"},
        MessageType.SCREEN: {"offset": 1 + n},
    }.get(mtype)


@HYPO
@given(
    mtype=st.sampled_from(list(MessageType)),
    rid=request_ids,
    n=st.integers(min_value=0, max_value=2**62),
    text=st.text(max_size=300),
)
def test_encode_request_roundtrip(
    mtype: MessageType, rid: str | int | None, n: int, text: str
) -> None:
    payload = _payload_for(mtype, n, text)
    frame = encode_request(mtype, payload, request_id=rid)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    request = decode_request(frame[:-1])
    assert request.type == mtype.value
    assert request.id == rid
    assert request.protocol_version == PROTOCOL_VERSION
    assert request.payload == payload
    got_type, model = validate_payload(request)
    assert got_type is mtype
    dumped = model.model_dump()
    for key, value in (payload or {}).items():
        assert dumped[key] == value, key


def test_encode_request_without_version_and_empty_payload() -> None:
    frame = encode_request("host.ping", {}, protocol_version=None)
    assert json.loads(frame) == {"type": "host.ping"}
    request = decode_request(frame)
    assert request.protocol_version is None
    assert request.payload is None
    assert request.id is None


@HYPO
@given(rtype=st.text(max_size=30), rid=request_ids, text=st.text(max_size=50))
def test_encode_response_dict_roundtrip(rtype: str, rid: str | int | None, text: str) -> None:
    frame = encode_response(rtype, rid, {"text": text, "n": [1, 2.5, None, True]})
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    response = decode_message(frame)
    assert isinstance(response, Response)
    frame.decode("utf-8")  # strictly valid UTF-8
    # a frame with an escaped lone surrogate (another host's encoder) is read too
    assert decode_message(b'{"kind":"response","type":"\\ud800","success":false}').success is False
    assert response.kind == "response"
    assert response.success is True
    assert (response.type, response.id) == (rtype, rid)
    assert response.error is None and response.code is None
    assert response.payload == {"text": text, "n": [1, 2.5, None, True]}


@HYPO
@given(
    rtype=st.text(max_size=30),
    rid=request_ids,
    code=st.sampled_from(list(ErrorCode)),
    message=st.text(max_size=100),
)
def test_encode_error_roundtrip(
    rtype: str, rid: str | int | None, code: ErrorCode, message: str
) -> None:
    frame = encode_error(rtype, rid, code, message)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    obj = json.loads(frame)
    assert obj["code"] == code.value  # the plain string, not the enum repr
    response = decode_message(frame)
    assert isinstance(response, Response)
    frame.decode("utf-8")  # strictly valid UTF-8
    # a frame with an escaped lone surrogate (another host's encoder) is read too
    assert decode_message(b'{"kind":"response","type":"\\ud800","success":false}').success is False
    assert response.success is False
    assert (response.type, response.id) == (rtype, rid)
    assert response.code == code.value
    assert response.error == message
    assert response.payload is None


def test_encode_response_without_payload() -> None:
    frame = encode_response("host.detach", "d1")
    assert json.loads(frame) == {
        "kind": "response",
        "type": "host.detach",
        "id": "d1",
        "success": True,
    }
    response = decode_message(frame)
    assert isinstance(response, Response)
    frame.decode("utf-8")  # strictly valid UTF-8
    # a frame with an escaped lone surrogate (another host's encoder) is read too
    assert decode_message(b'{"kind":"response","type":"\\ud800","success":false}').success is False
    assert response.payload is None
    assert "error" not in json.loads(frame) and "code" not in json.loads(frame)


T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)

RESPONSE_MODELS: dict[str, Any] = {
    "ping": PingResponse(
        version="0.1.0",
        protocol_version="1.0",
        min_protocol_version="1.0",
        uptime="1h2m3s",
        uptime_seconds=3723.5,
        started_at=T0,
    ),
    "status": StatusResponse(
        host=HostInfo(
            pid=10,
            version="0.1.0",
            protocol_version="1.0",
            started_at=T0,
            socket_path="/tmp/a.sock",
        ),
        agent=AgentInfo(id="a1", state="running", pid=11, started_at=T0, exit_code=None),
    ),
    "attach": AttachResponse(
        agent_id="a1", stream_offset=7, oldest_offset=3, truncated=True, epoch="e"
    ),
    "history": HistoryResponse(
        agent_id="a1",
        entries=[
            HistoryEntry(role="user", content="hi", timestamp=T0, offset=2),
            HistoryEntry(
                role="tool",
                tool_name="Bash",
                tool_input="ls",
                input={"command": "ls"},
                timestamp=T0,
                tool_use_id="t1",
            ),
        ],
        offset=9,
        total=2,
    ),
    "send": SendResponse(offset=4),
    "stop": StopResponse(
        stopped=True,
        exit_code=-9,
        signal="SIGKILL",
        graceful=False,
        duration="2.5s",
        duration_seconds=2.5,
        final_state="error",
    ),
}


@pytest.mark.parametrize("model", list(RESPONSE_MODELS.values()), ids=list(RESPONSE_MODELS))
def test_encode_response_model_roundtrip(model: Any) -> None:
    frame = encode_response("host.x", 1, model)
    response = decode_message(frame)
    assert isinstance(response, Response)
    frame.decode("utf-8")  # strictly valid UTF-8
    # a frame with an escaped lone surrogate (another host's encoder) is read too
    assert decode_message(b'{"kind":"response","type":"\\ud800","success":false}').success is False
    assert response.success is True
    assert response.payload is not None
    assert type(model).model_validate(response.payload) == model
    # exclude_none: absent optional fields are not sent as null
    assert None not in _leaves(response.payload)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_decode_message_ignores_kinds_it_does_not_know() -> None:
    # docs/protocol.md: "ignore values of kind that you do not know"
    assert decode_message(b'{"kind":"nope","type":"x"}') is None
    assert decode_message(b'{"kind":"notice","type":"gap","whatever":[1,2]}') is None


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"not json",
        b"[]",
        b'{"kind":7,"type":"x"}',  # a kind that is not even a string
        b'{"kind":"response","type":"host.ping"}',  # no success
        b'{"kind":"event","type":"output","agent_id":"a"}',  # no offset, timestamp
        b'{"kind":"event","type":"output","agent_id":"a","offset":"x","timestamp":"t"}',
        # without kind (a 1.0 host as first published): still checked
        b'{"type":"host.ping","success":"maybe"}',
        b'{"type":"host.ping","success":true,"payload":[1]}',
        b'{"type":"output","agent_id":"a","offset":"x","timestamp":"t"}',
        b'{"type":"output","agent_id":"a","offset":1}',
        b'{"type":"state","agent_id":"a","offset":1,"timestamp":"t","state":7}',
        b"\xff\xfe{}",
        b"42",
        b'"text"',
        b"null",
        DEEP,
    ],
)
def test_decode_message_rejects(frame: bytes) -> None:
    with pytest.raises(ProtocolError, match="^malformed frame from host: "):
        decode_message(frame)


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        (b"not json", "not JSON"),
        (b"\xff{}", "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b'{"kind":"event","type":"x","agent_id":"a","offset":"x","timestamp":"t"}', "offset"),
        (b'{"type":"host.ping","success":true,"payload":[1]}', "payload"),
    ],
)
def test_decode_message_says_what_is_wrong(frame: bytes, says: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_message(frame)
    assert says in str(info.value)
    assert "discriminator" not in str(info.value)


# --- hosts of protocol 1.0 as first published (no kind, Go field names) ------------------


def test_a_frame_without_kind_that_has_success_is_a_response() -> None:
    response = decode_message(b'{"type":"host.ping","id":"c1","success":true,"payload":{}}')
    assert isinstance(response, Response)
    assert (response.id, response.success, response.payload) == ("c1", True, {})
    failed = decode_message(b'{"type":"host.x","id":"c2","success":false,"error":"no"}')
    assert isinstance(failed, Response)
    assert (failed.success, failed.error, failed.code) == (False, "no", None)


def test_a_frame_without_kind_or_success_is_an_event() -> None:
    event = decode_message(
        b'{"type":"state","agent_id":"a","offset":4,'
        b'"timestamp":"2025-03-01T14:00:00.123456789+01:00","state":"idle"}'
    )
    assert isinstance(event, StreamEvent)
    assert (event.type, event.offset, event.state) == ("state", 4, "idle")
    assert event.timestamp == datetime(2025, 3, 1, 13, 0, 0, 123456, tzinfo=UTC)


def test_a_chat_entry_of_another_shape_is_delivered_as_raw_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    frame = (
        b'{"type":"chat_entry","agent_id":"a","offset":7,"timestamp":"2025-03-01T14:00:00Z",'
        b'"chat_entry":{"Role":"assistant","Content":"Hello","Timestamp":"2025-03-01T14:00:00Z"}}'
    )
    with caplog.at_level("INFO", logger="agenthost.protocol"):
        event = decode_message(frame)
    assert isinstance(event, StreamEvent)
    assert event.type == "chat_entry" and event.offset == 7 and event.chat_entry is None
    assert json.loads(event.data or "") == {
        "Role": "assistant",
        "Content": "Hello",
        "Timestamp": "2025-03-01T14:00:00Z",
    }
    assert "unknown shape at offset 7" in caplog.text and "Role" in caplog.text
    # the same with kind, and with an entry that is not even an object
    with_kind = decode_message(frame.replace(b"{", b'{"kind":"event",', 1))
    assert isinstance(with_kind, StreamEvent) and with_kind.data == event.data
    odd = decode_message(frame.split(b',"chat_entry"')[0] + b',"chat_entry":"hi"}')
    assert isinstance(odd, StreamEvent) and odd.chat_entry is None and odd.data == '"hi"'


def test_a_well_formed_chat_entry_without_kind_is_parsed() -> None:
    event = decode_message(
        b'{"type":"chat_entry","agent_id":"a","offset":7,"timestamp":"2025-03-01T14:00:00Z",'
        b'"chat_entry":{"role":"user","content":"hi","timestamp":"2025-03-01T14:00:00Z"}}'
    )
    assert isinstance(event, StreamEvent)
    assert event.chat_entry is not None and event.chat_entry.content == "hi"
    assert event.data is None


def test_a_send_response_without_offset_is_a_success_without_offset() -> None:
    sent = SendResponse.model_validate({})
    assert sent.offset is None and sent.duplicate is False


def _failed(mtype: str, error: str, code: str | None = None) -> Response:
    return Response(type=mtype, success=False, error=error, code=code)


@pytest.mark.parametrize(
    ("response", "host_version", "code"),
    [
        (_failed("host.x", "whatever", "busy"), None, "busy"),  # a code wins
        (_failed("host.x", "unknown message type: host.x"), None, "unknown_type"),
        (_failed("host.x", "Unknown type host.x"), "1.0", "unknown_type"),
        (_failed("host.send", "agent is not running"), "1.0", "agent_not_running"),
        (_failed("host.interrupt", "no such thing"), "1.0", "unknown_type"),  # newer than 1.0
        (_failed("host.interrupt", "no such thing"), "1.1", None),
        (_failed("host.interrupt", "no such thing"), None, None),
        (_failed("host.interrupt", "no such thing"), "garbage", None),
        (_failed("host.send", "disk on fire"), "1.0", None),
    ],
)
def test_response_error_code_for_hosts_that_send_none(
    response: Response, host_version: str | None, code: str | None
) -> None:
    assert response_error_code(response, host_version) == code


def test_our_frames_keep_the_fast_path() -> None:
    """Frames of our own hosts never take the liberal second parse (it would cost
    them a json.loads each): they decode the same with it removed."""
    enc = EventEncoder("a1")
    frames = [
        enc.output(1, "2025-01-01T00:00:00Z", "hi", "stdout"),
        enc.event("state", 2, "2025-01-01T00:00:00Z", {"state": "idle"}),
        encode_response("host.ping", "r1", {"x": 1}),
        encode_error("host.x", "r2", ErrorCode.UNKNOWN_TYPE, "unknown message type: host.x"),
    ]
    for frame in frames:
        MESSAGE_ADAPTER.validate_json(frame.rstrip(b"\n"))  # raises if it would not


def test_decode_message_ignores_unknown_response_fields_and_keeps_unknown_event_fields() -> None:
    response = decode_message(b'{"kind":"response","type":"t","id":1,"success":true,"new":1}')
    assert isinstance(response, Response)
    event = decode_message(
        b'{"kind":"event","type":"fancy","agent_id":"a","offset":3,'
        b'"timestamp":"2024-01-01T00:00:00Z","sparkle":{"x":1}}'
    )
    assert isinstance(event, StreamEvent)
    assert event.type == "fancy"
    assert event.model_extra == {"sparkle": {"x": 1}}


# --- event encoder -----------------------------------------------------------------------

timestamps = st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False).map(rfc3339)
agent_ids = st.text(min_size=1, max_size=64)


@HYPO
@given(
    agent_id=agent_ids,
    offset=st.integers(min_value=1, max_value=2**63),
    ts=timestamps,
    data=st.text(max_size=300),
    stream=st.sampled_from(["stdout", "stderr"]),
    continued=st.booleans(),
)
def test_event_encoder_output(
    agent_id: str, offset: int, ts: str, data: str, stream: str, continued: bool
) -> None:
    line = EventEncoder(agent_id).output(offset, ts, data, stream, continued)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    obj = json.loads(line)
    expected = {
        "kind": "event",
        "type": "output",
        "agent_id": agent_id,
        "offset": offset,
        "timestamp": ts,
        "stream": stream,
        "data": data,
    }
    if continued:
        expected["continued"] = True
    assert obj == expected
    event = decode_message(line)  # the client's path
    assert isinstance(event, StreamEvent)
    assert (event.type, event.agent_id, event.offset, event.data) == (
        "output",
        agent_id,
        offset,
        data,
    )
    assert event.stream == stream
    assert event.continued is (True if continued else None)
    assert event.timestamp == datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert event.model_extra == {}


def test_event_encoder_output_special_characters() -> None:
    data = 'a"b\\c\nd\re\tf\x00g\x1f\x7fh\u2028i\u2029j✓😀'
    line = EventEncoder("a").output(1, "2024-01-01T00:00:00.000000Z", data, "stdout")
    assert line.count(b"\n") == 1
    assert b"\r" not in line and b"\x00" not in line
    event = decode_message(line)
    assert isinstance(event, StreamEvent)
    assert event.data == data


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=()), max_size=20),  # lone surrogates too
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.text(st.characters(exclude_categories=()), max_size=8), inner, max_size=4
        ),
    ),
    max_leaves=20,
)
_KNOWN = set(StreamEvent.model_fields)
extra_keys = st.text(st.characters(exclude_categories=()), max_size=10).filter(
    lambda k: k not in _KNOWN
)


def _no_lone_surrogates(value: Any) -> Any:
    """What the encoder promises to write: lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [_no_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_lone_surrogates(k): _no_lone_surrogates(v) for k, v in value.items()}
    return value


@HYPO
@given(
    # agent ids are validated ASCII and event types are ours: no surrogates there
    agent_id=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20),
    event_type=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20),
    offset=st.integers(min_value=1, max_value=2**63),
    ts=timestamps,
    fields=st.dictionaries(extra_keys, json_values, max_size=5),
)
def test_event_encoder_event_generic(
    agent_id: str, event_type: str, offset: int, ts: str, fields: dict[str, Any]
) -> None:
    line = EventEncoder(agent_id).event(event_type, offset, ts, fields)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    # valid UTF-8 for any decoder: lone surrogates (JSON the agent sent) become U+FFFD
    obj = json.loads(line.decode("utf-8", errors="strict"))
    assert obj == {
        "kind": "event",
        "type": event_type,
        "agent_id": agent_id,
        "offset": offset,
        "timestamp": ts,
        **_no_lone_surrogates(fields),
    }
    event = StreamEvent.model_validate(obj)
    assert (event.type, event.agent_id, event.offset) == (event_type, agent_id, offset)
    assert event.model_extra == _no_lone_surrogates(fields)


def _entry(**kw: Any) -> dict[str, Any]:
    return {"role": "tool", "timestamp": "2024-01-01T00:00:00.000000Z", **kw}


KNOWN_EVENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "state": ("state", {"state": "running"}),
    "error": ("error", {"error": 'agent printed "x"\n'}),
    "result": ("result", {"result": {"subtype": "success", "cost_usd": 0.01, "usage": {"a": 1}}}),
    "chat entry": (
        "chat_entry",
        {
            "chat_entry": _entry(
                tool_name="Bash",
                tool_input="ls -l",
                input={"command": "ls -l"},
                tool_use_id="t1",
                is_error=False,
            )
        },
    ),
    "chat entry non-ascii": ("chat_entry", {"chat_entry": _entry(content="héllo ✓ 😀\n")}),
    "no fields": ("state", {}),
}


@pytest.mark.parametrize(("etype", "fields"), list(KNOWN_EVENTS.values()), ids=list(KNOWN_EVENTS))
def test_event_encoder_known_events_decode_on_client(etype: str, fields: dict[str, Any]) -> None:
    line = EventEncoder("agent-1").event(etype, 42, "2024-01-01T00:00:00.000000Z", fields)
    event = decode_message(line)
    assert isinstance(event, StreamEvent)
    assert (event.type, event.agent_id, event.offset) == (etype, "agent-1", 42)
    dumped = event.model_dump(mode="json", exclude_none=True)
    for key, value in fields.items():
        assert dumped[key] == value


LONE_SURROGATE_EVENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "error": ("error", {"error": "bad \udcff byte"}),
    "chat content": ("chat_entry", {"chat_entry": _entry(content="cut emoji \ud83d")}),
    "result": ("result", {"result": {"subtype": "\udc80"}}),
}


@pytest.mark.parametrize(
    ("etype", "fields"), list(LONE_SURROGATE_EVENTS.values()), ids=list(LONE_SURROGATE_EVENTS)
)
def test_event_with_lone_surrogate_decodes_on_client(etype: str, fields: dict[str, Any]) -> None:
    """EventEncoder.event replaces lone surrogates by U+FFFD, so the client's
    decode_message reads what the host sends; otherwise the client's connection would
    fail on this event (and again on every reattach that replays it)."""
    line = EventEncoder("a").event(etype, 1, "2024-01-01T00:00:00.000000Z", fields)
    assert "\ufffd" in line.decode("utf-8")
    assert StreamEvent.model_validate(json.loads(line)).type == etype
    assert decode_message(line) == StreamEvent.model_validate(json.loads(line))


def test_error_response_with_lone_surrogate_type_decodes_on_client() -> None:
    """An unknown request type is echoed in the error response; a client must read it."""
    request = decode_request(b'{"type":"\\ud800","id":1}')
    with pytest.raises(RequestError) as info:
        validate_payload(request)
    err = info.value
    frame = encode_error(err.request_type, err.request_id, err.code, err.message)
    response = decode_message(frame)
    assert isinstance(response, Response)
    frame.decode("utf-8")  # strictly valid UTF-8
    # a frame with an escaped lone surrogate (another host's encoder) is read too
    assert decode_message(b'{"kind":"response","type":"\\ud800","success":false}').success is False
    assert response.success is False
    assert response.code == "unknown_type"
    assert response.id == 1


def test_event_encoder_rejects_nan() -> None:
    with pytest.raises(ValueError):
        EventEncoder("a").event("result", 1, "t", {"result": {"x": math.nan}})


# --- versions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("1.0", (1, 0)), ("0.0", (0, 0)), ("1.9", (1, 9)), ("1.10", (1, 10)), ("12.345", (12, 345))],
)
def test_parse_version(text: str, parsed: tuple[int, int]) -> None:
    assert parse_version(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1.",
        ".1",
        "1.2.3",
        "abc",
        "v1.0",
        "01.0",
        "1.01",
        "-1.0",
        " 1.0",
        "1.0 ",
        "1.0\n",
        "1,0",
        "1.x",
        "١.٠",
        "1.0000000000",
    ],
)
def test_parse_version_rejects(text: str) -> None:
    with pytest.raises(ProtocolError):
        parse_version(text)


@pytest.mark.parametrize("value", [None, 1, 1.0, b"1.0", ["1", "0"]])
def test_parse_version_rejects_non_strings(value: Any) -> None:
    with pytest.raises(ProtocolError):
        parse_version(value)


@pytest.mark.parametrize(
    ("a", "b", "result"),
    [
        ("1.10", "1.9", 1),
        ("1.9", "1.10", -1),
        ("1.0", "1.0", 0),
        ("2.0", "1.99", 1),
        ("1.99", "2.0", -1),
        ("0.5", "0.5", 0),
        ("10.0", "9.0", 1),
    ],
)
def test_compare_versions(a: str, b: str, result: int) -> None:
    assert compare_versions(a, b) == result


@HYPO
@given(
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
)
def test_compare_versions_is_numeric(a: tuple[int, int], b: tuple[int, int]) -> None:
    va, vb = f"{a[0]}.{a[1]}", f"{b[0]}.{b[1]}"
    assert compare_versions(va, vb) == (a > b) - (a < b)
    assert compare_versions(vb, va) == -compare_versions(va, vb)


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        (PROTOCOL_VERSION, True),
        (MIN_PROTOCOL_VERSION, True),
        ("1.0", True),
        ("1.9", True),
        ("1.10", True),
        ("1.999", True),
        ("0.9", False),
        ("0.0", False),
        ("2.0", False),
        ("10.0", False),
    ],
)
def test_is_version_supported(version: str, supported: bool) -> None:
    assert is_version_supported(version) is supported


def test_is_version_supported_rejects_garbage() -> None:
    with pytest.raises(ProtocolError):
        is_version_supported("one")


def test_check_peer_version() -> None:
    check_peer_version("1.0")
    check_peer_version("1.7")
    check_peer_version("1.7", min_version="1.0")
    check_peer_version("1.7", min_version=PROTOCOL_VERSION)
    for bad in ("2.0", "0.9"):
        with pytest.raises(VersionUnsupported) as info:
            check_peer_version(bad)
        assert info.value.code == ErrorCode.VERSION_UNSUPPORTED
        assert info.value.hint
    # the peer demands more than we speak
    major, minor = parse_version(PROTOCOL_VERSION)
    with pytest.raises(VersionUnsupported):
        check_peer_version("1.5", min_version=f"{major}.{minor + 1}")
    with pytest.raises(VersionUnsupported):
        check_peer_version("1.5", min_version=f"{major + 1}.0")
    with pytest.raises(ProtocolError):
        check_peer_version("1.5", min_version="x")


# --- models ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), "2024-05-06T07:08:09.123456Z"),
        (datetime(2024, 5, 6, 7, 8, 9), "2024-05-06T07:08:09.000000Z"),  # naive = UTC
        (
            datetime(2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2))),
            "2024-05-06T07:08:09.000000Z",
        ),
        ("2024-05-06T07:08:09Z", "2024-05-06T07:08:09.000000Z"),
        ("2024-05-06T02:08:09-05:00", "2024-05-06T07:08:09.000000Z"),
    ],
)
def test_timestamps_serialize_as_rfc3339_z(value: Any, expected: str) -> None:
    entry = HistoryEntry(role="user", content="x", timestamp=value)
    assert entry.timestamp.utcoffset() == timedelta(0)
    dumped = entry.model_dump(mode="json")
    assert dumped["timestamp"] == expected
    assert dumped["timestamp"].endswith("Z")
    assert "+00:00" not in entry.model_dump_json()
    assert HistoryEntry.model_validate_json(entry.model_dump_json()) == entry


def test_agent_info_keeps_unknown_fields() -> None:
    data = {
        "id": "a1",
        "state": "running",
        "started_at": "2024-01-01T00:00:00Z",
        "future_field": {"x": [1, 2]},
        "another": "y",
    }
    info = AgentInfo.model_validate(data)
    assert info.model_extra == {"future_field": {"x": [1, 2]}, "another": "y"}
    dumped = info.model_dump(mode="json")
    assert dumped["future_field"] == {"x": [1, 2]}
    assert dumped["another"] == "y"
    assert dumped["project"] == "" and dumped["worktree"] == "" and dumped["pid"] == 0
    assert AgentInfo.model_validate_json(info.model_dump_json()) == info


def test_agent_info_is_frozen() -> None:
    info = AgentInfo(id="a", state="idle", started_at=T0)
    with pytest.raises(ValueError):
        info.state = "running"  # type: ignore[misc]


def test_peer_request_models_ignore_unknown_fields() -> None:
    model = AttachRequest.model_validate({"offset": 3, "future": True})
    assert model.model_extra is None
    assert "future" not in model.model_dump()


@pytest.mark.parametrize(
    "timeout", ["5", "5.0", True, -1, -0.001, math.nan, math.inf, -math.inf, None, [5]]
)
def test_stop_request_rejects_timeout(timeout: Any) -> None:
    with pytest.raises(ValueError):
        StopRequest.model_validate({"timeout": timeout})


@pytest.mark.parametrize(
    ("timeout", "expected"), [(0, 0.0), (5, 5.0), (2.5, 2.5), (86400, 86400.0)]
)
def test_stop_request_accepts_timeout(timeout: Any, expected: float) -> None:
    model = StopRequest.model_validate({"timeout": timeout})
    assert model.timeout == expected
    assert isinstance(model.timeout, float)


_LINE_BYTES = st.one_of(
    st.binary(max_size=40),  # anything: controls, quotes, invalid UTF-8
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.from_regex(rb"[ -~]{0,40}", fullmatch=True),  # plain printable ASCII: the fast path
)


@settings(max_examples=300)
@given(
    lines=st.lists(st.tuples(_LINE_BYTES, st.booleans()), max_size=12),
    first=st.integers(min_value=1, max_value=10**12),
    stream=st.sampled_from(["stdout", "stderr"]),
)
def test_output_lines_is_output_byte_for_byte(
    lines: list[tuple[bytes, bool]], first: int, stream: str
) -> None:
    ts = "2026-01-01T00:00:00.000001Z"
    raw = [Fragment(b) if fragment else b for b, fragment in lines]
    encoder = EventEncoder('a"1')
    got = encoder.output_lines(first, ts, raw, stream)
    want = []
    for i, line in enumerate(raw):
        try:
            text, escaped = line.decode(), False
        except UnicodeDecodeError:
            text, escaped = line.decode("utf-8", "backslashreplace"), True
        want.append(encoder.output(first + i, ts, text, stream, type(line) is Fragment, escaped))
    assert got == want
    for i, data in enumerate(got):  # and each is a valid StreamEvent frame
        event = decode_message(data)
        assert isinstance(event, StreamEvent) and event.offset == first + i


# --- str(): readable one-liners ----------------------------------------------------------

TS = "2025-01-01T00:00:00Z"


def _event(**fields: Any) -> StreamEvent:
    return StreamEvent.model_validate({"agent_id": "a", "timestamp": TS, **fields})


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        (
            {
                "type": "chat_entry",
                "offset": 12,
                "chat_entry": {"role": "assistant", "content": "Hello", "timestamp": TS},
            },
            "#12 chat_entry assistant: Hello",
        ),
        ({"type": "state", "offset": 13, "state": "idle"}, "#13 state idle"),
        ({"type": "output", "offset": 4, "data": "hi", "stream": "stdout"}, "#4 output hi"),
        (
            {"type": "output", "offset": 5, "data": "oops", "stream": "stderr"},
            "#5 output stderr: oops",
        ),
        ({"type": "error", "offset": 6, "error": "turn failed: 500"}, "#6 error turn failed: 500"),
        (
            {"type": "result", "offset": 7, "result": {"subtype": "success"}},
            "#7 result done (success)",
        ),
        ({"type": "result", "offset": 8, "result": {"is_error": True}}, "#8 result failed"),
        (
            {
                "type": "permission_request",
                "offset": 9,
                "request": {
                    "request_id": "r1",
                    "tool_name": "Bash",
                    "tool_input": "ls",
                    "created_at": TS,
                },
            },
            "#9 permission_request Bash: ls (request r1)",
        ),
        (
            {
                "type": "permission_response",
                "offset": 10,
                "decision": {"request_id": "r1", "behavior": "deny", "message": "no"},
            },
            "#10 permission_response deny r1: no",
        ),
        ({"type": "sparkle", "offset": 11}, "#11 sparkle"),
    ],
)
def test_events_print_as_one_readable_line(fields: dict[str, Any], text: str) -> None:
    event = _event(**fields)
    assert str(event) == text
    assert repr(event).startswith("StreamEvent(kind='event', ")  # repr keeps every field


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"role": "user", "content": "hi", "offset": 2}, "#2 user: hi"),
        ({"role": "assistant", "content": "Hello"}, "assistant: Hello"),
        ({"role": "tool", "tool_name": "Bash", "tool_input": "wc -w"}, "tool Bash: wc -w"),
        ({"role": "tool", "tool_name": "Bash", "tool_result": "1"}, "tool Bash result: 1"),
        ({"role": "tool", "tool_result": "boom", "is_error": True}, "tool error: boom"),
    ],
)
def test_history_entries_print_as_one_readable_line(fields: dict[str, Any], text: str) -> None:
    entry = HistoryEntry.model_validate({"timestamp": TS, **fields})
    assert str(entry) == text
    assert repr(entry).startswith("HistoryEntry(role=")


def test_a_chat_entry_nested_near_the_recursion_limit_is_a_protocol_error_or_data() -> None:
    """Garbage for the liberal path: re-encoding an odd entry as data never escapes as
    a RecursionError, however deep the caller's stack is when the frame arrives."""
    import sys

    def at_depth(frames: int, frame: bytes) -> None:
        if frames:
            return at_depth(frames - 1, frame)
        try:
            event = decode_message(frame)
        except ProtocolError:
            return None
        assert isinstance(event, StreamEvent) and event.data
        return None

    limit = sys.getrecursionlimit()
    head = b'{"type":"chat_entry","agent_id":"a","offset":1,"timestamp":"2025-01-01T00:00:00Z"'
    for depth in range(limit - 60, limit + 5, 5):
        frame = head + b',"chat_entry":' + b"[" * depth + b"]" * depth + b"}"
        for frames in (0, 20, 40):
            at_depth(frames, frame)


@settings(max_examples=100)
@given(
    plain=st.lists(st.from_regex(rb"[ -~]{0,40}", fullmatch=True), min_size=1, max_size=12),
    odd=st.sampled_from([None, b'say "hi"', b"back\\slash", b"tab\there", b"caf\xc3\xa9", b"\xff"]),
    first=st.integers(min_value=1, max_value=10**12),
)
def test_a_batch_of_plain_lines_takes_one_check_and_gives_the_same_bytes(
    plain: list[bytes], odd: bytes | None, first: int
) -> None:
    # all plain: the batch path; one line that is not (quote, backslash, control,
    # non-ASCII, invalid UTF-8) or a fragment: the per-line path. Same bytes either way.
    ts = "2026-01-01T00:00:00.000001Z"
    encoder = EventEncoder("a1")
    batches: list[list[bytes]] = [plain, [*plain, Fragment(plain[0])]]
    if odd is not None:
        batches.append([*plain[:1], odd, *plain[1:]])
    for batch in batches:
        got = encoder.output_lines(first, ts, batch, "stdout")
        want = [
            b"".join(encoder.output_lines(first + i, ts, [line], "stdout"))
            if type(line) is not bytes or not line.isascii()
            else encoder.output(first + i, ts, line.decode(), "stdout")
            for i, line in enumerate(batch)
        ]
        assert got == want
