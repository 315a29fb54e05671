"""agenthost.acp.jsonrpc: what a line is, and the lines we write (table-driven)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.acp import jsonrpc
from agenthost.acp.jsonrpc import Calls, Invalid, Notification, Request, Response

PARSED: dict[str, tuple[str | bytes, jsonrpc.Message]] = {
    "request": (
        '{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"path":"/a"}}',
        Request(1, "fs/read_text_file", {"path": "/a"}),
    ),
    "request with a string id": (
        '{"jsonrpc":"2.0","id":"r-1","method":"x"}',
        Request("r-1", "x", {}),
    ),
    "request with id 0": ('{"id":0,"method":"x","params":null}', Request(0, "x", {})),
    "notification": (
        '{"jsonrpc":"2.0","method":"session/update","params":{"a":1}}',
        Notification("session/update", {"a": 1}),
    ),
    "a null id": (
        '{"jsonrpc":"2.0","id":null,"method":"x"}',
        Invalid("id is neither a string nor an integer"),
    ),
    "bytes": (b'{"method":"x"}', Notification("x", {})),
    "response": ('{"jsonrpc":"2.0","id":3,"result":{"ok":true}}', Response(3, {"ok": True})),
    "response with a null result": ('{"id":3,"result":null}', Response(3, None)),
    "error response": (
        '{"id":"a","error":{"code":-32601,"message":"nope"}}',
        Response("a", None, {"code": -32601, "message": "nope"}),
    ),
    "error that is not an object": (
        '{"id":4,"error":"boom"}',
        Response(4, None, {"code": jsonrpc.INTERNAL_ERROR, "message": "boom"}),
    ),
    "not json": ("hello", Invalid("not JSON", jsonrpc.PARSE_ERROR)),
    "empty": ("", Invalid("not JSON", jsonrpc.PARSE_ERROR)),
    "invalid utf-8": (b'{"method":"\xff"}', Invalid("not JSON", jsonrpc.PARSE_ERROR)),
    "an array": ("[1,2]", Invalid("not a JSON object")),
    "a string": ('"x"', Invalid("not a JSON object")),
    "nothing known": (
        '{"jsonrpc":"2.0"}',
        Invalid("neither a request, a notification nor a response"),
    ),
    "response without result or error": (
        '{"id":1}',
        Invalid("neither a request, a notification nor a response"),
    ),
    "response with a bool id": (
        '{"id":true,"result":1}',
        Invalid("neither a request, a notification nor a response"),
    ),
    "response with a float id": (
        '{"id":1.5,"result":1}',
        Invalid("neither a request, a notification nor a response"),
    ),
    "method not a string": ('{"id":2,"method":5}', Invalid("method is not a string", id=2)),
    "empty method": ('{"method":""}', Invalid("method is not a string")),
    "request with an object id": (
        '{"id":{},"method":"x"}',
        Invalid("id is neither a string nor an integer"),
    ),
    "params not an object (request)": (
        '{"id":7,"method":"x","params":[1]}',
        Invalid("params is not an object", jsonrpc.INVALID_PARAMS, 7),
    ),
    "params not an object (notification)": (
        '{"method":"x","params":3}',
        Invalid("params is not an object", jsonrpc.INVALID_PARAMS),
    ),
    "NaN read as null": ('{"id":1,"result":NaN}', Response(1, None)),
    "too deep": ("[" * 100_000 + "]" * 100_000, Invalid("not JSON", jsonrpc.PARSE_ERROR)),
}


@pytest.mark.parametrize(("line", "expected"), PARSED.values(), ids=list(PARSED))
def test_parse(line: str | bytes, expected: jsonrpc.Message) -> None:
    assert jsonrpc.parse(line) == expected


ENCODED: dict[str, tuple[bytes, dict[str, Any]]] = {
    "request": (jsonrpc.request(1, "m", {"a": 1}), {"id": 1, "method": "m", "params": {"a": 1}}),
    "request without params": (jsonrpc.request("x", "m"), {"id": "x", "method": "m"}),
    "notification": (jsonrpc.notification("n", {}), {"method": "n", "params": {}}),
    "notification without params": (jsonrpc.notification("n"), {"method": "n"}),
    "result": (jsonrpc.result(2, {"ok": True}), {"id": 2, "result": {"ok": True}}),
    "null result": (jsonrpc.result(2, None), {"id": 2, "result": None}),
    "error": (
        jsonrpc.error(3, jsonrpc.METHOD_NOT_FOUND, "no"),
        {"id": 3, "error": {"code": -32601, "message": "no"}},
    ),
    "error with data": (
        jsonrpc.error(None, jsonrpc.PARSE_ERROR, "bad", {"line": 1}),
        {"id": None, "error": {"code": -32700, "message": "bad", "data": {"line": 1}}},
    ),
}


@pytest.mark.parametrize(("data", "body"), ENCODED.values(), ids=list(ENCODED))
def test_encoders_write_one_ascii_line(data: bytes, body: dict[str, Any]) -> None:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    data.decode("ascii")
    assert json.loads(data) == {"jsonrpc": "2.0", **body}


def test_text_that_is_not_ascii_travels_escaped() -> None:
    data = jsonrpc.result(1, {"text": "héllo \u2028 \U0001f600 \n"})
    data.decode("ascii")
    assert data.count(b"\n") == 1
    assert json.loads(data)["result"]["text"] == "héllo \u2028 \U0001f600 \n"


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (None, ""),
        ({"code": 1, "message": "boom"}, "boom"),
        ({"code": 1}, "unknown error"),
        ({"code": 1, "message": ""}, "unknown error"),
        ({"code": 1, "message": "boom", "data": "why"}, "boom (why)"),
        ({"code": 1, "message": "boom", "data": {"a": "é"}}, 'boom ({"a": "é"})'),
        ({"code": 1, "message": "boom", "data": "x" * 501}, "boom"),
        ({"code": 1, "message": 5}, "unknown error"),
    ],
)
def test_error_text(error: dict[str, Any] | None, text: str) -> None:
    assert Response(1, None, error).error_text == text


def test_calls_number_and_settle_each_request_once() -> None:
    calls = Calls()
    first, line = calls.issue("initialize", {"protocolVersion": 1}, context="ctx")
    second, _ = calls.issue("session/prompt")
    assert (first, second) == (1, 2) and len(calls) == 2
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }
    assert calls.pending("session/prompt") == [2]
    assert calls.settle(Response(1, {})) == ("initialize", "ctx")
    assert calls.settle(Response(1, {})) is None  # answered already
    assert calls.settle(Response("2", {})) is None  # not our id: 2 is an int
    assert calls.settle(Response(99, {})) is None
    assert calls.settle(Response(2, None, {"code": 1})) == ("session/prompt", None)
    assert len(calls) == 0 and calls.pending("session/prompt") == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)
KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])


@settings(max_examples=400, deadline=None)
@given(message=st.dictionaries(KEYS, JSON, max_size=6) | JSON)
def test_parse_never_raises_and_round_trips_what_it_accepts(message: Any) -> None:
    line = json.dumps(message)
    parsed = jsonrpc.parse(line)
    if isinstance(parsed, Request):
        again = jsonrpc.parse(jsonrpc.request(parsed.id, parsed.method, parsed.params))
        assert again == parsed
    elif isinstance(parsed, Notification):
        assert jsonrpc.parse(jsonrpc.notification(parsed.method, parsed.params)) == parsed
    elif isinstance(parsed, Response) and parsed.error is None:
        assert isinstance(jsonrpc.parse(jsonrpc.result(parsed.id, parsed.result)), Response)
    else:
        assert isinstance(parsed, Invalid | Response)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=64))
def test_parse_never_raises_on_bytes(raw: bytes) -> None:
    assert jsonrpc.parse(raw) is not None
