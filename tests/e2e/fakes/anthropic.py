"""A scriptable fake of the Anthropic Messages API, for running the real Claude Code CLI.

Dependency-free: the stdlib ``http.server`` in a background thread, on 127.0.0.1 and a
free port. ``POST /v1/messages`` answers either with a Server-Sent-Events stream shaped
exactly like the real API's (``message_start``, ``content_block_start``,
``content_block_delta`` with ``text_delta`` / ``input_json_delta``, ``content_block_stop``,
``message_delta`` with ``stop_reason`` and ``usage``, ``message_stop``), or with one JSON
message when the request has ``"stream": false``. Every request is recorded.

Tests script the model with a queue of *turns*, each answering one model call::

    with FakeAnthropic([tool_use("Bash", {"command": "echo hi"}), text("done")]) as server:
        env = claude_env(server.url, ...)
        ...
        assert server.tool_results()[0]["content"] == "hi"

The CLI may also make model calls of its own that are not part of the conversation (a
one-token quota probe, title or topic generation on the small model; version 2.1.330 in
``-p`` stream-json mode made none). Those are told apart from conversation turns by
:func:`is_side_request` and answered with a short canned text, so they never consume
the scripted turns. When the queue is empty a conversation call
gets :attr:`FakeAnthropic.default_turn` (a short text), so a test that forgot a turn
fails on its own assertions rather than hanging.

Other endpoints the CLI may call are answered sensibly (``count_tokens`` with a count,
``/v1/models`` with a small list, anything else with an empty JSON object) and logged.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fakes.server import FakeHandler, FakeHTTPServer, FakeServer

__all__ = [
    "FakeAnthropic",
    "RecordedRequest",
    "Turn",
    "TextTurn",
    "ToolUseTurn",
    "ErrorTurn",
    "HangTurn",
    "StreamErrorTurn",
    "text",
    "slow_text",
    "tool_use",
    "error",
    "overloaded",
    "hang",
    "stream_error",
    "is_side_request",
]

JsonDict = dict[str, Any]

DEFAULT_MODEL = "claude-sonnet-4-5"


# --------------------------------------------------------------------------- requests


@dataclass
class RecordedRequest:
    """One HTTP request the fake server received."""

    seq: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body, or the raw text when it is not JSON, or None when empty."""
    received_at: float
    side: bool = False
    """True for a model call that is not a conversation turn (see is_side_request)."""
    turn: str | None = None
    """The name of the scripted turn that answered this request (messages only)."""
    disconnected: bool = False
    """True when the client went away before the answer was complete."""
    deltas_sent: int = 0
    """How many ``content_block_delta`` events have been streamed so far."""
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when the server has finished answering (or noticed the client left)."""

    @property
    def is_messages(self) -> bool:
        """Whether this is a ``POST /v1/messages`` model call."""
        return self.method == "POST" and self.path.split("?", 1)[0] == "/v1/messages"

    @property
    def messages(self) -> list[JsonDict]:
        """The ``messages`` array of a model call (empty for other requests)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []


def _user_text(message: JsonDict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def is_side_request(body: Any) -> bool:
    """Whether a ``/v1/messages`` body is one of the CLI's own calls, not a turn.

    The conversation calls of Claude Code always carry the tool definitions and a
    ``max_tokens`` in the thousands; its side calls (the ``quota`` probe with
    ``max_tokens: 1``, title/topic/summary generation on the small fast model) carry
    no tools.
    """
    if not isinstance(body, dict):
        return True
    if body.get("max_tokens") == 1:
        return True
    return not body.get("tools")


# --------------------------------------------------------------------------- turns


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class _Writer:
    """Writes one SSE response with chunked transfer encoding; raises _ClientGone as
    soon as the client has left."""

    def __init__(
        self, handler: FakeHandler[Any], on_event: Callable[[str], None] | None = None
    ) -> None:
        self._handler = handler
        self._on_event = on_event

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (pacing a slow stream), raising _ClientGone when it leaves."""
        if not self._handler.wait_open(seconds):
            raise _ClientGone

    def raw(self, data: bytes) -> None:
        """Write one HTTP chunk."""
        if not self._handler.write_chunk(data):
            raise _ClientGone

    def event(self, name: str, data: JsonDict) -> None:
        """Write one SSE event."""
        self.raw(f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode())
        if self._on_event is not None:
            self._on_event(name)

    def end(self) -> None:
        """Write the terminating zero-length chunk."""
        self.raw(b"")


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}{uuid.uuid4().hex[:16]}"


def _usage(input_tokens: int, output_tokens: int) -> JsonDict:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _chunks(value: str, size: int) -> list[str]:
    if not value:
        return [""]
    return [value[i : i + size] for i in range(0, len(value), size)]


class Turn:
    """One scripted answer to one model call. Subclasses say what is streamed."""

    name = "turn"

    def blocks(self) -> list[JsonDict]:
        """The content blocks of the complete message."""
        raise NotImplementedError

    stop_reason = "end_turn"
    chunk_size = 16
    """Characters (text) or JSON characters (tool input) per delta event."""
    delay = 0.0
    """Seconds to wait before each delta event (a slow stream)."""

    def status(self) -> int:
        """The HTTP status of the answer."""
        return 200

    def message(self, model: str) -> JsonDict:
        """The whole message, as returned by a non-streaming call."""
        blocks = self.blocks()
        return {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": _usage(10, self.output_tokens(blocks)),
        }

    @staticmethod
    def output_tokens(blocks: list[JsonDict]) -> int:
        """A plausible output-token count for ``blocks`` (about 4 characters a token)."""
        size = sum(len(json.dumps(block)) for block in blocks)
        return max(1, size // 4)

    def stream(self, out: _Writer, model: str) -> None:
        """Stream the message as the real API does."""
        blocks = self.blocks()
        start = self.message(model)
        start.update(content=[], stop_reason=None, usage=_usage(10, 1))
        out.event("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(blocks):
            self._stream_block(out, index, block)
        out.event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": self.output_tokens(blocks)},
            },
        )
        out.event("message_stop", {"type": "message_stop"})

    def _stream_block(self, out: _Writer, index: int, block: JsonDict) -> None:
        if block["type"] == "text":
            start: JsonDict = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": part}
                for part in _chunks(block["text"], self.chunk_size)
            ]
        elif block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            encoded = json.dumps(block["input"], separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(encoded, self.chunk_size)
            ]
        else:  # pragma: no cover - only text and tool_use are scripted
            raise ValueError(f"cannot stream block type {block['type']!r}")
        out.event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        if index == 0:
            out.event("ping", {"type": "ping"})  # where the real API sends its first ping
        for delta in deltas:
            if self.delay:
                out.pause(self.delay)
            out.event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        out.event("content_block_stop", {"type": "content_block_stop", "index": index})


@dataclass
class TextTurn(Turn):
    """The model answers with text and ends its turn."""

    text: str
    delay: float = 0.0
    chunk_size: int = 16
    name: str = "text"

    def blocks(self) -> list[JsonDict]:
        """One text block."""
        return [{"type": "text", "text": self.text}]


@dataclass
class ToolUseTurn(Turn):
    """The model calls one tool (optionally after some text); stop_reason ``tool_use``."""

    tool: str
    input: JsonDict
    preamble: str | None = None
    tool_use_id: str = field(default_factory=lambda: _new_id("toolu"))
    delay: float = 0.0
    chunk_size: int = 16
    name: str = "tool_use"
    stop_reason = "tool_use"

    def blocks(self) -> list[JsonDict]:
        """An optional text block, then the tool_use block."""
        blocks: list[JsonDict] = []
        if self.preamble:
            blocks.append({"type": "text", "text": self.preamble})
        blocks.append(
            {"type": "tool_use", "id": self.tool_use_id, "name": self.tool, "input": self.input}
        )
        return blocks


@dataclass
class ErrorTurn(Turn):
    """The API fails: an HTTP error status with the API's JSON error body."""

    status_code: int = 500
    error_type: str = "api_error"
    error_message: str = "Internal server error"
    body: JsonDict | None = None
    should_retry: bool | None = None
    """Sent as the ``x-should-retry`` header when not None (the SDK honours it)."""
    retry_after: float | None = None
    """Sent as the ``retry-after`` header (seconds) when not None."""
    headers: dict[str, str] | None = None
    """More response headers (e.g. the ``anthropic-ratelimit-unified-*`` ones)."""
    name: str = "error"

    def blocks(self) -> list[JsonDict]:
        """Not a message: no blocks."""
        return []

    def status(self) -> int:
        """The error status."""
        return self.status_code

    def error_body(self) -> JsonDict:
        """The JSON error object the real API sends."""
        if self.body is not None:
            return self.body
        return {
            "type": "error",
            "error": {"type": self.error_type, "message": self.error_message},
            "request_id": _new_id("req"),
        }


@dataclass
class StreamErrorTurn(Turn):
    """HTTP 200 and a stream that starts normally, then an SSE ``error`` event mid-way.

    The real API does this when it becomes overloaded during a response.
    """

    partial_text: str = "Partial answer"
    error_type: str = "overloaded_error"
    error_message: str = "Overloaded"
    name: str = "stream_error"

    def blocks(self) -> list[JsonDict]:
        """The text streamed before the error."""
        return [{"type": "text", "text": self.partial_text}]

    def stream(self, out: _Writer, model: str) -> None:
        """message_start, a started text block with some deltas, then ``event: error``."""
        start = self.message(model)
        start.update(content=[], stop_reason=None, usage=_usage(10, 1))
        out.event("message_start", {"type": "message_start", "message": start})
        out.event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for part in _chunks(self.partial_text, self.chunk_size):
            out.event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": part},
                },
            )
        out.event("error", {"type": "error", "error": self.error_object()})

    def error_object(self) -> JsonDict:
        """The ``error`` member of the error event."""
        return {"type": self.error_type, "message": self.error_message}


@dataclass
class HangTurn(Turn):
    """Start a stream (``message_start``) and then send nothing until the client leaves."""

    max_seconds: float = 60.0
    name: str = "hang"

    def blocks(self) -> list[JsonDict]:
        """No blocks are ever sent."""
        return []

    def stream(self, out: _Writer, model: str) -> None:
        """Send message_start, then wait for the client to go away."""
        start = self.message(model)
        start.update(content=[], stop_reason=None, usage=_usage(10, 1))
        out.event("message_start", {"type": "message_start", "message": start})
        out.pause(self.max_seconds)


def text(value: str) -> TextTurn:
    """A turn answering with ``value`` as text (streamed in small deltas)."""
    return TextTurn(value)


def slow_text(value: str, delay: float = 0.25, chunk_size: int = 4) -> TextTurn:
    """A turn streaming ``value`` slowly: ``chunk_size`` characters every ``delay`` s.

    The server checks for a gone client while it waits, so a test can interrupt the
    CLI mid-stream and then see :attr:`RecordedRequest.disconnected`.
    """
    return TextTurn(value, delay=delay, chunk_size=chunk_size, name="slow_text")


def tool_use(
    tool: str, input: JsonDict, *, preamble: str | None = None, tool_use_id: str | None = None
) -> ToolUseTurn:
    """A turn calling ``tool`` with ``input``; script the follow-up reply as the next turn."""
    turn = ToolUseTurn(tool, input, preamble=preamble)
    if tool_use_id is not None:
        turn.tool_use_id = tool_use_id
    return turn


def error(
    status: int = 500,
    message: str | None = None,
    *,
    error_type: str | None = None,
    body: JsonDict | None = None,
    should_retry: bool | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> ErrorTurn:
    """A turn failing with HTTP ``status`` and the API's error JSON.

    ``error_type`` defaults from the status as the real API does (500 ``api_error``,
    529 ``overloaded_error``, 429 ``rate_limit_error``, 400 ``invalid_request_error``, ...).
    """
    default_types = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = error_type or default_types.get(status, "api_error")
    default_message = "Overloaded" if status == 529 else "Internal server error"
    return ErrorTurn(
        status_code=status,
        error_type=kind,
        error_message=message or default_message,
        body=body,
        should_retry=should_retry,
        retry_after=retry_after,
        headers=headers,
    )


def overloaded() -> ErrorTurn:
    """A 529 ``overloaded_error``, as the real API sends under load."""
    return error(529)


def stream_error(
    partial_text: str = "Partial answer", error_type: str = "overloaded_error"
) -> StreamErrorTurn:
    """A turn whose stream breaks off with an SSE ``error`` event after some text."""
    return StreamErrorTurn(partial_text=partial_text, error_type=error_type)


def hang(max_seconds: float = 60.0) -> HangTurn:
    """A turn that opens the stream and then stalls until the client disconnects."""
    return HangTurn(max_seconds=max_seconds)


# --------------------------------------------------------------------------- server


class _Server(FakeHTTPServer):
    fake: FakeAnthropic


class _Handler(FakeHandler[RecordedRequest]):
    server: _Server

    def _parse(self, raw: bytes) -> Any:
        """The JSON body, or its text when it is not JSON (None when empty)."""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _handle(self) -> None:
        fake = self.server.fake
        request = self._record()
        try:
            if request.is_messages:
                self._messages(request)
            elif self.command == "POST" and self.path.startswith("/v1/messages/count_tokens"):
                self._json(200, {"input_tokens": 100})
            elif self.command == "GET" and self.path.startswith("/v1/models"):
                self._json(200, _models_page())
            elif self.command == "HEAD":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._json(200, {})
        except _ClientGone:
            request.disconnected = True
            self.close_connection = True
        finally:
            fake._finished(request)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

    def _headers(self, status: int, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("request-id", _new_id("req"))
        self.send_header("anthropic-organization-id", "00000000-0000-0000-0000-000000000000")
        for name, value in (extra or {}).items():
            self.send_header(name, value)

    def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._headers(status, "application/json", extra)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            raise _ClientGone from exc

    def _messages(self, request: RecordedRequest) -> None:
        fake = self.server.fake
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or DEFAULT_MODEL)
        turn = fake.side_turn if request.side else fake._next_reply()
        request.turn = turn.name
        if isinstance(turn, ErrorTurn):
            extra: dict[str, str] = {}
            if turn.should_retry is not None:
                extra["x-should-retry"] = "true" if turn.should_retry else "false"
            if turn.retry_after is not None:
                extra["retry-after"] = f"{turn.retry_after:g}"
            extra.update(turn.headers or {})
            self._json(turn.status(), turn.error_body(), extra)
            return
        if not body.get("stream"):
            if isinstance(turn, HangTurn):
                # Stall the non-streaming fallback too; raises when the client leaves.
                _Writer(self).pause(turn.max_seconds)
            if isinstance(turn, StreamErrorTurn):
                # What the stream broke off with, as a plain error response.
                status = 529 if turn.error_type == "overloaded_error" else 500
                error_body = {"type": "error", "error": turn.error_object()}
                self._json(status, error_body)
            else:
                self._json(200, turn.message(model))
            return
        self._headers(200, "text/event-stream; charset=utf-8", {"Cache-Control": "no-cache"})
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        out = _Writer(self, lambda name: fake._streamed(request, name))
        turn.stream(out, model)
        out.end()


def _models_page() -> JsonDict:
    models = [
        {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": "2025-01-01T00:00:00Z",
        }
        for name in (DEFAULT_MODEL, "claude-haiku-4-5", "claude-opus-4-1")
    ]
    return {
        "data": models,
        "has_more": False,
        "first_id": models[0]["id"],
        "last_id": models[-1]["id"],
    }


class FakeAnthropic(FakeServer[Turn, RecordedRequest]):
    """The fake API server. Use as a context manager; ``url`` is its base URL
    (``ANTHROPIC_BASE_URL``).

    ``turns`` are played in order, one per conversation model call; :meth:`add` queues
    more while the server runs. ``side_turn`` answers the CLI's own side calls.
    """

    name = "fake-anthropic"
    server_type = _Server
    handler_type = _Handler

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        default_turn: Turn | None = None,
        side_turn: Turn | None = None,
        side_filter: Callable[[Any], bool] = is_side_request,
    ) -> None:
        super().__init__(turns, default_turn or text("(the fake API has no more scripted turns)"))
        self.side_turn: Turn = side_turn or text("OK")
        self._side_filter = side_filter

    @property
    def default_turn(self) -> Turn:
        """What a conversation call gets once the queue is empty."""
        return self._default

    @property
    def pending_turns(self) -> int:
        """How many scripted turns have not been played yet (:attr:`pending`)."""
        return self.pending

    def _new_request(
        self, index: int, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> RecordedRequest:
        request = RecordedRequest(index + 1, method, path, headers, body, time.time())
        if request.is_messages:
            request.side = self._side_filter(body)
        return request

    def _streamed(self, request: RecordedRequest, event: str) -> None:
        if event == "content_block_delta":
            with self._cond:
                request.deltas_sent += 1
                self._cond.notify_all()

    def _finished(self, request: RecordedRequest) -> None:
        with self._cond:
            request.done.set()
            self._cond.notify_all()

    # -- inspection

    def turn_requests(self) -> list[RecordedRequest]:
        """The conversation model calls (``/v1/messages`` minus side calls), in order."""
        return [r for r in self.requests if r.is_messages and not r.side]

    def other_requests(self) -> list[RecordedRequest]:
        """Every request that is not a conversation model call."""
        return [r for r in self.requests if not (r.is_messages and not r.side)]

    def wait_for(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 10.0, count: int = 1
    ) -> list[RecordedRequest]:
        """Block until ``count`` recorded requests match ``predicate``; return them.

        Raise TimeoutError after ``timeout`` seconds.
        """
        matched: list[RecordedRequest] = []

        def enough(fake: FakeAnthropic) -> bool:
            matched[:] = [r for r in fake.requests if predicate(r)]
            return len(matched) >= count

        def seen() -> str:
            return f"{len(matched)}/{count} matching requests; seen: " + str(
                [(r.method, r.path) for r in self.requests]
            )

        self.wait_until(enough, timeout, seen)
        return list(matched)

    def wait_for_turns(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` conversation model calls have arrived."""
        return self.wait_for(lambda r: r.is_messages and not r.side, timeout, count)

    def wait_for_deltas(
        self, count: int, timeout: float = 10.0, turn_index: int = -1
    ) -> RecordedRequest:
        """Block until a conversation call has streamed ``count`` delta events.

        ``turn_index`` picks the call (default: the latest one). Use it to act in the
        middle of a slow stream, e.g. to interrupt once some text is out.
        """
        return self.wait_for(
            lambda r: r is self._turn_at(turn_index) and r.deltas_sent >= count, timeout
        )[0]

    def wait_for_disconnect(self, timeout: float = 10.0, turn_index: int = -1) -> RecordedRequest:
        """Block until the client has abandoned a conversation call (see slow_text)."""

        def gone(request: RecordedRequest) -> bool:
            return request is self._turn_at(turn_index) and request.disconnected

        return self.wait_for(gone, timeout)[0]

    def _turn_at(self, index: int) -> RecordedRequest | None:
        turns = self.turn_requests()
        try:
            return turns[index]
        except IndexError:
            return None

    def tool_results(self) -> list[JsonDict]:
        """Every ``tool_result`` block the CLI sent back, in the order first seen."""
        seen: dict[str, JsonDict] = {}
        for request in self.turn_requests():
            for block in _blocks(request.messages):
                if block.get("type") == "tool_result":
                    seen.setdefault(str(block.get("tool_use_id")), block)
        return list(seen.values())

    def user_texts(self, request: RecordedRequest | None = None) -> list[str]:
        """The text of each user message in ``request`` (default: the last turn call)."""
        if request is None:
            turns = self.turn_requests()
            if not turns:
                return []
            request = turns[-1]
        return [_user_text(m) for m in request.messages if m.get("role") == "user"]


def _blocks(messages: list[JsonDict]) -> Iterator[JsonDict]:
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            yield from (block for block in content if isinstance(block, dict))
