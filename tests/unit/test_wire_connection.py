"""The request side of a server connection, in memory: a fake sink, no socket, no loop.

Order, the pause policy, answers in pieces, bad frames, the half-close policy and the
shutdown, as :class:`RequestConnection` decides them for the host and the daemon alike.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Generator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from agenthost.errors import Busy
from agenthost.protocol import MessageType, Request, encode_response, validate_payload
from agenthost.wire.connection import Pieces, Reply, RequestConnection

from badframes import BAD_FRAMES


class Later:
    """An awaitable answer; the test decides when and how it ends."""

    def __await__(self) -> Generator[Any, None, bytes]:  # pragma: no cover - never awaited
        raise AssertionError("the fake sink never awaits")
        yield


class FakeSink:
    """Records what the connection does to its transport. ``high`` plays the
    transport's high-water mark: past it the connection is told to pause its writes."""

    def __init__(self, high: int | None = None) -> None:
        self.out = bytearray()
        self.reading = True
        self.ended: str | None = None  # "close" or "abort"
        self.running: list[tuple[Awaitable[bytes | Pieces], Request]] = []
        self.high = high
        self.conn: RequestConnection[MessageType] | None = None

    def write(self, data: bytes) -> None:
        assert self.ended is None, "written after the end"
        self.out += data
        if self.high is not None and len(self.out) > self.high and self.conn is not None:
            self.conn.pause_writes()  # as a transport calls pause_writing from write()

    def pause_reading(self) -> None:
        assert self.reading
        self.reading = False

    def resume_reading(self) -> None:
        assert not self.reading
        self.reading = True

    def close(self) -> None:
        self.ended = self.ended or "close"

    def abort(self) -> None:
        self.ended = self.ended or "abort"

    def run(self, reply: Awaitable[bytes | Pieces], request: Request) -> None:
        self.running.append((reply, request))

    def drain(self) -> list[dict[str, Any]]:
        """The frames written so far (taken: the client read them)."""
        lines = bytes(self.out).split(b"\n")
        assert lines[-1] == b"", "half a frame"
        self.out.clear()
        return [json.loads(line) for line in lines[:-1]]


class FakeStream:
    """A stream on the connection (an attach, a watch)."""

    def __init__(self) -> None:
        self.on = False
        self.calls: list[str] = []

    def streaming(self) -> bool:
        return self.on

    def hold(self) -> None:
        self.calls.append("hold")

    def writable(self) -> None:
        self.calls.append("writable")

    def stop(self) -> None:
        self.calls.append("stop")
        self.on = False


class Service:
    """Answers by type: ping at once, status later, history in pieces, stop with an
    error, interrupt with a bug; ``pending`` ends the stream (like a detach)."""

    def __init__(self) -> None:
        self.served: list[Any] = []
        self.pieces: list[bytes] = [b"<1>", b"<2>", b"<3>\n"]
        self.conn: RequestConnection[MessageType] | None = None

    def dispatch(self, mtype: MessageType, payload: BaseModel, request: Request) -> Reply:
        self.served.append(request.id)
        if mtype is MessageType.STATUS:
            return Later()
        if mtype is MessageType.HISTORY:
            return iter(self.pieces)
        if mtype is MessageType.STOP:
            raise Busy("not now")
        if mtype is MessageType.INTERRUPT:
            raise ValueError("a bug")
        if mtype is MessageType.PENDING:
            assert self.conn is not None
            self.conn.stream.stop()
            self.conn.stream_ended()
        return encode_response(mtype, request.id, {})


def make(
    high: int | None = None, max_frame: int = 1 << 20
) -> tuple[RequestConnection[MessageType], FakeSink, FakeStream, Service]:
    sink, stream, service = FakeSink(high), FakeStream(), Service()
    conn = RequestConnection(
        sink, validate_payload, service.dispatch, max_frame=max_frame, stream=stream
    )
    sink.conn = service.conn = conn
    return conn, sink, stream, service


def req(mtype: str, rid: Any, payload: Any = None) -> bytes:
    return json.dumps({"type": mtype, "id": rid, "payload": payload or {}}).encode() + b"\n"


def ids(frames: list[dict[str, Any]]) -> list[Any]:
    return [f["id"] for f in frames]


def test_requests_are_answered_in_order_behind_an_awaited_answer() -> None:
    conn, sink, _, service = make()
    conn.receive(req("host.ping", 1) + req("host.status", 2) + req("host.ping", 3))
    assert ids(sink.drain()) == [1] and service.served == [1, 2]
    assert conn.busy and conn.waiting == 1 and not sink.reading  # 3 waits, unread
    ((_, request),) = sink.running
    conn.answer(request, encode_response("host.status", request.id, {}))
    assert ids(sink.drain()) == [2, 3] and sink.reading and not conn.busy


def test_an_awaited_answer_that_fails_gets_its_error_and_the_rest_goes_on() -> None:
    conn, sink, _, _ = make()
    conn.receive(req("host.status", "s") + req("host.ping", "p"))
    ((_, request),) = sink.running
    conn.fail(request, Busy("later"))
    status, ping = sink.drain()
    assert (status["id"], status["code"], status["error"]) == ("s", "busy", "later")
    assert ping["id"] == "p" and ping["success"]


def test_bad_frames_get_errors_and_the_connection_goes_on() -> None:
    conn, sink, _, _ = make()
    conn.receive(
        b"{not json\n[1]\n"
        + req("host.nope", "u")
        + b'{"type": "host.attach", "id": "a", "payload": {"offset": -1}}\n'
        + req("host.stop", "b")
        + req("host.interrupt", "i")
        + req("host.ping", "p")
    )
    frames = sink.drain()
    codes = [f.get("code") for f in frames]
    assert codes == [
        "bad_request",
        "bad_request",
        "unknown_type",
        "invalid_payload",
        "busy",
        "internal",
        None,
    ]
    assert frames[2]["error"] == "unknown message type: host.nope" and frames[2]["id"] == "u"
    assert "a bug" in frames[5]["error"]
    assert frames[-1]["id"] == "p" and sink.ended is None


@pytest.mark.parametrize(("frame", "code", "echo_type"), BAD_FRAMES)
def test_each_bad_frame_gets_its_code_and_echo_and_the_connection_goes_on(
    frame: bytes, code: str, echo_type: str
) -> None:
    conn, sink, _, _ = make()
    conn.receive(frame + b"\n" + req("host.ping", "p"))
    error, ping = sink.drain()
    assert (error["success"], error["code"], error["type"]) == (False, code, echo_type)
    assert isinstance(error["error"], str) and error["error"] and "payload" not in error
    assert ping["id"] == "p" and ping["success"] and sink.ended is None


def test_a_frame_over_the_limit_is_answered_then_the_connection_closes() -> None:
    conn, sink, _, service = make(max_frame=100)
    conn.receive(req("host.ping", 1) + b"x" * 200)
    conn.receive(req("host.ping", 2))  # the rest of that line cannot be told apart
    ping, error = sink.drain()
    assert ping["id"] == 1 and error["code"] == "frame_too_large" and error["type"] == ""
    assert sink.ended == "close" and conn.closed and service.served == [1]


def test_nothing_is_served_while_writes_are_paused() -> None:
    conn, sink, _, service = make()
    conn.pause_writes()
    assert not sink.reading
    conn.receive(req("host.ping", 1) + req("host.ping", 2))
    assert service.served == [] and conn.waiting == 2 and not sink.out
    conn.resume_writes()
    assert ids(sink.drain()) == [1, 2] and sink.reading


def test_an_answer_in_pieces_is_written_as_the_transport_drains() -> None:
    conn, sink, stream, service = make(high=2)  # every piece fills the transport
    conn.receive(req("host.history", "h") + req("host.ping", "p"))
    assert bytes(sink.out) == b"<1>" and stream.calls == ["hold"]
    assert conn.busy and not conn.writable and conn.waiting == 1 and not sink.reading
    sink.out.clear()
    conn.resume_writes()
    assert bytes(sink.out) == b"<2>" and service.served == ["h"]
    sink.out.clear()
    conn.resume_writes()
    assert bytes(sink.out) == b"<3>\n" and stream.calls == ["hold"]  # paused again
    sink.out.clear()
    conn.resume_writes()  # the end of the answer, then the stream, then the ping
    assert stream.calls == ["hold", "writable"] and ids(sink.drain()) == ["p"]
    assert service.served == ["h", "p"] and not conn.busy
    conn.resume_writes()
    assert sink.reading


def test_pieces_that_fail_midway_abort_the_connection() -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"kind":"response"'
        raise ValueError("a bug")

    conn, sink, _, service = make()
    service.pieces = pieces()  # type: ignore[assignment]
    conn.receive(req("host.history", "h") + req("host.ping", "p"))
    assert sink.ended == "abort" and conn.closed and service.served == ["h"]


def test_pieces_that_fail_at_once_get_an_error() -> None:
    def pieces() -> Iterator[bytes]:
        raise ValueError("a bug")
        yield b""

    conn, sink, _, service = make()
    service.pieces = pieces()  # type: ignore[assignment]
    conn.receive(req("host.history", "h") + req("host.ping", "p"))
    error, ping = sink.drain()
    assert error["code"] == "internal" and ping["id"] == "p" and sink.ended is None


def test_after_eof_what_was_asked_is_answered_then_the_connection_closes() -> None:
    conn, sink, _, _ = make()
    conn.receive(req("host.status", "s"))
    conn.receive_eof()
    assert sink.ended is None
    ((_, request),) = sink.running
    conn.answer(request, encode_response("host.status", "s", {}))
    assert ids(sink.drain()) == ["s"] and sink.ended == "close"


def test_after_eof_a_stream_goes_on_until_it_ends() -> None:
    conn, sink, stream, _ = make()
    stream.on = True
    conn.receive(req("host.ping", 1))
    conn.receive_eof()
    assert sink.ended is None
    conn.send(b'{"kind":"event"}\n')
    stream.on = False
    conn.stream_ended()
    assert sink.ended == "close" and len(sink.drain()) == 2


def test_a_stream_ended_by_a_request_after_eof_still_gets_its_answer() -> None:
    conn, sink, stream, _ = make()
    stream.on = True
    conn.receive_eof()
    conn.receive(req("host.pending", "d"))  # (read before the EOF, served after it)
    assert ids(sink.drain()) == ["d"] and sink.ended == "close"


def test_eof_with_nothing_pending_closes_at_once() -> None:
    conn, sink, _, _ = make()
    conn.receive_eof()
    assert sink.ended == "close" and conn.closed


def test_shutdown_finishes_what_is_in_flight_and_takes_nothing_new() -> None:
    conn, sink, stream, service = make()
    stream.on = True
    conn.receive(req("host.status", "s") + req("host.ping", "queued"))
    conn.shutdown()
    assert stream.calls == ["stop"] and not sink.reading and sink.ended is None
    conn.receive(req("host.ping", "late"))
    ((_, request),) = sink.running
    conn.answer(request, encode_response("host.status", "s", {}))
    assert ids(sink.drain()) == ["s"] and sink.ended == "close"
    assert service.served == ["s"]


def test_a_closed_connection_writes_nothing() -> None:
    conn, sink, stream, _ = make()
    conn.receive(req("host.status", "s"))
    conn.lost()
    assert stream.calls == ["stop"]
    ((_, request),) = sink.running
    conn.answer(request, encode_response("host.status", "s", {}))
    conn.send(b"x\n")
    assert not sink.out


@pytest.mark.parametrize("split", [1, 7, 1000])
def test_frames_split_anywhere_are_served_the_same(split: int) -> None:
    conn, sink, _, _ = make()
    data = b"".join(req("host.ping", i) for i in range(20))
    for at in range(0, len(data), split):
        conn.receive(data[at : at + split])
    assert ids(sink.drain()) == list(range(20))
