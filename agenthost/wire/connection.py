"""The request side of a server connection, sans-IO: frames in, answers out, in order.

One :class:`RequestConnection` per client, for every service (the host, the daemon).
It reads frames, validates them with the service's message table, hands them to the
service's ``dispatch`` and writes the answers, through a :class:`Sink` that the I/O
layer (:mod:`agenthost.wire.server`) implements over a transport. Its policies:

* **Order.** Requests are served one at a time, in the order they came: an answer that
  must be awaited (a :data:`Reply` that is an awaitable) makes the connection *busy*,
  and what comes behind waits.
* **Pause.** A request is served only while the connection's writes are not paused
  (its transport is below the high-water mark) and no answer is being written in
  pieces; frames that must wait stay in the inbox, and while any wait the client is not
  read. So a client that sends without reading its answers costs at most its write
  buffer, one read of requests and one piece: pipelining cannot multiply it.
* **Pieces.** A big answer (:data:`Pieces`) is written piece by piece, each produced
  when the transport has drained. A stream on the connection (:class:`Stream`) holds
  its events meanwhile, so that none lands inside the answer's line.
* **Bad frames.** A frame that is not a request gets its error and the connection goes
  on; a frame over the limit gets ``frame_too_large`` and the connection closes (the
  rest of such a line cannot be told from the next frame).
* **Half-close.** After the client's EOF, what it asked is answered and a stream goes
  on; the connection closes once nothing is left. (That the client has gone entirely
  only the I/O layer can tell: it watches for the hang-up.)
* **Shutdown.** What is in flight is answered, nothing new is read, the stream stops,
  then the connection closes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar

import structlog

from agenthost.errors import AgentHostError, ErrorCode, FrameTooLarge
from agenthost.wire.codec import Request, RequestError, decode_request, encode_error
from agenthost.wire.framing import DEFAULT_FRAME_LIMIT, FrameDecoder

if TYPE_CHECKING:  # (a host answers a ping without loading pydantic)
    from pydantic import BaseModel

log = structlog.get_logger("agenthost.wire")

Pieces = Iterator[bytes]
"""A response frame produced in pieces, written as the transport drains (big answers)."""

Reply = bytes | None | Pieces | Awaitable[bytes | Pieces]
"""What a handler returns: a response frame, None if it already wrote its response,
the pieces of a response frame, or an awaitable of either (served in order on that
connection)."""

M = TypeVar("M")

Validate = Callable[[Request], "tuple[M, BaseModel | None]"]
"""A message table's check of a request: its type and validated payload (None for a
request that takes none), or :class:`~agenthost.wire.codec.RequestError`."""

Dispatch = Callable[[M, "BaseModel | None", Request], Reply]
"""The service's handling of one validated request."""


class Sink(Protocol):
    """What a connection does to its transport (implemented by the I/O layer)."""

    def write(self, data: bytes) -> None:
        """Queue bytes for the client."""

    def pause_reading(self) -> None:
        """Read nothing more from the client until :meth:`resume_reading`."""

    def resume_reading(self) -> None:
        """Read from the client again."""

    def close(self) -> None:
        """Close once what was written is flushed."""

    def abort(self) -> None:
        """Close now, dropping what was not written."""

    def run(self, reply: Awaitable[bytes | Pieces], request: Request) -> None:
        """Await ``reply``, then call :meth:`RequestConnection.answer` with its result
        or :meth:`RequestConnection.fail` with its exception."""


class Stream(Protocol):
    """A stream of events on the connection (an attach, a watch), as the request side
    needs to know it."""

    def streaming(self) -> bool:
        """Whether a stream is going (it keeps a half-closed connection open)."""

    def hold(self) -> None:
        """An answer is about to be written in pieces: write no event until
        :meth:`writable`."""

    def writable(self) -> None:
        """The connection may write again (its transport drained, or an answer in
        pieces ended)."""

    def stop(self) -> None:
        """The connection closes: end the stream."""


class NoStream:
    """A connection without a stream."""

    def streaming(self) -> bool:
        return False

    def hold(self) -> None:
        pass

    def writable(self) -> None:
        pass

    def stop(self) -> None:
        pass


NO_STREAM: Final = NoStream()


class RequestConnection(Generic[M]):
    """Requests of one client, served in order over a :class:`Sink` (see the module)."""

    def __init__(
        self,
        sink: Sink,
        validate: Validate[M],
        dispatch: Dispatch[M],
        *,
        max_frame: int = DEFAULT_FRAME_LIMIT,
        stream: Stream = NO_STREAM,
    ) -> None:
        self.sink = sink
        self.validate = validate
        self.dispatch = dispatch
        self.stream = stream
        self.decoder = FrameDecoder(max_frame)
        self.write_paused = False  # the transport is above its high-water mark
        self.closed = False
        self.eof = False  # the client will send nothing more
        self.shutting_down = False
        self._inbox: deque[bytes | FrameTooLarge] = deque()  # read, not yet served
        self._busy = False  # an answer is awaited
        self._pieces: Pieces | None = None  # an answer being written in pieces
        self._pieces_request: Request | None = None
        self._pieces_sent = False
        self._reading = True
        self._serving = False  # inside a step that ends with a check for the close

    @property
    def busy(self) -> bool:
        """Whether an answer is awaited or being written in pieces."""
        return self._busy or self._pieces is not None

    @property
    def waiting(self) -> int:
        """Frames read and not yet served."""
        return len(self._inbox)

    @property
    def writable(self) -> bool:
        """Whether a frame may be written now: not paused, no answer half written."""
        return not (self.write_paused or self.closed or self._pieces is not None)

    # --- what happens to the connection -------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Bytes from the client."""
        if self.closed or self.shutting_down:
            return
        frames = self.decoder.feed(data)
        if frames:
            self._inbox.extend(frames)
            self._advance()

    def receive_eof(self) -> None:
        """The client shut down its writing side."""
        self.eof = True
        self._close_if_done()

    def pause_writes(self) -> None:
        """The transport is above its high-water mark."""
        self.write_paused = True
        # A client that does not read its responses must not make us buffer without
        # bound: stop reading its requests until it catches up.
        self._pause_reading()

    def resume_writes(self) -> None:
        """The transport drained below its low-water mark."""
        self.write_paused = False
        # In order: the rest of the answer being written, the requests that waited
        # (answers never wait behind a stream's catch-up), then the stream.
        self._advance()
        if self.writable:
            self.stream.writable()

    def lost(self) -> None:
        """The transport is closed."""
        self._end()
        self.closed = True

    def answer(self, request: Request, result: bytes | Pieces) -> None:
        """The awaited answer to ``request`` (see :meth:`Sink.run`)."""
        if isinstance(result, bytes):
            self.send(result)
        else:
            self._start_pieces(result, request)
        self._busy = False
        self._advance()

    def fail(self, request: Request, exc: Exception) -> None:
        """The awaited answer to ``request`` raised ``exc``."""
        self._send_failure(request, exc)
        self._busy = False
        self._advance()

    # --- what the service does ------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        """Write a frame (response or event bytes) to the client."""
        if not self.closed:
            self.sink.write(frame)

    def stream_ended(self) -> None:
        """The stream stopped: a half-closed connection may now be done."""
        if not self._serving:  # (else the step that stopped it checks, after its answer)
            self._close_if_done()

    def close(self) -> None:
        """Close after the frames written so far were flushed."""
        if self._end():
            self.sink.close()

    def abort(self) -> None:
        """Close now, dropping what was not written."""
        if self._end():
            self.sink.abort()

    def shutdown(self) -> None:
        """Finish what is in flight, take nothing new, stop the stream, then close."""
        if self.closed:
            return
        self.shutting_down = True
        self._inbox.clear()
        self._pause_reading()
        self.stream.stop()
        self._close_if_done()

    # --- serving ------------------------------------------------------------------------

    def _end(self) -> bool:
        if self.closed:
            return False
        self.closed = True
        self._inbox.clear()
        self._pieces = self._pieces_request = None
        self.stream.stop()
        return True

    def _pause_reading(self) -> None:
        if self._reading and not self.closed:
            self._reading = False
            self.sink.pause_reading()

    def _close_if_done(self) -> None:
        if (self.eof or self.shutting_down) and not (
            self.closed or self.busy or self._inbox or self.stream.streaming()
        ):
            self.close()

    def _advance(self) -> None:
        """Serve what waits, in order, as far as the connection may write.

        A request is served only when no earlier answer is pending or half written and
        the transport is below its high-water mark; frames that must wait stay in the
        inbox, and while any do, the client is not read (so the inbox holds at most one
        read of frames).
        """
        self._serving = True
        try:
            if self._pieces is not None:
                self._write_pieces()
            inbox = self._inbox
            while inbox and not (self.busy or self.write_paused or self.closed):
                self._process(inbox.popleft())
        finally:
            self._serving = False
        if self.closed:
            self._inbox.clear()
            return
        if self._inbox:
            self._pause_reading()
        elif not (self._reading or self.write_paused or self.shutting_down):
            self._reading = True
            self.sink.resume_reading()
        self._close_if_done()

    def _process(self, frame: bytes | FrameTooLarge) -> None:
        if isinstance(frame, FrameTooLarge):
            self.send(encode_error("", None, frame.code, frame.message))
            self.close()
            return
        try:
            request = decode_request(frame)
            mtype, payload = self.validate(request)
        except RequestError as exc:
            self.send(encode_error(exc.request_type, exc.request_id, exc.code, exc.message))
            return
        try:
            reply = self.dispatch(mtype, payload, request)
        except Exception as exc:  # a bug must not take the service down
            self._send_failure(request, exc)
            return
        if reply is None:
            return
        if isinstance(reply, bytes):
            self.send(reply)
        elif isinstance(reply, Iterator):
            self._start_pieces(reply, request)
        else:
            self._busy = True
            self.sink.run(reply, request)

    def _send_failure(self, request: Request, exc: Exception) -> None:
        if isinstance(exc, AgentHostError):
            self.send(encode_error(request.type, request.id, exc.code, exc.message))
            return
        log.error("request.failed", type=request.type, exc_info=exc)
        self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))

    def _start_pieces(self, pieces: Pieces, request: Request) -> None:
        self._pieces = pieces
        self._pieces_request = request
        self._pieces_sent = False
        self.stream.hold()
        self._write_pieces()

    def _write_pieces(self) -> None:
        """Write the pieces of the answer in progress while the transport takes them."""
        pieces = self._pieces
        request = self._pieces_request
        assert pieces is not None and request is not None
        while not (self.write_paused or self.closed):
            try:
                piece = next(pieces)
            except StopIteration:
                break
            except Exception as exc:  # a bug must not take the service down
                self._pieces = self._pieces_request = None
                if self._pieces_sent:  # half a line is out: the connection is lost
                    log.error("request.failed", type=request.type, exc_info=exc)
                    self.abort()
                else:
                    self._send_failure(request, exc)
                return
            self._pieces_sent = True
            self.send(piece)
        else:
            return  # paused (or closed): resume_writes goes on
        self._pieces = self._pieces_request = None
        self.stream.writable()
