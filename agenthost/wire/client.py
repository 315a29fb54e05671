"""The client core that every agenthost client stands on (asyncio).

:class:`ClientCore` owns one connection to a service's Unix socket: it connects
(retrying while the listen backlog is full), translates OS errors into the service's
errors, checks that the server runs as this user before anything is sent, reads
frames, matches responses to requests in order, and queues stream frames (a host's
events, the daemon's events and notices) for the caller. What a frame means is the
service's business: the decoder is a parameter.

Policy for stream frames the caller has not read: the read loop never waits for the
caller, so a response is resolved as soon as it arrives, whatever sits unread before
it. Stream frames are queued up to a bound (:class:`StreamLimit`: a count and bytes).
Past it the core stops queueing and *overflows*: that frame and every later stream
frame are discarded, and once the caller has read everything queued before the
overflow, :meth:`ClientCore.next_stream` reports it (returns None) so that the service
client can ask the server again from the last position it delivered (the host client
re-attaches, the daemon client re-watches). The request that does so is sent with
``resume_stream=True``: when its successful response is read, queueing starts again,
so the frames that follow it (the replay) are kept and nothing is lost or repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from pydantic import BaseModel

from agenthost.errors import (
    AgentHostError,
    Forbidden,
    NotConnected,
    ProtocolError,
    RequestTimeout,
    error_from_code,
)
from agenthost.wire.codec import Response, decode_payload, encode_request
from agenthost.wire.framing import CLIENT_FRAME_LIMIT, FrameDecoder
from agenthost.wire.peer import check_server

S = TypeVar("S")
M = TypeVar("M", bound=BaseModel)

READ_CHUNK: Final = 1 << 16
_RETRY_FIRST: Final = 0.001
_RETRY_MAX: Final = 0.05


@dataclass(frozen=True)
class StreamLimit:
    """How much of a stream a client queues for a caller that does not read it.

    ``items`` frames and ``bytes`` of frames at most; one frame is always accepted,
    however big, so that an event larger than ``bytes`` still gets through.
    """

    items: int = 4096
    bytes: int = 32 << 20


class Opener(Protocol):
    """Opens a client's connection some other way than connecting to a Unix socket
    (e.g. :class:`agenthost.wire.ssh.SshLink`: over ssh): ``open`` gives a connected
    AF_UNIX socket, ``ended`` says why a connection ended (given what the core saw),
    ``close`` cleans up after a connection was closed."""

    async def open(self) -> socket.socket: ...

    async def ended(self, error: AgentHostError) -> AgentHostError: ...

    async def close(self) -> None: ...


@dataclass
class _Pending:
    future: asyncio.Future[Response]
    resume_stream: bool


class ClientCore(Generic[S]):
    """One connection to a service: connect, requests, and the stream's queue.

    ``service`` names the server in messages ("host", "daemon"); ``peer`` is how a
    timeout names it ("the host for agent 'a1'"); ``decode`` turns a frame into a
    :class:`Response`, a stream item of type ``S``, or None for a frame to ignore (it
    raises ProtocolError for one that breaks the protocol). ``connect_error`` turns
    the OSError (or TimeoutError) of a failed connect into the service's error; a
    PermissionError is always Forbidden. ``id_prefix`` starts every request id.
    ``opener``: how to open the connection instead of connecting to ``socket_path``
    (which then only names it in messages). See the module docstring for the policy
    on unread stream frames.
    """

    def __init__(
        self,
        socket_path: Path,
        *,
        service: str,
        peer: str,
        decode: Callable[[bytes], Response | S | None],
        connect_error: Callable[[OSError | TimeoutError], AgentHostError],
        connect_timeout: float,
        id_prefix: str,
        timeout_hint: str | None = None,
        stream_limit: StreamLimit | None = None,
        opener: Opener | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.opener = opener
        self.service = service
        self.peer = peer
        self.connect_timeout = connect_timeout
        self.limit = stream_limit or StreamLimit()
        self.discarded = 0
        """Stream frames discarded since the stream last overflowed."""
        self._decode = decode
        self._connect_error = connect_error
        self._id_prefix = id_prefix
        self._timeout_hint = timeout_hint
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: deque[_Pending] = deque()
        self._ids = itertools.count(1)
        self._closed_error: AgentHostError | None = None
        self._stream: deque[tuple[S, bytes]] = deque()
        self._stream_bytes = 0
        self._stream_ready = asyncio.Event()
        self._discarding = False  # past the bound: stream frames are dropped
        self._report_overflow = False  # next_stream has yet to say so

    # --- connection -------------------------------------------------------------------

    @property
    def opened(self) -> bool:
        """True once connected and until closed (even if the peer went away)."""
        return self._writer is not None

    @property
    def connected(self) -> bool:
        """True while the connection is open and usable."""
        return self._writer is not None and self._closed_error is None

    @property
    def closed_error(self) -> AgentHostError | None:
        """Why the connection is no longer usable (None while it is)."""
        return self._closed_error

    async def connect(self, sock: socket.socket | None = None) -> None:
        """Connect and check the server's uid; does nothing when already connected.

        ``sock``: use this connected socket instead of connecting to ``socket_path``
        (a socket handed over, or one end of a socketpair in tests). Raise Forbidden
        (no permission on the socket, or a server of another user), or the service's
        error from ``connect_error`` (nobody listens, no accept within
        ``connect_timeout``).
        """
        if self._writer is not None:
            return
        if sock is None and self.opener is not None:
            sock = await self.opener.open()  # (its own errors: it knows what it opens)
        try:
            reader, writer = await asyncio.wait_for(self._open(sock), self.connect_timeout)
        except PermissionError as exc:
            await self._close_opener()
            raise Forbidden(f"not allowed to connect to {self.socket_path}") from exc
        except (OSError, TimeoutError) as exc:
            await self._close_opener()
            raise self._connect_error(exc) from exc
        try:
            check_server(writer.transport, self.socket_path, self.service)
        except Forbidden:
            writer.close()  # nothing was sent
            await self._close_opener()
            raise
        self._reader, self._writer = reader, writer
        self._closed_error = None
        self._stream.clear()  # what a previous connection left unread is not this one's
        self._stream_bytes = 0
        self._discarding = self._report_overflow = False
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def _open(
        self, sock: socket.socket | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if sock is not None:
            return await asyncio.open_unix_connection(sock=sock, limit=READ_CHUNK)
        delay = _RETRY_FIRST
        while True:
            try:
                return await asyncio.open_unix_connection(self.socket_path, limit=READ_CHUNK)
            except BlockingIOError:
                # The listen backlog is full (a connection storm): AF_UNIX answers
                # EAGAIN instead of queueing us. Retry until the connect timeout.
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    async def close(self) -> None:
        """Close; waiting requests fail with NotConnected and the stream ends.
        Safe to call twice. Raises nothing."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._read_task
            self._read_task = None
        await self._close_opener()
        self._fail(NotConnected("connection closed"))

    async def _close_opener(self) -> None:
        if self.opener is not None:
            await self.opener.close()

    # --- reading ----------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._reader is not None
        decoder = FrameDecoder(CLIENT_FRAME_LIMIT)
        error: AgentHostError = NotConnected(f"the {self.service} closed the connection")
        try:
            while data := await self._reader.read(READ_CHUNK):
                for frame in decoder.feed(data):
                    if isinstance(frame, AgentHostError):
                        raise frame
                    message = self._decode(frame)
                    if isinstance(message, Response):
                        self._resolve(message)
                    elif message is not None:
                        self._queue(message, frame)
        except AgentHostError as exc:
            error = exc
        except OSError as exc:
            error = NotConnected(f"connection lost: {exc}")
        if self.opener is not None:
            error = await self.opener.ended(error)
        self._fail(error)

    def _resolve(self, response: Response) -> None:
        if not self._pending:
            if not response.success:  # e.g. "forbidden" sent as the connection opened
                self._closed_error = error_from_code(response.code, response.error or "")
            return
        entry = self._pending.popleft()
        if entry.resume_stream and response.success:
            # Frames after this response are the replay the service was asked for.
            self._discarding = False
        if not entry.future.done():
            entry.future.set_result(response)

    def _queue(self, item: S, frame: bytes) -> None:
        if self._discarding:
            self.discarded += 1
            return
        if self._stream and (
            len(self._stream) >= self.limit.items
            or self._stream_bytes + len(frame) > self.limit.bytes
        ):
            self._discarding = self._report_overflow = True
            self.discarded = 1
            self._stream_ready.set()
            return
        self._stream.append((item, frame))
        self._stream_bytes += len(frame)
        self._stream_ready.set()

    def _fail(self, error: AgentHostError) -> None:
        if self._closed_error is None:
            self._closed_error = error
        while self._pending:
            future = self._pending.popleft().future
            if not future.done():
                future.set_exception(self._closed_error)
        self._stream_ready.set()

    # --- requests ---------------------------------------------------------------------

    async def request(
        self,
        mtype: str,
        payload: dict[str, object] | None,
        timeout: float,
        *,
        resume_stream: bool = False,
    ) -> Response:
        """Send one request and wait for its response (success or not).

        ``resume_stream``: this request asks the server to replay the stream after an
        overflow; stream frames are queued again from its response on. Connect first if
        needed. Raise NotConnected, RequestTimeout, ProtocolError (a response to
        another id), or what :meth:`connect` raises.
        """
        if self._writer is None:
            await self.connect()
        if self._closed_error is not None or self._writer is None:
            raise self._closed_error or NotConnected("not connected")
        request_id = f"{self._id_prefix}{next(self._ids)}"
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(future, resume_stream))
        try:
            self._writer.write(encode_request(mtype, payload, request_id=request_id))
        except (OSError, RuntimeError) as exc:
            raise NotConnected(f"cannot write to the {self.service}: {exc}") from exc
        try:
            response = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            # The entry stays queued so a late answer is matched to it, not to the next
            # request; cancelling it means nobody has to read its outcome.
            future.cancel()
            raise RequestTimeout(
                f"{self.peer} did not answer {mtype} within {timeout:g}s", hint=self._timeout_hint
            ) from None
        if response.id not in (request_id, None):
            raise ProtocolError(f"response id {response.id!r} does not match {request_id!r}")
        return response

    # --- the stream -------------------------------------------------------------------

    @property
    def queued(self) -> int:
        """Stream frames received and not yet read."""
        return len(self._stream)

    async def next_stream(self, timeout: float | None, what: str) -> tuple[S, bytes] | None:
        """The next stream item and its frame (without the newline), in order.

        Return None, once per overflow, when everything queued before an overflow has
        been read: the service client then asks for the stream again (see the module
        docstring). ``what`` names an item in the timeout's message. Raise the error
        that ended the connection once the queue is empty, RequestTimeout when nothing
        came within ``timeout`` seconds (None: no limit).
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._stream:
                item, frame = self._stream.popleft()
                self._stream_bytes -= len(frame)
                return item, frame
            if self._report_overflow:
                self._report_overflow = False
                return None
            if self._closed_error is not None:
                raise self._closed_error
            self._stream_ready.clear()
            left = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                await asyncio.wait_for(self._stream_ready.wait(), left)
            except TimeoutError:
                raise RequestTimeout(f"no {what} within {timeout:g}s") from None

    def end_overflow(self) -> None:
        """Forget an overflow (the caller ended the stream itself): stream frames are
        queued again and :meth:`next_stream` will not report it."""
        self._discarding = self._report_overflow = False


class ServiceClient(Generic[S]):
    """What every service's client shares, on one :class:`ClientCore` (``_core``, made
    by the subclass): connect and close, ``async with``, and requests whose failures
    raise the error class of their code and whose payloads are validated as models.

    Subclasses name their errors (``_connect_error``, :meth:`_failure`), may check the
    server after connecting (:meth:`_handshake`) and forget their stream on close
    (:meth:`_closing`).
    """

    socket_path: Path
    connect_timeout: float
    request_timeout: float
    _core: ClientCore[S]

    @property
    def connected(self) -> bool:
        """True while the connection is open and usable."""
        return self._core.connected

    async def connect(self) -> None:
        """Connect (does nothing when connected): see the subclass."""
        if self._core.opened:
            return
        self._core.connect_timeout = self.connect_timeout
        await self._core.connect()
        try:
            await self._handshake()
        except BaseException:
            # a server we refuse must not keep our connection and read task alive
            await self.close()
            raise

    async def _handshake(self) -> None:
        """Check the server right after connecting (nothing by default)."""

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with NotConnected, and a
        stream ends. Safe to call twice. Raises nothing."""
        self._closing()
        await self._core.close()

    def _closing(self) -> None:
        """The connection closes: forget the stream's state (nothing by default)."""

    async def __aenter__(self) -> Self:
        """Connect (see :meth:`connect`); the ``async with`` block closes."""
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection."""
        await self.close()

    async def _request(
        self,
        mtype: str,
        payload: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        resume_stream: bool = False,
    ) -> dict[str, Any]:
        """Send one request (connecting first if needed); return its payload, or raise
        what :meth:`_failure` makes of a failed response."""
        if not self._core.opened:
            await self.connect()
        wait = self.request_timeout if timeout is None else timeout
        response = await self._core.request(str(mtype), payload, wait, resume_stream=resume_stream)
        if not response.success:
            raise self._failure(response)
        return response.payload or {}

    def _failure(self, response: Response) -> AgentHostError:
        """The error a failed response raises: the class of its code."""
        return error_from_code(response.code, response.error or "request failed")

    async def _typed(
        self,
        model: type[M],
        mtype: str,
        payload: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        resume_stream: bool = False,
    ) -> M:
        """:meth:`_request`, its payload validated as ``model`` (ProtocolError if not)."""
        data = await self._request(mtype, payload, timeout=timeout, resume_stream=resume_stream)
        return decode_payload(model, data, mtype)
