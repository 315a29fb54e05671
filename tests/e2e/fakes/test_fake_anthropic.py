"""Self-tests of the fake Anthropic API, with a plain HTTP client (no CLI needed)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.anthropic import (
    FakeAnthropic,
    error,
    is_side_request,
    slow_text,
    stream_error,
    text,
    tool_use,
)

JsonDict = dict[str, Any]
TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def _post(server: FakeAnthropic, body: JsonDict) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(
            "POST",
            "/v1/messages?beta=true",
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "x-api-key": "test-key"},
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _events(raw: bytes) -> list[tuple[str, JsonDict]]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def _turn_body(stream: bool = True) -> JsonDict:
    return {
        "model": "claude-test",
        "max_tokens": 32000,
        "stream": stream,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_text_stream_has_the_real_event_sequence(server: FakeAnthropic) -> None:
    server.add(text("Hello there, this is a longer text."))
    status, headers, raw = _post(server, _turn_body())
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = _events(raw)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-4:] == [
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(name == data["type"] for name, data in events)
    assert events[0][1]["message"]["model"] == "claude-test"
    streamed = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert streamed == "Hello there, this is a longer text."
    delta = dict(events)["message_delta"]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 0
    assert server.turn_requests()[0].deltas_sent == names.count("content_block_delta")


def test_tool_use_streams_input_json(server: FakeAnthropic) -> None:
    server.add(tool_use("Bash", {"command": "echo hi"}, preamble="Sure.", tool_use_id="toolu_1"))
    _, _, raw = _post(server, _turn_body())
    events = _events(raw)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert starts[1] == {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"command": "echo hi"}
    assert dict(events)["message_delta"]["delta"]["stop_reason"] == "tool_use"


def test_non_streaming_returns_one_message(server: FakeAnthropic) -> None:
    server.add(text("whole"))
    status, headers, raw = _post(server, _turn_body(stream=False))
    assert status == 200
    message = json.loads(raw)
    assert message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": "whole"}]
    assert message["stop_reason"] == "end_turn"


def test_error_turns(server: FakeAnthropic) -> None:
    server.add(error(529), error(500, should_retry=False), stream_error("half"))
    status, _, raw = _post(server, _turn_body())
    assert status == 529
    assert json.loads(raw)["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    status, headers, _ = _post(server, _turn_body())
    assert (status, headers["x-should-retry"]) == (500, "false")
    status, _, raw = _post(server, _turn_body())
    assert status == 200
    assert _events(raw)[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )


def test_side_requests_do_not_consume_turns(server: FakeAnthropic) -> None:
    server.add(text("the turn"))
    side = {**_turn_body(stream=False), "tools": [], "max_tokens": 1}
    assert is_side_request(side)
    assert not is_side_request(_turn_body())
    _, _, raw = _post(server, side)
    assert json.loads(raw)["content"][0]["text"] == "OK"
    _, _, raw = _post(server, _turn_body(stream=False))
    assert json.loads(raw)["content"][0]["text"] == "the turn"
    assert [r.side for r in server.requests] == [True, False]
    # An exhausted script answers with the default turn rather than hanging.
    _, _, raw = _post(server, _turn_body(stream=False))
    assert "no more scripted turns" in json.loads(raw)["content"][0]["text"]


def test_other_endpoints_are_answered_and_logged(server: FakeAnthropic) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/v1/models")
        models = json.loads(conn.getresponse().read())
        conn.request("POST", "/api/anything", body=b"{}")
        assert json.loads(conn.getresponse().read()) == {}
    finally:
        conn.close()
    assert models["data"]
    assert [(r.method, r.path) for r in server.other_requests()] == [
        ("GET", "/v1/models"),
        ("POST", "/api/anything"),
    ]


def test_slow_stream_notices_the_client_leaving(server: FakeAnthropic) -> None:
    server.add(slow_text("x" * 400, delay=0.05, chunk_size=1))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        body = json.dumps(_turn_body()).encode()
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        request = server.wait_for_deltas(3, timeout=10)
        assert not request.disconnected
    finally:
        sock.close()
    assert server.wait_for_disconnect(timeout=10).deltas_sent < 400
