"""A scriptable fake of the Gemini API (generativelanguage v1beta), for the real Gemini CLI.

Standard library only, on 127.0.0.1 and a free port (``GOOGLE_GEMINI_BASE_URL``). It
answers ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` with a
Server-Sent-Events stream of ``GenerateContentResponse`` chunks (``candidates[0].content
.parts`` with text or ``functionCall`` parts, ``finishReason`` and ``usageMetadata`` on
the last chunk), ``:generateContent`` with one such object, ``:countTokens`` with a
count, and ``GET /v1beta/models`` with a model list. Every request is recorded.

The conversation is scripted with a queue of replies, one per model call that offers
tools (the agent's turns)::

    with FakeGemini([function_call("run_shell_command", {"command": "echo hi"}),
                     text("It printed hi.")]) as api:
        ...  # GOOGLE_GEMINI_BASE_URL=api.url

The CLI also makes calls of its own without tools (it asks whether the model should
speak next, routes between models, summarises): those are *side* calls, answered from
their JSON schema with the first allowed value (``next_speaker`` "user"), never
consuming a scripted reply. An empty queue answers :data:`UNSCRIPTED_TEXT`, so a test
that forgot a reply fails on its assertions, not with a hang.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fakes.server import FakeHandler, FakeHTTPServer, FakeServer

__all__ = [
    "FakeGemini",
    "GeminiRequest",
    "Reply",
    "UNSCRIPTED_TEXT",
    "error",
    "function_call",
    "is_side_request",
    "schema_answer",
    "slow_text",
    "text",
]

JsonDict = dict[str, Any]
UNSCRIPTED_TEXT = "fake-gemini: no reply was queued for this request"
DEFAULT_MODEL = "gemini-2.5-flash"


@dataclass
class GeminiRequest:
    """One HTTP request the fake received."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    reply: str | None = None
    """The name of the reply that answered it (``side``, ``count_tokens``, ...)."""
    disconnected: bool = False
    """The client went away before the answer was complete."""

    @property
    def action(self) -> str:
        """What the path asks for: ``streamGenerateContent``, ``countTokens``, ... or ""."""
        path = self.path.split("?", 1)[0]
        return path.rsplit(":", 1)[1] if ":" in path.rsplit("/", 1)[-1] else ""

    @property
    def model(self) -> str:
        """The model named in the path (``models/<model>:action``)."""
        path = self.path.split("?", 1)[0]
        return path.rsplit("/", 1)[-1].split(":", 1)[0]

    @property
    def contents(self) -> list[JsonDict]:
        """The ``contents`` (the conversation) of a generate request."""
        if isinstance(self.body, dict) and isinstance(self.body.get("contents"), list):
            return [c for c in self.body["contents"] if isinstance(c, dict)]
        return []

    def parts(self, key: str) -> list[Any]:
        """Every ``parts[].<key>`` value of the contents, oldest first."""
        found = []
        for content in self.contents:
            for part in content.get("parts") or []:
                if isinstance(part, dict) and key in part:
                    found.append(part[key])
        return found

    def user_texts(self) -> list[str]:
        """The texts of the user contents, oldest first."""
        return [
            str(part["text"])
            for content in self.contents
            if content.get("role") == "user"
            for part in content.get("parts") or []
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]

    def function_responses(self) -> list[JsonDict]:
        """The ``functionResponse`` parts sent back to the model."""
        return [r for r in self.parts("functionResponse") if isinstance(r, dict)]

    @property
    def tool_names(self) -> list[str]:
        """The function declarations the request offers the model."""
        names: list[str] = []
        if isinstance(self.body, dict):
            for tool in self.body.get("tools") or []:
                for decl in (tool or {}).get("functionDeclarations") or []:
                    names.append(str(decl.get("name")))
        return names


def is_side_request(body: Any) -> bool:
    """Whether a generate body is one of the CLI's own calls rather than an agent turn.

    The agent's turns offer the model its tools; the CLI's helper calls (next speaker,
    model routing, loop detection, summaries) offer none.
    """
    return not (isinstance(body, dict) and body.get("tools"))


def schema_answer(schema: Any) -> Any:
    """The simplest value that satisfies a JSON schema: the first enum value, "", 0,
    false, and objects with every property filled in."""
    if not isinstance(schema, dict):
        return ""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {name: schema_answer(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "fake"


def _usage(prompt: int, output: int) -> JsonDict:
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    }


def _chunk(
    parts: list[JsonDict], model: str, finish: str | None, usage: JsonDict | None
) -> JsonDict:
    candidate: JsonDict = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    chunk: JsonDict = {"candidates": [candidate], "modelVersion": model}
    if usage is not None:
        chunk["usageMetadata"] = usage
    chunk["responseId"] = uuid.uuid4().hex[:20]
    return chunk


class Responder:
    """Writes the answer to one generate request: a JSON object, an SSE stream, an error."""

    def __init__(self, handler: _GeminiHandler, request: GeminiRequest, model: str) -> None:
        self.handler = handler
        self.request = request
        self.model = model
        self.streaming = request.action == "streamGenerateContent"

    def send(self, chunks: list[JsonDict], delay: float = 0.0) -> None:
        """Stream ``chunks`` (one SSE event each, ``delay`` s apart) or send them merged."""
        if not self.streaming:
            parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
            merged = dict(chunks[-1])
            merged["candidates"] = [
                {
                    **chunks[-1]["candidates"][0],
                    "content": {"parts": _merge_text(parts), "role": "model"},
                }
            ]
            self.handler.send_body(200, json.dumps(merged).encode(), "application/json")
            return
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for chunk in chunks:
            if delay and not handler.wait_open(delay):
                self.request.disconnected = True
                return
            if not handler.write_chunk(f"data: {json.dumps(chunk)}\r\n\r\n".encode()):
                self.request.disconnected = True
                return
        handler.write_chunk(b"")

    def error(self, status: int, message: str, status_text: str) -> None:
        """An HTTP error with the API's error object."""
        body = {"error": {"code": status, "message": message, "status": status_text}}
        self.handler.send_body(status, json.dumps(body).encode(), "application/json")


def _merge_text(parts: list[JsonDict]) -> list[JsonDict]:
    """Adjacent text parts joined (what a non-streaming answer carries)."""
    merged: list[JsonDict] = []
    for part in parts:
        if "text" in part and merged and set(merged[-1]) == {"text"}:
            merged[-1] = {"text": merged[-1]["text"] + part["text"]}
        else:
            merged.append(dict(part))
    return merged


class Reply:
    """One scripted answer to one agent turn."""

    name = "reply"

    def play(self, out: Responder) -> None:
        """Write the whole HTTP answer."""
        raise NotImplementedError


def _split(value: str, parts: int) -> list[str]:
    size = max(1, -(-len(value) // max(1, parts)))
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


@dataclass
class TextReply(Reply):
    """The model answers text, in ``chunks`` stream chunks ``delay`` s apart."""

    text: str
    chunks: int = 3
    delay: float = 0.0
    prompt_tokens: int = 100
    output_tokens: int = 10
    name: str = "text"

    def play(self, out: Responder) -> None:
        """Text chunks; the last carries STOP and the usage."""
        pieces = _split(self.text, self.chunks)
        chunks = [_chunk([{"text": p}], out.model, None, None) for p in pieces]
        chunks[-1] = _chunk(
            [{"text": pieces[-1]}],
            out.model,
            "STOP",
            _usage(self.prompt_tokens, self.output_tokens),
        )
        out.send(chunks, self.delay)


@dataclass
class FunctionCallReply(Reply):
    """The model calls one function (optionally after some text)."""

    function: str
    args: JsonDict
    text: str | None = None
    name: str = "function_call"

    def play(self, out: Responder) -> None:
        """An optional text chunk, then the ``functionCall`` part with STOP and usage."""
        chunks = []
        if self.text:
            chunks.append(_chunk([{"text": self.text}], out.model, None, None))
        call = {"functionCall": {"name": self.function, "args": self.args}}
        chunks.append(_chunk([call], out.model, "STOP", _usage(100, 20)))
        out.send(chunks)


@dataclass
class ErrorReply(Reply):
    """An HTTP error status with the API's JSON error body."""

    status: int = 500
    message: str = "fake-gemini scripted error"
    status_text: str = "INTERNAL"
    name: str = "error"

    def play(self, out: Responder) -> None:
        """Send the error."""
        out.error(self.status, self.message, self.status_text)


def text(message: str, *, chunks: int = 3, output_tokens: int = 10) -> TextReply:
    """A reply that streams ``message`` in ``chunks`` pieces."""
    return TextReply(message, chunks=chunks, output_tokens=output_tokens)


def slow_text(message: str, *, chunks: int = 50, delay: float = 0.2) -> TextReply:
    """A reply streamed slowly (for cancels); it stops when the client goes away."""
    return TextReply(message, chunks=chunks, delay=delay, name="slow_text")


def function_call(
    function: str, args: Mapping[str, Any], *, text: str | None = None
) -> FunctionCallReply:
    """A reply calling ``function`` with ``args`` (e.g. run_shell_command)."""
    return FunctionCallReply(function, dict(args), text)


def error(
    status: int = 500, message: str = "fake-gemini scripted error", status_text: str = ""
) -> ErrorReply:
    """A reply that fails with HTTP ``status``."""
    default_text = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}
    return ErrorReply(status, message, status_text or default_text.get(status, "INTERNAL"))


class _GeminiServer(FakeHTTPServer):
    fake: FakeGemini


class _GeminiHandler(FakeHandler[GeminiRequest]):
    """The HTTP side of the fake."""

    server: _GeminiServer

    def _models(self) -> JsonDict:
        model = self.server.fake.model
        return {
            "models": [
                {
                    "name": f"models/{model}",
                    "displayName": model,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
            ]
        }

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """``GET .../models`` lists the fake's model; anything else is a recorded 404."""
        request = self._record()
        if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
            request.reply = "models"
            self.send_body(200, json.dumps(self._models()).encode(), "application/json")
        else:
            request.reply = "not_found"
            self.send_body(
                404, b'{"error": {"code": 404, "message": "not found"}}', "application/json"
            )
        self.server.fake._changed()

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        """Generate, stream-generate and count tokens; other paths get a 404."""
        request = self._record()
        fake = self.server.fake
        action = request.action
        try:
            if action == "countTokens":
                request.reply = "count_tokens"
                size = len(json.dumps(request.body or {})) // 4
                self.send_body(200, json.dumps({"totalTokens": size}).encode(), "application/json")
            elif action in ("generateContent", "streamGenerateContent"):
                out = Responder(self, request, request.model or fake.model)
                if is_side_request(request.body):
                    request.reply = "side"
                    self._side(out, request.body)
                else:
                    reply = fake._next_reply()
                    request.reply = reply.name
                    reply.play(out)
            else:
                request.reply = "not_found"
                self.send_body(404, b'{"error": {"code": 404}}', "application/json")
        finally:
            fake._changed()
            self.close_connection = self.close_connection or request.disconnected

    def _side(self, out: Responder, body: Any) -> None:
        config = body.get("generationConfig") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            config = {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        answer = json.dumps(schema_answer(schema)) if schema else "fake-gemini side answer"
        out.send([_chunk([{"text": answer}], out.model, "STOP", _usage(10, 5))])


class FakeGemini(FakeServer[Reply, GeminiRequest]):
    """A scriptable fake Gemini API on 127.0.0.1 (a context manager).

    ``url`` is the value for ``GOOGLE_GEMINI_BASE_URL``. Replies are played in order, one
    per agent turn; :meth:`add` queues more at any time.
    """

    name = "fake-gemini"
    server_type = _GeminiServer
    handler_type = _GeminiHandler

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        model: str = DEFAULT_MODEL,
        default: Reply | None = None,
    ) -> None:
        super().__init__(replies, default or TextReply(UNSCRIPTED_TEXT, name="unscripted"))
        self.model = model

    def _new_request(
        self, index: int, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> GeminiRequest:
        return GeminiRequest(index, method, path, headers, body)

    def turns(self) -> list[GeminiRequest]:
        """The agent-turn requests (generate calls offering tools), in order."""
        return [
            r
            for r in self.requests
            if r.action in ("generateContent", "streamGenerateContent")
            and not is_side_request(r.body)
        ]
