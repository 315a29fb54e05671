"""Self-tests of the fake Gemini API, with a plain HTTP client (no CLI needed)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.gemini import (
    UNSCRIPTED_TEXT,
    FakeGemini,
    GeminiRequest,
    error,
    function_call,
    is_side_request,
    schema_answer,
    slow_text,
    text,
)

JsonDict = dict[str, Any]
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
GENERATE = "/v1beta/models/gemini-2.5-flash:generateContent"
TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]


@pytest.fixture
def api() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


def request(
    api: FakeGemini, method: str, path: str, body: bytes | None = None
) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        headers = {"Content-Type": "application/json", "x-goog-api-key": "k"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


def turn_body(prompt: str = "hi", tools: Any = TOOLS, **extra: Any) -> bytes:
    contents = [{"role": "user", "parts": [{"text": prompt}]}]
    return json.dumps({"contents": contents, "tools": tools, **extra}).encode()


def sse(raw: bytes) -> list[JsonDict]:
    """The JSON objects of an SSE body (``data: ...`` events separated by blank lines)."""
    events = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            events.append(json.loads(block[len("data: ") :]))
    return events


def parts(chunks: list[JsonDict]) -> list[JsonDict]:
    return [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]


def test_stream_text_in_chunks_with_stop_and_usage_last(api: FakeGemini) -> None:
    api.add(text("Hello from the fake model.", chunks=3, output_tokens=7))
    status, ctype, raw = request(api, "POST", STREAM, turn_body())
    assert (status, ctype) == (200, "text/event-stream")
    chunks = sse(raw)
    assert len(chunks) == 3
    assert "".join(p["text"] for p in parts(chunks)) == "Hello from the fake model."
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"] == {
        "promptTokenCount": 100,
        "candidatesTokenCount": 7,
        "totalTokenCount": 107,
    }
    assert chunks[-1]["modelVersion"] == "gemini-2.5-flash"
    (recorded,) = api.turns()
    assert recorded.reply == "text" and recorded.user_texts() == ["hi"]


def test_generate_content_answers_one_merged_object(api: FakeGemini) -> None:
    api.add(text("one two three", chunks=3))
    status, ctype, raw = request(api, "POST", GENERATE, turn_body())
    assert (status, ctype) == (200, "application/json")
    answer = json.loads(raw)
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "one two three"}]
    assert answer["candidates"][0]["finishReason"] == "STOP"


def test_function_call_after_text(api: FakeGemini) -> None:
    api.add(function_call("run_shell_command", {"command": "echo hi"}, text="Let me run it."))
    chunks = sse(request(api, "POST", STREAM, turn_body())[2])
    assert parts(chunks) == [
        {"text": "Let me run it."},
        {"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi"}}},
    ]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_replies_in_order_then_the_unscripted_default(api: FakeGemini) -> None:
    api.add(text("first"), text("second"))
    said = []
    for _ in range(3):
        said.append(
            "".join(p["text"] for p in parts(sse(request(api, "POST", STREAM, turn_body())[2])))
        )
    assert said == ["first", "second", UNSCRIPTED_TEXT]
    assert api.pending == 0


def test_side_calls_answer_their_schema_and_keep_the_script(api: FakeGemini) -> None:
    api.add(text("the turn"))
    schema = {
        "type": "object",
        "properties": {"next_speaker": {"type": "string", "enum": ["user", "model"]}},
    }
    body = turn_body(tools=None, generationConfig={"responseJsonSchema": schema})
    status, _, raw = request(api, "POST", GENERATE, body)
    answer = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
    assert (status, json.loads(answer)) == (200, {"next_speaker": "user"})
    assert api.pending == 1  # the scripted reply is still there
    assert api.requests[-1].reply == "side" and api.turns() == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "INTERNAL")],
)
def test_errors_carry_the_api_error_object(api: FakeGemini, status: int, expected: str) -> None:
    api.add(error(status, "boom"))
    got, ctype, raw = request(api, "POST", STREAM, turn_body())
    assert (got, ctype) == (status, "application/json")
    assert json.loads(raw) == {"error": {"code": status, "message": "boom", "status": expected}}


def test_count_tokens_models_and_unknown_paths(api: FakeGemini) -> None:
    status, _, raw = request(
        api, "POST", "/v1beta/models/gemini-2.5-flash:countTokens", turn_body()
    )
    assert status == 200 and json.loads(raw)["totalTokens"] > 0
    status, _, raw = request(api, "GET", "/v1beta/models")
    assert status == 200 and json.loads(raw)["models"][0]["name"] == "models/gemini-2.5-flash"
    assert request(api, "GET", "/v1beta/nothing")[0] == 404
    assert request(api, "POST", "/v1beta/models/x:embedContent", b"{}")[0] == 404
    assert request(api, "POST", "/v1beta/other", b"{}")[0] == 404
    assert [r.reply for r in api.requests] == [
        "count_tokens",
        "models",
        "not_found",
        "not_found",
        "not_found",
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"text"',
        b'{"contents": 5, "tools": []}',
        b'{"generationConfig": 5}',
        b'{"generationConfig": {"responseJsonSchema": "junk"}}',
        b"\xff\xfe",
    ],
)
def test_garbage_bodies_are_side_calls_never_a_crash(api: FakeGemini, body: bytes) -> None:
    api.add(text("kept"))
    status, _, raw = request(api, "POST", STREAM, body)
    assert status == 200 and sse(raw)
    assert api.pending == 1
    recorded = api.requests[-1]
    assert recorded.contents == [] and recorded.user_texts() == [] and recorded.tool_names == []
    assert request(api, "GET", "/v1beta/models")[0] == 200  # still serving


def test_request_helpers_skip_malformed_parts() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}, "junk", {"text": 5}]},
            "junk",
            {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}, None]},
        ],
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}, {}],
    }
    recorded = GeminiRequest(0, "POST", GENERATE, {}, body)
    assert recorded.user_texts() == ["hi"]
    assert recorded.function_responses() == [{"name": "f", "response": {}}]
    assert recorded.tool_names == ["a", "b"]
    assert (recorded.action, recorded.model) == ("generateContent", "gemini-2.5-flash")
    assert GeminiRequest(0, "GET", "/v1beta/models", {}, None).action == ""


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "enum": ["a", "b"]}, "a"),
        ({"type": "STRING"}, "fake"),
        ({"type": "integer"}, 0),
        ({"type": "boolean"}, False),
        ({"type": "array", "items": {"type": "string"}}, []),
        ({"properties": {"x": {"type": "number"}}}, {"x": 0}),
        ("garbage", ""),
        (None, ""),
        ({"type": "object", "properties": "junk"}, {}),
    ],
)
def test_schema_answer(schema: Any, value: Any) -> None:
    assert schema_answer(schema) == value


@pytest.mark.parametrize(
    ("body", "side"),
    [({"tools": TOOLS}, False), ({"tools": []}, True), ({}, True), (None, True), ([1], True)],
)
def test_is_side_request(body: Any, side: bool) -> None:
    assert is_side_request(body) is side


def test_a_client_leaving_a_slow_stream_is_noticed(api: FakeGemini) -> None:
    api.add(slow_text("word " * 40, chunks=40, delay=0.05))
    sock = socket.create_connection(("127.0.0.1", api.port), timeout=10)
    body = turn_body()
    head = f"POST {STREAM} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body)
    received = b""
    while b"data: " not in received:  # the stream began
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    sock.close()
    api.wait_until(lambda f: any(r.disconnected for r in f.requests), 10, "the disconnect")
