"""The host's Unix socket: connections, request dispatch, event fan-out.

Each attached connection has a cursor, the next offset it must receive, and a send
queue: the transport's write buffer, bounded by ``max_queue`` bytes.

* A connection that keeps up gets each batch of new events as one ``write`` of bytes
  that were encoded once for everybody. The transport keeps references to those
  bytes, so clients that are behind by the same batches share their memory.
* When a client's queue passes ``max_queue``, it *lags*: new events stay in the ring
  only. When its transport drains (``resume_writing``), it is pumped from the ring, in
  slices, from its cursor, until it has caught up.
* If a lagging client's cursor falls out of the ring (the events it still needs were
  evicted), it is caught up from the journal (in a worker thread) when the host has
  one. Without a journal it can no longer be served exactly once: it is dropped
  (connection aborted) and may reattach from its last offset, with ``truncated``
  telling it what is gone. The agent and the other clients never wait for a slow one.

Requests are served in order, one at a time, and only while the connection's writes
are not paused (the transport is below its high-water mark): frames read meanwhile
wait in the inbox, and while any wait we stop reading that client. A big answer
(``host.history``) is written in pieces, each produced when the transport has drained;
a replay writes a slice only when the transport is below the mark. So a client that
sends without reading its answers costs at most its queue, one read of requests and one
piece: pipelining cannot multiply it.

Registration and replay snapshot happen in one synchronous step on the event loop, so
nothing can be produced in between (attach guarantee 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, cast

import structlog
from pydantic import BaseModel

from agenthost.errors import AgentHostError, ConfigError, ErrorCode, FrameTooLarge
from agenthost.journal import JournalReader
from agenthost.protocol import (
    DEFAULT_FRAME_LIMIT,
    FrameDecoder,
    MessageType,
    Request,
    RequestError,
    decode_request,
    encode_error,
    validate_payload,
)
from agenthost.ringbuffer import RingBuffer
from agenthost.wire.peer import admit_peer, peer_hung_up

if TYPE_CHECKING:
    from asyncio import Transport

log = structlog.get_logger("agenthost.server")

PUMP_SLICE: Final = 256  # events per write when catching a client up from the ring ...
PUMP_BYTES: Final = 256 << 10  # ... and about this many bytes at most (one event at least)
JOURNAL_READ: Final = 256 << 10  # bytes per journal read when catching a client up
DEFAULT_MAX_QUEUE: Final = 16 << 20  # bytes queued per client before it lags
HIGH_WATER: Final = 1 << 20  # transport pauses (and we stop reading requests) above this
CLOSE_TIMEOUT: Final = 2.0
HANGUP_POLL: Final = 1.0  # seconds between checks that a half-closed client is still there

Pieces = Iterator[bytes]
"""A response frame produced in pieces, written as the transport drains (big answers)."""

Reply = bytes | None | Pieces | Awaitable[bytes | Pieces]
"""What a handler returns: a response frame, None if it already wrote its response,
the pieces of a response frame, or an awaitable of either (served in order on that
connection)."""


class RequestHandler(Protocol):
    """What the server needs from the host."""

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel, request: Request
    ) -> Reply: ...


class Connection(asyncio.Protocol):
    """One client connection: request processing in order, and an optional stream."""

    def __init__(self, server: HostServer) -> None:
        self.server = server
        self.transport: Transport | None = None
        self.decoder = FrameDecoder(server.max_frame)
        self.peer_pid = 0
        self.peer_uid = -1
        self.attached = False
        self.next_offset = 0
        self.write_paused = False  # the transport is above its high-water mark
        self.lagging = False  # behind: served from the ring, not from live batches
        self.closed = False
        self._inbox: deque[bytes | FrameTooLarge] = deque()  # read, not yet served
        self._busy = False  # a request's answer is awaited
        self._pieces: Pieces | None = None  # a response being written in pieces
        self._pieces_request: Request | None = None
        self._pieces_sent = False
        self._reading = True
        self._eof = False
        self._generation = 0  # counts attaches and detaches
        self._catching_up = False  # a journal catch-up task owns the stream
        self._drained = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        transport = self.transport = cast("Transport", base)
        high = min(HIGH_WATER, self.server.max_queue)
        transport.set_write_buffer_limits(high=high, low=high // 4)
        peer = admit_peer(transport, "host")
        if peer is None:
            self.closed = True
            return
        self.peer_pid, self.peer_uid = peer
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        frames = self.decoder.feed(data)
        if frames:
            self._inbox.extend(frames)
            self._advance()

    def eof_received(self) -> bool:
        # The client will send nothing more. If it only shut down its write side, it
        # still gets the answers to what it sent and, if attached, its stream. If it
        # closed the connection entirely, nobody is there to read: let it go now
        # (with an idle agent, no write would ever reveal it).
        self._eof = True
        if peer_hung_up(self.transport):
            return False  # the transport closes itself
        self._close_if_done()
        self._watch_hangup()
        return True

    def _watch_hangup(self) -> None:
        # After the client's EOF the loop reads nothing more from it, so when the client
        # later closes its end too, only a failed write would tell: an idle stream
        # writes nothing and its connection and descriptor would stay for ever.
        if self.closed:
            return
        if peer_hung_up(self.transport):
            self.close()
            return
        asyncio.get_running_loop().call_later(HANGUP_POLL, self._watch_hangup)

    def _close_if_done(self) -> None:
        if self._eof and not (
            self._busy or self._inbox or self._pieces or self.attached or self.closed
        ):
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.attached = False
        self.server.forget(self)
        self._inbox.clear()
        self._pieces = None
        self._drained.set()  # a catch-up waiting for the drain sees the close

    def pause_writing(self) -> None:
        self.write_paused = True
        # A client that does not read its responses must not make us buffer without
        # bound: stop reading its requests until it catches up.
        self._pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._drained.set()
        # In order: the rest of the answer being written, the requests that waited
        # (answers never wait behind a replay), then the replay.
        self._advance()
        if self.lagging and self._writable():
            self.pump()

    def _pause_reading(self) -> None:
        if self._reading and self.transport is not None and not self.closed:
            self._reading = False
            self.transport.pause_reading()

    def _writable(self) -> bool:
        """Whether a frame may be written now: not paused, no answer half written."""
        return not (self.write_paused or self.closed or self._pieces is not None)

    # --- requests ---------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        """Write a frame (response or event bytes) to the client."""
        if self.transport is not None and not self.closed:
            self.transport.write(frame)

    def _advance(self) -> None:
        """Serve what waits, in order, as far as the connection may write.

        A request is served only when no earlier answer is pending or half written and
        the transport is below its high-water mark; frames that must wait stay in the
        inbox, and while any do, the client is not read (so the inbox holds at most one
        read of frames).
        """
        if self._pieces is not None:
            self._write_pieces()
        inbox = self._inbox
        while inbox and not (self._busy or self.write_paused or self.closed) and not self._pieces:
            self._process(inbox.popleft())
        if self.closed:
            inbox.clear()
            return
        if inbox:
            self._pause_reading()
        elif not (self._reading or self.write_paused) and self.transport is not None:
            self._reading = True
            self.transport.resume_reading()
        self._close_if_done()

    def _process(self, frame: bytes | FrameTooLarge) -> None:
        if isinstance(frame, FrameTooLarge):
            self.send(encode_error("", None, frame.code, frame.message))
            self.close()
            return
        try:
            request = decode_request(frame)
            mtype, payload = validate_payload(request)
        except RequestError as exc:
            self.send(encode_error(exc.request_type, exc.request_id, exc.code, exc.message))
            return
        try:
            reply = self.server.handler.dispatch(self, mtype, payload, request)
        except AgentHostError as exc:
            self.send(encode_error(request.type, request.id, exc.code, exc.message))
            return
        except Exception as exc:  # a bug must not take the host down
            log.exception("request.failed", type=request.type)
            self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))
            return
        if reply is None:
            return
        if isinstance(reply, bytes):
            self.send(reply)
            return
        if isinstance(reply, Iterator):
            self._start_pieces(reply, request)
            return
        self._busy = True
        self._task = asyncio.get_running_loop().create_task(self._finish(reply, request))
        self.server.tasks.add(self._task)
        self._task.add_done_callback(self.server.tasks.discard)

    async def _finish(self, reply: Awaitable[bytes | Pieces], request: Request) -> None:
        try:
            answer = await reply
            if isinstance(answer, bytes):
                self.send(answer)
            else:
                self._start_pieces(answer, request)
        except AgentHostError as exc:
            self.send(encode_error(request.type, request.id, exc.code, exc.message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("request.failed", type=request.type)
            self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))
        self._busy = False
        self._advance()

    def _start_pieces(self, pieces: Pieces, request: Request) -> None:
        self._pieces = pieces
        self._pieces_request = request
        self._pieces_sent = False
        if self.attached:
            # No event may land inside the answer's line: the stream waits (as for a
            # slow client, in the ring or the journal) and is pumped afterwards.
            self.lagging = True
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
            except Exception as exc:  # a bug must not take the host down
                log.exception("request.failed", type=request.type)
                self._pieces = self._pieces_request = None
                if self._pieces_sent:  # half a line is out: the connection is lost
                    self._abort()
                else:
                    self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))
                return
            self._pieces_sent = True
            self.send(piece)
        else:
            return  # paused (or closed): resume_writing goes on
        self._pieces = self._pieces_request = None
        self._drained.set()  # a journal catch-up may write again
        if self.attached:
            self.pump()

    # --- streaming --------------------------------------------------------------------

    def attach(self, start_offset: int) -> None:
        """Stream from ``start_offset`` on: replay from the ring, then live events.

        Called right after the attach response was written, in the same step.
        """
        self.attached = True
        self.next_offset = start_offset
        self._generation += 1  # a journal read in flight for an earlier attach is void
        self._catching_up = False
        self.server.attached.add(self)
        self.pump()

    def detach(self) -> None:
        """Stop streaming to this connection (no event follows the detach response)."""
        self.attached = False
        self._generation += 1
        self._catching_up = False
        self.server.attached.discard(self)
        if self._eof and not self.closed:
            asyncio.get_running_loop().call_soon(self._close_if_done)

    def pump(self) -> None:
        """Write retained events from the cursor on, until caught up or the transport
        asks us to wait (then the connection lags until ``resume_writing``)."""
        ring = self.server.ring
        self.lagging = True
        if self._catching_up:
            return  # the journal catch-up task has this connection
        while self.attached and not self.closed:
            if self.next_offset < ring.oldest_offset:
                if self.server.journal is not None:
                    self._start_catch_up()
                else:
                    self.drop()
                return
            if not self._writable():
                return  # resume_writing (or the end of an answer) goes on
            items = ring.slice(self.next_offset, PUMP_SLICE)
            if not items:
                self.lagging = False  # caught up: live batches from now on
                return
            size = 0
            for n, item in enumerate(items, 1):  # events can be MiBs: bound the write
                size += len(item)
                if size >= PUMP_BYTES:
                    del items[n:]
                    break
            self.send(b"".join(items))
            self.next_offset += len(items)

    def _start_catch_up(self) -> None:
        self._catching_up = True
        task = asyncio.get_running_loop().create_task(self._catch_up(self._generation))
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    async def _catch_up(self, generation: int) -> None:
        """Replay what the ring no longer holds from the journal, then hand over to
        the ring (and to live batches). Reads run in a worker thread: a cold disk
        delays this client only."""
        journal = self.server.journal
        assert journal is not None
        loop = asyncio.get_running_loop()

        def current() -> bool:
            return self._generation == generation and self.attached and not self.closed

        try:
            while current():
                oldest = self.server.ring.oldest_offset
                if self.next_offset >= oldest:
                    self._catching_up = False
                    self.pump()
                    return
                records = await loop.run_in_executor(
                    None, journal.read, self.next_offset, oldest - 1, JOURNAL_READ
                )
                if not current():
                    return
                if not records:  # pruned meanwhile: the client reattaches, sees truncated
                    self.drop()
                    return
                while not self._writable() and current():  # write nothing into a full queue
                    self._drained.clear()
                    await self._drained.wait()
                if not current():
                    return
                self.send(b"".join(records))
                self.next_offset += len(records)
        except AgentHostError as exc:  # a damaged journal: this client cannot be served
            log.error("journal.read_failed", error=str(exc))
            if current():
                self.drop()
        finally:
            if self._generation == generation:
                self._catching_up = False

    def drop(self) -> None:
        """Abort a client that fell out of the ring; it may reattach from its offset."""
        log.info(
            "client.dropped",
            peer_pid=self.peer_pid,
            next_offset=self.next_offset,
            oldest_offset=self.server.ring.oldest_offset,
        )
        self.server.dropped += 1
        self._abort()

    def _abort(self) -> None:
        self.detach()
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close after the buffered frames were written."""
        self.detach()
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HostServer:
    """Listens on the host socket and fans events out to attached connections."""

    def __init__(
        self,
        path: Path,
        ring: RingBuffer[bytes],
        handler: RequestHandler,
        *,
        max_frame: int = DEFAULT_FRAME_LIMIT,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self.path = path
        self.ring = ring
        self.handler = handler
        self.max_frame = max_frame
        self.max_queue = max_queue
        self.journal: JournalReader | None = None  # serves clients the ring lost
        self.connections: set[Connection] = set()
        self.attached: set[Connection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0
        self._acceptor: Acceptor | None = None
        self._all_closed = asyncio.Event()
        self._inode: int | None = None

    async def start(self) -> None:
        """Bind the socket (0600 from the moment it exists) and start accepting."""
        sock = bind_private_socket(self.path)
        self._inode = os.stat(self.path).st_ino
        self._acceptor = Acceptor(sock, lambda: Connection(self), self.tasks)

    async def rebind(self) -> bool:
        """Re-create the socket file if it was deleted or replaced (SIGUSR1).

        Return True if a new socket was bound.
        """
        try:
            st = os.stat(self.path)
            if stat.S_ISSOCK(st.st_mode) and st.st_ino == self._inode:
                return False
        except FileNotFoundError:
            pass
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # not our socket (we hold the lock): replace it
        if self._acceptor is not None:
            self._acceptor.close()
        await self.start()
        log.info("socket.recreated", path=str(self.path))
        return True

    def forget(self, conn: Connection) -> None:
        """A connection is gone."""
        self.connections.discard(conn)
        self.attached.discard(conn)
        if not self.connections:
            self._all_closed.set()

    def broadcast(self, first_offset: int, data: bytes, count: int) -> None:
        """Hand a batch of new events (offsets ``first_offset..``) to every client."""
        oldest = self.ring.oldest_offset
        max_queue = self.max_queue
        journal = self.journal
        for conn in list(self.attached):
            if conn.lagging:
                # Without a journal, events it still needs are gone: drop it now.
                # With one, it catches up from the journal once it drains.
                if journal is None and conn.next_offset < oldest:
                    conn.drop()
                continue
            # invariant: a connection that does not lag is caught up
            conn.next_offset = first_offset + count
            conn.send(data)
            transport = conn.transport
            if transport is not None and transport.get_write_buffer_size() > max_queue:
                conn.lagging = True

    def stop_accepting(self) -> None:
        """Close the listening socket and remove its file (if it is still ours)."""
        if self._acceptor is not None:
            self._acceptor.close()
            self._acceptor = None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop accepting, flush and close every connection, cancel request tasks."""
        self.stop_accepting()
        for conn in list(self.connections):
            conn.close()
        if self.connections:
            self._all_closed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), timeout)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


ACCEPT_BATCH: Final = 64  # connections accepted per wake-up, so requests are not starved
BACKOFF_FIRST: Final = 0.01  # seconds without accepting after an accept failed ...
BACKOFF_MAX: Final = 0.5  # ... doubling up to this while it keeps failing
_STARVED: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Acceptor:
    """Accepts connections on a listening socket; backs off when it cannot.

    Why not uvloop's server: when libuv cannot accept for want of a descriptor it
    closes a spare one, accepts and drops what is pending, and reopens the spare. If
    another thread takes the freed slot meanwhile (the journal's fsync thread dups a
    descriptor every round), the spare is gone, and from then on every wake-up of the
    readable listening socket failed again at once: the event loop spun at 100 % of a
    core, and the pending client waited, until a descriptor was freed (measured in
    tests/reliability/test_rel_faults.py). Here a failed accept stops watching the
    socket for a pause that doubles from 10 ms to 0.5 s; what is pending is refused at
    once (closed, the client sees its connection end) while a spare descriptor of our
    own is there to do it with, else it waits for the next attempt.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self.sock = sock
        self.factory = factory
        self.tasks = tasks
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self._spare = _open_spare()
        self._backoff = BACKOFF_FIRST
        self._pause: asyncio.TimerHandle | None = None
        self.loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                self._back_off(exc)
                return
            self._backoff = BACKOFF_FIRST
            conn.setblocking(False)
            task = self.loop.create_task(self._adopt(conn))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _adopt(self, conn: socket.socket) -> None:
        # (once the transport owns the descriptor it detaches ``conn``: close() is then
        # a no-op, never a close of a reused descriptor number)
        try:
            await self.loop.connect_accepted_socket(self.factory, conn)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as exc:
            conn.close()
            log.warning("client.accept_failed", error=str(exc))

    def _back_off(self, exc: OSError) -> None:
        if exc.errno in _STARVED and self._spare is not None:
            os.close(self._spare)  # one free slot to refuse the pending clients with
            with contextlib.suppress(OSError):
                for _ in range(ACCEPT_BATCH):
                    self.sock.accept()[0].close()
            self._spare = _open_spare()
        log.warning("accept.paused", error=exc.strerror, seconds=self._backoff)
        self.loop.remove_reader(self.sock.fileno())
        self._pause = self.loop.call_later(self._backoff, self._resume)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

    def _resume(self) -> None:
        self._pause = None
        if not self.closed:
            self.loop.add_reader(self.sock.fileno(), self._accept)
            self._accept()

    def close(self) -> None:
        """Stop accepting and close the listening socket."""
        if self.closed:
            return
        self.closed = True
        if self._pause is not None:
            self._pause.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None


def _open_spare() -> int | None:
    try:
        return os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def bind_private_socket(path: Path) -> socket.socket:
    """A listening AF_UNIX socket at ``path`` whose file is mode 0600 from creation."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the host is single-threaded: nothing else creates files now
    try:
        sock.bind(os.fspath(path))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot bind {path}: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(512)
    sock.setblocking(False)
    return sock
