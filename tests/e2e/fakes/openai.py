"""A fake OpenAI Responses API on 127.0.0.1, for driving the real Codex CLI in tests.

Only the standard library is used. The server answers ``POST /v1/responses`` with a
Server-Sent-Events stream shaped like the real API's (``response.created``,
``response.output_item.added``, ``response.output_text.delta``, ...,
``response.completed`` with usage), and ``GET /v1/models`` with a model list. Every
request is recorded (method, path, headers, parsed body).

Each ``POST /v1/responses`` takes the next script from a queue, so a test lays out a
conversation in order::

    with FakeOpenAI([shell("echo hello"), text("It printed hello.")]) as server:
        ...  # point Codex at server.url

A shell call is answered by Codex with a second request that carries the command's
output (a ``function_call_output`` item), which plays the next script. When the queue
is empty the server answers with :data:`UNSCRIPTED_TEXT` (so a missing script shows up
as a wrong answer, not as a hang or a retry storm).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fakes.server import FakeHandler, FakeHTTPServer, FakeServer

UNSCRIPTED_TEXT = "fake-openai: no script was queued for this request"
DEFAULT_MODEL = "fake-codex-model"


@dataclass(frozen=True)
class Usage:
    """Token counts reported in ``response.completed``."""

    input_tokens: int = 100
    cached_input_tokens: int = 0
    output_tokens: int = 10
    reasoning_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        """The ``usage`` object as the Responses API spells it."""
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_input_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


@dataclass
class RecordedRequest:
    """One HTTP request the fake server received."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any = None
    script: str | None = None
    disconnected: bool = False  # the client went away before the reply was finished

    @property
    def input_items(self) -> list[dict[str, Any]]:
        """The ``input`` items of a Responses request (empty for other requests)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("input"), list):
            return [item for item in self.body["input"] if isinstance(item, dict)]
        return []

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools a Responses request offers the model."""
        names: list[str] = []
        if isinstance(self.body, dict):
            for tool in self.body.get("tools") or []:
                if isinstance(tool, dict):
                    names.append(str(tool.get("name") or tool.get("type")))
        return names

    def function_outputs(self) -> list[dict[str, Any]]:
        """The ``function_call_output`` (and custom tool output) items of the input."""
        kinds = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
        return [item for item in self.input_items if item.get("type") in kinds]

    def user_texts(self) -> list[str]:
        """The texts of the user messages in the input, oldest first."""
        texts: list[str] = []
        for item in self.input_items:
            if item.get("type") == "message" and item.get("role") == "user":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        texts.append(part["text"])
        return texts


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class Responder:
    """Writes one HTTP response for a script: a plain error, or an SSE stream."""

    def __init__(self, handler: _Handler, request: RecordedRequest, model: str) -> None:
        self._handler = handler
        self.request = request
        self.model = model
        self.response_id = _new_id("resp")
        self.created_at = int(time.time())
        self._sequence = 0
        self._streaming = False
        self.output: list[dict[str, Any]] = []

    # -- plain responses ---------------------------------------------------------------

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send a complete JSON response (used for errors and non-streaming endpoints)."""
        self._handler.send_body(status, json.dumps(payload).encode(), "application/json", headers)

    # -- streaming ---------------------------------------------------------------------

    def start_stream(self) -> None:
        """Send the headers of an SSE response (chunked, like the real API)."""
        handler = self._handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("x-request-id", _new_id("req"))
        handler.end_headers()
        self._streaming = True

    def event(self, event_type: str, payload: dict[str, Any]) -> bool:
        """Send one SSE event; False when the client has gone away."""
        body = {"type": event_type, "sequence_number": self._sequence, **payload}
        self._sequence += 1
        frame = f"event: {event_type}\ndata: {json.dumps(body)}\n\n".encode()
        return self._handler.write_chunk(frame)

    def finish_stream(self) -> None:
        """Send the terminating zero-length chunk."""
        if self._streaming:
            self._handler.write_chunk(b"")

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds`` while watching the connection; False if the client closed it."""
        return self._handler.wait_open(seconds)

    def response_object(self, status: str, usage: Usage | None = None) -> dict[str, Any]:
        """The ``response`` object carried by created/in_progress/completed events."""
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": list(self.output) if status == "completed" else [],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage.to_json() if usage is not None else None,
        }

    def begin(self) -> bool:
        """Start the stream: headers, ``response.created`` and ``response.in_progress``."""
        self.start_stream()
        return self.event(
            "response.created", {"response": self.response_object("in_progress")}
        ) and self.event("response.in_progress", {"response": self.response_object("in_progress")})

    def complete(self, usage: Usage) -> bool:
        """``response.completed`` with usage, then the end of the stream."""
        ok = self.event(
            "response.completed", {"response": self.response_object("completed", usage)}
        )
        self.finish_stream()
        return ok

    def message(self, text: str, chunks: Iterable[str], delay: float = 0.0) -> bool:
        """Stream one assistant message item; False if the client went away mid-way."""
        index = len(self.output)
        item_id = _new_id("msg")
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        if not self.event("response.output_item.added", {"output_index": index, "item": item}):
            return False
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        if not self.event("response.content_part.added", {**where, "part": part}):
            return False
        for chunk in chunks:
            if delay and not self.pause(delay):
                return False
            if not self.event(
                "response.output_text.delta", {**where, "delta": chunk, "logprobs": []}
            ):
                return False
        done_part = {**part, "text": text}
        if not self.event("response.output_text.done", {**where, "text": text, "logprobs": []}):
            return False
        if not self.event("response.content_part.done", {**where, "part": done_part}):
            return False
        done = {**item, "status": "completed", "content": [done_part]}
        self.output.append(done)
        return self.event("response.output_item.done", {"output_index": index, "item": done})

    def function_call(self, name: str, arguments: str) -> bool:
        """Stream one ``function_call`` output item (a tool call the model makes)."""
        index = len(self.output)
        item_id = _new_id("fc")
        item: dict[str, Any] = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "call_id": _new_id("call"),
            "name": name,
            "arguments": "",
        }
        if not self.event("response.output_item.added", {"output_index": index, "item": item}):
            return False
        where = {"item_id": item_id, "output_index": index}
        if not self.event("response.function_call_arguments.delta", {**where, "delta": arguments}):
            return False
        if not self.event(
            "response.function_call_arguments.done", {**where, "arguments": arguments}
        ):
            return False
        done = {**item, "status": "completed", "arguments": arguments}
        self.output.append(done)
        return self.event("response.output_item.done", {"output_index": index, "item": done})


class Script:
    """One scripted answer to one ``POST /v1/responses``."""

    name = "script"

    def play(self, responder: Responder) -> None:
        """Write the whole HTTP response through ``responder``."""
        raise NotImplementedError


def _split(text: str, parts: int) -> list[str]:
    """Cut ``text`` into about ``parts`` pieces (at least one; never an empty piece)."""
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class TextReply(Script):
    """An assistant message streamed in a few deltas."""

    text: str
    chunks: int = 3
    usage: Usage = field(default_factory=Usage)
    delay: float = 0.0
    name: str = "text"

    def play(self, responder: Responder) -> None:
        """Stream the message, then ``response.completed``."""
        if not responder.begin():
            return
        if not responder.message(self.text, _split(self.text, self.chunks), self.delay):
            responder.request.disconnected = True
            return
        responder.complete(self.usage)


@dataclass
class ShellCall(Script):
    """The model asks to run a shell command, through whichever shell tool Codex offers.

    Codex offers one of several tools depending on its version and features:
    ``exec_command`` (``{"cmd": ...}``, the unified exec tool), ``shell_command``
    (``{"command": "<string>"}``) or ``shell`` (``{"command": [argv]}``). The tool is
    picked from the request's ``tools`` list. ``extra`` arguments are added as given
    (e.g. ``{"sandbox_permissions": "require_escalated", "justification": "..."}`` for
    ``exec_command``, which makes Codex ask for approval under ``on-request``).
    """

    command: str
    text: str | None = None  # an optional assistant message before the call
    usage: Usage = field(default_factory=Usage)
    workdir: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    name: str = "shell"

    def arguments_for(self, tools: list[str]) -> tuple[str, dict[str, Any]]:
        """The tool name and arguments for the offered ``tools``."""
        extra: dict[str, Any] = {"workdir": self.workdir} if self.workdir else {}
        extra.update(self.extra)
        if "exec_command" in tools:
            return "exec_command", {"cmd": self.command, "yield_time_ms": 10000, **extra}
        if "shell_command" in tools:
            return "shell_command", {"command": self.command, "timeout_ms": 10000, **extra}
        return "shell", {"command": ["bash", "-lc", self.command], "timeout_ms": 10000, **extra}

    def play(self, responder: Responder) -> None:
        """Stream an optional message and the function call, then ``response.completed``."""
        tool, args = self.arguments_for(responder.request.tool_names)
        if not responder.begin():
            return
        if self.text is not None and not responder.message(self.text, _split(self.text, 2)):
            return
        if responder.function_call(tool, json.dumps(args)):
            responder.complete(self.usage)


@dataclass
class SlowText(Script):
    """A message streamed slowly (for interrupts); notices the client going away."""

    text: str
    chunks: int = 50
    delay: float = 0.2
    usage: Usage = field(default_factory=Usage)
    name: str = "slow_text"

    def play(self, responder: Responder) -> None:
        """Stream one delta per ``delay``; stop as soon as the client closes the stream."""
        if not responder.begin():
            responder.request.disconnected = True
            return
        if not responder.message(self.text, _split(self.text, self.chunks), self.delay):
            responder.request.disconnected = True
            return
        responder.complete(self.usage)


@dataclass
class ErrorReply(Script):
    """A plain HTTP error response (no stream), e.g. 500 or 429."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    name: str = "error"

    def play(self, responder: Responder) -> None:
        """Send the status with a JSON error body shaped like the API's."""
        body = self.body
        if body is None:
            body = {
                "error": {
                    "message": f"fake-openai scripted error {self.status}",
                    "type": "server_error" if self.status >= 500 else "rate_limit_error",
                    "param": None,
                    "code": None,
                }
            }
        responder.send_json(self.status, body, self.headers)


@dataclass
class StreamFailure(Script):
    """A stream that starts normally and ends with ``response.failed``."""

    message: str = "fake-openai: the model failed"
    code: str = "server_error"
    name: str = "stream_failure"

    def play(self, responder: Responder) -> None:
        """``response.created`` then ``response.failed`` with an error object."""
        if not responder.begin():
            return
        failed = responder.response_object("failed")
        failed["error"] = {"code": self.code, "message": self.message}
        responder.event("response.failed", {"response": failed})
        responder.finish_stream()


def text(message: str, *, chunks: int = 3, usage: Usage | None = None) -> TextReply:
    """A turn that answers ``message`` (streamed in ``chunks`` deltas)."""
    return TextReply(message, chunks=chunks, usage=usage or Usage())


def shell(
    command: str,
    *,
    text: str | None = None,
    workdir: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ShellCall:
    """A turn whose model output is a call to run ``command`` in a shell."""
    return ShellCall(command, text=text, workdir=workdir, extra=dict(extra or {}))


def slow_text(message: str, *, chunks: int = 50, delay: float = 0.2) -> SlowText:
    """A turn that streams ``message`` in ``chunks`` deltas, ``delay`` seconds apart."""
    return SlowText(message, chunks=chunks, delay=delay)


def error(status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> ErrorReply:
    """A turn answered with HTTP ``status`` and a JSON ``body`` (an API error by default)."""
    return ErrorReply(status, body, dict(headers or {}))


def stream_failure(message: str = "fake-openai: the model failed") -> StreamFailure:
    """A turn whose stream ends with ``response.failed``."""
    return StreamFailure(message)


class _Server(FakeHTTPServer):
    fake: FakeOpenAI


class _Handler(FakeHandler[RecordedRequest]):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """``GET /v1/models`` (and anything else: 404, recorded)."""
        request = self._record()
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if path.rstrip("/").endswith("/models"):
            payload = {
                "object": "list",
                "data": [{"id": fake.model, "object": "model", "created": 0, "owned_by": "fake"}],
                "models": [],
            }
            request.script = "models"
            self.send_body(200, json.dumps(payload).encode(), "application/json")
            return
        request.script = "not_found"
        self.send_body(404, b'{"error": {"message": "not found"}}', "application/json")

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        """``POST /v1/responses`` plays the next script; other paths get 404."""
        request = self._record()
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if not path.rstrip("/").endswith("/responses"):
            request.script = "not_found"
            self.send_body(404, b'{"error": {"message": "not found"}}', "application/json")
            return
        script = fake._next_reply()
        request.script = script.name
        responder = Responder(self, request, fake.model)
        try:
            script.play(responder)
        finally:
            fake._changed()
            self.close_connection = self.close_connection or request.disconnected


class FakeOpenAI(FakeServer[Script, RecordedRequest]):
    """A scriptable fake Responses API server on 127.0.0.1 (a context manager).

    ``url`` is the provider ``base_url`` (ending in ``/v1``). Scripts are played in
    order, one per ``POST /v1/responses``; :meth:`enqueue` adds more at any time.
    """

    name = "fake-openai"
    server_type = _Server
    handler_type = _Handler
    url_path = "/v1"

    def __init__(
        self,
        scripts: Iterable[Script] = (),
        *,
        model: str = DEFAULT_MODEL,
        default: Script | None = None,
    ) -> None:
        super().__init__(scripts, default or TextReply(UNSCRIPTED_TEXT, name="unscripted"))
        self.model = model

    def enqueue(self, *scripts: Script) -> None:
        """Append scripts to the queue (:meth:`add`)."""
        self.add(*scripts)

    def _new_request(
        self, index: int, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> RecordedRequest:
        return RecordedRequest(index, method, path, headers, raw, body)

    def responses_requests(self) -> list[RecordedRequest]:
        """The ``POST .../responses`` requests received so far."""
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/responses")]

    def wait_for_disconnect(self, timeout: float) -> RecordedRequest:
        """Wait until a reply was cut short because the client closed the connection."""
        found: list[RecordedRequest] = []

        def gone(fake: FakeOpenAI) -> bool:
            found[:] = [r for r in fake._requests if r.disconnected]
            return bool(found)

        self.wait_until(gone, timeout, "the client to close a stream")
        return found[0]

    def iter_bodies(self) -> Iterator[Any]:
        """The parsed JSON bodies of the responses requests, in order."""
        for request in self.responses_requests():
            yield request.body
