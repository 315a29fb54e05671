"""agenthost.wire.table: each service's message table, validating requests and decoding
the frames its clients receive; the same rules for the host and the daemon."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.daemon.protocol import (
    DAEMON_MESSAGES,
    DaemonMessageType,
    Notice,
    validate_daemon_payload,
)
from agenthost.errors import ErrorCode, ProtocolError
from agenthost.protocol import (
    HOST_MESSAGES,
    MessageType,
    Request,
    RequestError,
    Response,
    StreamEvent,
    encode_error,
    validate_payload,
)
from agenthost.wire.table import MessageTable

HYPO = settings(max_examples=300, deadline=None)
TS = "2026-01-01T00:00:00.000000Z"
TABLES: list[MessageTable[Any, Any]] = [HOST_MESSAGES, DAEMON_MESSAGES]
PEER = {"host": "host", "daemon": "the daemon"}


def event(**fields: Any) -> bytes:
    obj = {"kind": "event", "type": "output", "agent_id": "a", "offset": 4, "timestamp": TS}
    obj.update(fields)
    return json.dumps(obj).encode()  # ensure_ascii: "\ud800" travels as its escape


def request(rtype: str, payload: dict[str, Any] | None = None, rid: str | int = 7) -> Request:
    return Request(type=rtype, id=rid, payload=payload)


# --- validate ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "rtype", "payload"),
    [
        (HOST_MESSAGES, "host.ping", None),
        (HOST_MESSAGES, "host.attach", {"offset": 10**30}),  # huge, but an offset
        (HOST_MESSAGES, "host.history", {"limit": 5, "before": 9}),
        (HOST_MESSAGES, "host.send", {"input": "hi \ud800"}),
        (HOST_MESSAGES, "host.stop", {"force": True, "timeout": 2.5, "new_field": 1}),
        (DAEMON_MESSAGES, "daemon.ping", {}),
        (DAEMON_MESSAGES, "daemon.spawn", {"agent_id": "w1", "ring_size": 10**30}),
        (DAEMON_MESSAGES, "daemon.watch", {"since": {"w1": {"epoch": "e", "offset": 3}}}),
        (DAEMON_MESSAGES, "daemon.forget", {"agent_id": "w1", "purge": True}),
    ],
)
def test_validate_accepts(
    table: MessageTable[Any, Any], rtype: str, payload: dict[str, Any] | None
) -> None:
    mtype, model = table.validate(request(rtype, payload))
    assert mtype == rtype and isinstance(mtype, table.types)
    assert isinstance(model, table.requests[mtype])


def test_a_lone_surrogate_in_send_input_becomes_a_replacement_character() -> None:
    _, model = HOST_MESSAGES.validate(request("host.send", {"input": "a\ud800b"}))
    assert model.model_dump()["input"] == "a\ufffdb"


@pytest.mark.parametrize(
    ("table", "rtype", "payload", "says"),
    [
        (HOST_MESSAGES, "host.attach", {"offset": "5"}, "offset: Input should be a valid integer"),
        (HOST_MESSAGES, "host.attach", {"offset": True}, "offset"),
        (HOST_MESSAGES, "host.attach", {"offset": 1e3}, "offset"),
        (HOST_MESSAGES, "host.attach", {"offset": -(10**30)}, "greater than or equal to 0"),
        (HOST_MESSAGES, "host.history", {"limit": [1]}, "limit"),
        (HOST_MESSAGES, "host.send", {}, "input: Field required"),
        (HOST_MESSAGES, "host.send", {"input": None}, "input"),
        (HOST_MESSAGES, "host.stop", {"timeout": 1e400}, "timeout"),
        (HOST_MESSAGES, "host.respond", {"request_id": "", "behavior": "maybe"}, "; behavior"),
        (DAEMON_MESSAGES, "daemon.spawn", {}, "agent_id: Field required"),
        (DAEMON_MESSAGES, "daemon.spawn", {"agent_id": "../x"}, "invalid agent id"),
        (DAEMON_MESSAGES, "daemon.spawn", {"agent_id": "\ud800"}, "agent_id"),
        (DAEMON_MESSAGES, "daemon.spawn", {"agent_id": "w", "env": {"A": 1}}, "env.A"),
        (DAEMON_MESSAGES, "daemon.watch", {"agents": "w1"}, "agents"),
        (DAEMON_MESSAGES, "daemon.stop", {"agent_id": "w", "timeout": 10**30}, "timeout"),
    ],
)
def test_validate_rejects_with_the_protocol_text(
    table: MessageTable[Any, Any], rtype: str, payload: dict[str, Any], says: str
) -> None:
    with pytest.raises(RequestError) as caught:
        table.validate(request(rtype, payload))
    err = caught.value
    assert err.code == ErrorCode.INVALID_PAYLOAD
    assert err.message.startswith(f"invalid payload for {rtype}: ")
    assert says in err.message
    assert (err.request_type, err.request_id) == (rtype, 7)
    # the answer can always be written, whatever the peer sent
    assert json.loads(encode_error(err.request_type, err.request_id, err.code, err.message))


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.service)
@pytest.mark.parametrize("rtype", ["", "ping", "host.nope", "daemon.nope", "\ud800", "x" * 300])
def test_unknown_types(table: MessageTable[Any, Any], rtype: str) -> None:
    if rtype in {str(t) for t in table.types}:
        return
    with pytest.raises(RequestError) as caught:
        table.validate(request(rtype, rid="r"))
    assert caught.value.code == ErrorCode.UNKNOWN_TYPE
    assert caught.value.message == f"unknown message type: {rtype}"
    assert (caught.value.request_type, caught.value.request_id) == (rtype, "r")


def test_each_service_knows_only_its_own_types() -> None:
    with pytest.raises(RequestError):
        HOST_MESSAGES.validate(request("daemon.ping"))
    with pytest.raises(RequestError):
        DAEMON_MESSAGES.validate(request("host.ping"))


def test_the_old_names_are_the_tables() -> None:
    for mtype in (MessageType.PING, MessageType.ATTACH, MessageType.DETACH):
        assert validate_payload(request(mtype))[0] is mtype
    for dtype in (DaemonMessageType.PING, DaemonMessageType.WATCH, DaemonMessageType.LIST):
        assert validate_daemon_payload(request(dtype))[0] is dtype


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**200)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)


@HYPO
@given(
    table=st.sampled_from(TABLES),
    index=st.integers(min_value=0),
    payload=st.dictionaries(
        st.sampled_from(["offset", "limit", "input", "agent_id", "since", "env", "timeout", "x"]),
        JSONISH,
        max_size=4,
    ),
)
def test_garbage_payloads_give_a_result_or_invalid_payload(
    table: MessageTable[Any, Any], index: int, payload: dict[str, Any]
) -> None:
    types = list(table.types)
    rtype = types[index % len(types)]
    try:
        table.validate(request(rtype, payload))
    except RequestError as exc:
        assert exc.code == ErrorCode.INVALID_PAYLOAD
        assert json.loads(encode_error(rtype, 7, exc.code, exc.message))["code"] == exc.code


# --- decode_frame ------------------------------------------------------------------------


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.service)
@pytest.mark.parametrize(
    ("frame", "model", "check"),
    [
        (b'{"kind":"response","type":"t","id":1,"success":true}', Response, "success"),
        # an escaped lone surrogate (other encoders send them): accepted, kept as is
        (event(data="half \ud800"), StreamEvent, "data"),
        (event(data="\udc00", stream="stderr"), StreamEvent, "data"),
        (b'{"kind":"response","type":"t","success":false,"error":"\\ud800"}', Response, "error"),
        # a host of protocol 1.0 as first published: no kind
        (b'{"type":"t","id":"c","success":true,"payload":{}}', Response, "success"),
        (
            b'{"type":"output","agent_id":"a","offset":1,"timestamp":"' + TS.encode() + b'"}',
            StreamEvent,
            "offset",
        ),
        # a chat entry of another shape keeps its place as data
        (
            event(type="chat_entry", chat_entry={"Role": "user", "Content": "hi"}),
            StreamEvent,
            "data",
        ),
        # huge numbers are numbers
        (event(offset=10**40), StreamEvent, "offset"),
        (
            b'{"kind":"response","type":"t","success":true,"payload":{"x":1e400}}',
            Response,
            "payload",
        ),
    ],
)
def test_decode_frame_is_liberal_for_both_services(
    table: MessageTable[Any, Any], frame: bytes, model: type[Any], check: str
) -> None:
    message = table.decode_frame(frame)
    assert isinstance(message, model)
    assert getattr(message, check) is not None


def test_lone_surrogates_are_kept_as_sent() -> None:
    for table in TABLES:
        message = table.decode_frame(event(data="a\ud800b"))
        assert isinstance(message, StreamEvent) and message.data == "a\ud800b"


def test_notices_are_the_daemons_kind() -> None:
    frame = b'{"kind":"notice","type":"gap","timestamp":"' + TS.encode() + b'","after":3}'
    notice = DAEMON_MESSAGES.decode_frame(frame)
    assert isinstance(notice, Notice) and notice.model_extra == {"after": 3}
    # a host never sends one: a kind its clients do not know, ignored
    assert HOST_MESSAGES.decode_frame(frame) is None
    # with an escaped lone surrogate
    odd = DAEMON_MESSAGES.decode_frame(frame.replace(b'"after":3', b'"reason":"\\udfff"'))
    assert isinstance(odd, Notice) and odd.model_extra == {"reason": "\udfff"}


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.service)
@pytest.mark.parametrize("kind", [b'"later"', b'"\\ud800"', b'"x"'])
def test_unknown_kinds_are_ignored(table: MessageTable[Any, Any], kind: bytes) -> None:
    assert table.decode_frame(b'{"kind":' + kind + b',"type":"x","offset":"no"}') is None


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.service)
@pytest.mark.parametrize(
    ("frame", "says"),
    [
        (b"", "not JSON"),
        (b"nope", "not JSON"),
        (b"\xff{}", "not JSON"),
        (b"[1]", "a JSON list, not an object"),
        (b"42", "a JSON int, not an object"),
        (b"null", "a JSON NoneType, not an object"),
        (b'"\\ud800"', "a JSON str, not an object"),
        (b"{}", "Field required"),
        (b'{"kind":7,"type":"x"}', "kind"),
        (b'{"kind":"response","type":"t"}', "success"),
        (b'{"kind":"response","type":"t","success":true,"payload":[1]}', "payload"),
        (event(offset="x"), "offset"),
        (event(offset=1.5), "offset"),
        (event(timestamp="yesterday"), "timestamp"),
        (event(data=7), "data"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_decode_frame_says_what_is_wrong(
    table: MessageTable[Any, Any], frame: bytes, says: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        table.decode_frame(frame)
    text = str(caught.value)
    assert text.startswith(f"malformed frame from {PEER[table.service]}: ")
    assert says in text and "discriminator" not in text


@HYPO
@given(table=st.sampled_from(TABLES), value=JSONISH)
def test_garbage_frames_decode_or_raise_protocol_error(
    table: MessageTable[Any, Any], value: Any
) -> None:
    frame = json.dumps(value).encode()
    try:
        table.decode_frame(frame)
    except ProtocolError:
        pass
