"""One Unix socket server for every agenthost service: bind, accept, connections, close.

* :func:`bind_private_socket`: the socket file is 0600 from the moment it exists.
* :class:`Acceptor`: accepts with a back-off when the process is out of descriptors.
* :class:`ServerConnection`: the asyncio protocol of one client. It admits the peer
  (its uid must be ours, or root), drives the sans-IO
  :class:`~agenthost.wire.connection.RequestConnection` (requests in order, the pause
  policy, answers in pieces, the half-close policy) and, after the client's EOF,
  watches for its hang-up. A service subclasses it with its ``dispatch`` and its stream.
* :class:`Server`: listens, keeps the connections and their tasks, re-creates a deleted
  socket file (:meth:`Server.rebind`), and closes in the order of DESIGN.md section 5:
  stop accepting, let each connection finish what it was asked and close, wait with a
  timeout, abort the rest, cancel what still runs. Once the write buffers that grew past
  their high-water mark have drained, it gives the freed memory back to the system
  (:meth:`Server.released`, :mod:`agenthost.heap`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

import structlog

from agenthost import heap
from agenthost.aio import cancel_all
from agenthost.errors import ConfigError
from agenthost.wire.codec import Request
from agenthost.wire.connection import Pieces, Reply, RequestConnection, Validate
from agenthost.wire.framing import DEFAULT_FRAME_LIMIT
from agenthost.wire.peer import admit_peer, peer_hung_up

if TYPE_CHECKING:
    from asyncio import Transport

    from pydantic import BaseModel

log = structlog.get_logger("agenthost.server")

HIGH_WATER: Final = 1 << 20  # transport pauses (and we stop reading requests) above this
CLOSE_TIMEOUT: Final = 2.0  # seconds a close waits for the connections to finish
HANGUP_POLL: Final = 1.0  # seconds between checks that a half-closed client is still there
LISTEN_BACKLOG: Final = 512

M = TypeVar("M")
C = TypeVar("C", bound="ServerConnection[Any]")


class _TransportSink:
    """The sans-IO connection's sink over its protocol's transport."""

    __slots__ = ("conn",)

    def __init__(self, conn: ServerConnection[Any]) -> None:
        self.conn = conn

    def write(self, data: bytes) -> None:
        if self.conn.transport is not None:
            self.conn.transport.write(data)

    def pause_reading(self) -> None:
        if self.conn.transport is not None:
            self.conn.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.conn.transport is not None:
            self.conn.transport.resume_reading()

    def close(self) -> None:
        if self.conn.transport is not None:
            self.conn.transport.close()

    def abort(self) -> None:
        if self.conn.transport is not None:
            self.conn.transport.abort()

    def run(self, reply: Awaitable[bytes | Pieces], request: Request) -> None:
        self.conn.server.spawn(self.conn.finish(reply, request))


class ServerConnection(asyncio.Protocol, Generic[M]):
    """One client: its peer check, its requests (:attr:`requests`), its hang-up watch.

    A service subclasses it with :meth:`dispatch` and, if it streams, the
    :class:`~agenthost.wire.connection.Stream` methods (``streaming``, ``hold``,
    ``writable``, ``stop``), which it overrides.
    """

    def __init__(self, server: Server[Any], service: str, validate: Validate[M]) -> None:
        self.server = server
        self.service = service
        self.transport: Transport | None = None
        self.peer_pid = 0
        self.peer_uid = -1
        self.filled = False  # the write buffer passed its high-water mark since it drained
        self.filled_once = False
        self.requests: RequestConnection[M] = RequestConnection(
            _TransportSink(self),
            validate,
            self.dispatch,
            max_frame=server.max_frame,
            stream=self,
        )

    def dispatch(self, mtype: M, payload: BaseModel | None, request: Request) -> Reply:
        """Serve one validated request (in order on this connection)."""
        raise NotImplementedError

    # --- the stream (none by default) -------------------------------------------------

    def streaming(self) -> bool:
        """Whether a stream keeps the connection open after the client's EOF."""
        return False

    def hold(self) -> None:
        """An answer is written in pieces: no event may be written until ``writable``."""

    def writable(self) -> None:
        """The connection may write again."""

    def stop(self) -> None:
        """The connection closes: end the stream."""

    # --- state ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (or closing): nothing more is written."""
        return self.requests.closed

    @property
    def write_paused(self) -> bool:
        """Whether the transport is above its high-water mark."""
        return self.requests.write_paused

    def send(self, frame: bytes) -> None:
        """Write a frame (response or event bytes) to the client."""
        self.requests.send(frame)

    def close(self) -> None:
        """Close after the frames written so far were flushed."""
        self.requests.close()

    def abort(self) -> None:
        """Close now, dropping what was not written."""
        self.requests.abort()

    def shutdown(self) -> None:
        """Finish what is in flight, take nothing new, then close (the server closes)."""
        self.requests.shutdown()

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        transport = self.transport = cast("Transport", base)
        high = min(HIGH_WATER, self.server.max_queue)
        transport.set_write_buffer_limits(high=high, low=high // 4)
        peer = admit_peer(transport, self.service)
        if peer is None:
            self.requests.closed = True  # admit_peer answered and closed the transport
            return
        self.peer_pid, self.peer_uid = peer
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.requests.receive(data)

    def eof_received(self) -> bool:
        # The client will send nothing more. If it only shut down its write side, it
        # still gets the answers to what it sent and its stream. If it closed the
        # connection entirely, nobody is there to read: let it go now (with an idle
        # stream, no write would ever reveal it).
        if peer_hung_up(self.transport):
            self.requests.eof = True
            return False  # the transport closes itself
        self.requests.receive_eof()
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
        asyncio.get_running_loop().call_later(self.server.hangup_poll, self._watch_hangup)

    def connection_lost(self, exc: Exception | None) -> None:
        self.requests.lost()
        self.server.forget(self)

    def pause_writing(self) -> None:
        self.filled = self.filled_once = True
        self.requests.pause_writes()

    def resume_writing(self) -> None:
        self.requests.resume_writes()
        if self.filled:
            self.filled = False
            self.server.released()

    def buffered(self) -> int:
        """Bytes written to the transport and not yet sent."""
        transport = self.transport
        return (
            0 if transport is None or transport.is_closing() else transport.get_write_buffer_size()
        )

    async def finish(self, reply: Awaitable[bytes | Pieces], request: Request) -> None:
        """Await an answer that takes time, and hand it to the request side."""
        try:
            answer = await reply
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.requests.fail(request, exc)
        else:
            self.requests.answer(request, answer)


class Server(Generic[C]):
    """Listens on ``path``; keeps its connections and the tasks they started.

    A service subclasses it with :meth:`connection`, the factory of its connections.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_frame: int = DEFAULT_FRAME_LIMIT,
        max_queue: int = HIGH_WATER,
    ) -> None:
        self.path = path
        self.max_frame = max_frame
        self.max_queue = max_queue
        self.hangup_poll = HANGUP_POLL
        self.connections: set[C] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self._acceptor: Acceptor | None = None
        self._all_closed = asyncio.Event()
        self._inode: int | None = None
        self._trim = heap.TrimPolicy()
        self._trim_check: asyncio.Handle | None = None

    def connection(self) -> C:
        """A new connection (its protocol object) for an accepted client."""
        raise NotImplementedError

    async def start(self) -> None:
        """Bind the socket (0600 from the moment it exists) and start accepting."""
        sock = bind_private_socket(self.path)
        self._inode = os.stat(self.path).st_ino
        self._acceptor = Acceptor(sock, self.connection, self.tasks)

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

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as a task of this server (cancelled last, at close)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def forget(self, conn: C) -> None:
        """A connection is gone."""
        self.connections.discard(conn)
        if not self.connections:
            self._all_closed.set()
        if conn.filled_once:  # the end of a flood for this client (or it was dropped)
            self.released()

    def released(self) -> None:
        """A write buffer that passed its high-water mark drained below its low-water
        mark, or a connection whose buffer did closed: the memory it held is free.

        It is given back to the system (:func:`agenthost.heap.trim`) once no connection
        has anything left to send (:class:`agenthost.heap.TrimPolicy`): after a flood,
        the host's RSS used to stay at the flood's high-water mark.
        """
        self._trim.released()
        if self._trim_check is None:
            self._trim_check = asyncio.get_running_loop().call_soon(self._check_trim)

    def _check_trim(self) -> None:
        self._trim_check = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        wait = self._trim.check(now, any(conn.buffered() for conn in self.connections))
        if wait is not None and wait <= 0:
            heap.trim()
            wait = self._trim.trimmed(now)
        if wait is not None:
            self._trim_check = loop.call_later(wait, self._check_trim)

    def stop_accepting(self) -> None:
        """Close the listening socket and remove its file (if it is still ours)."""
        if self._acceptor is not None:
            self._acceptor.close()
            self._acceptor = None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop accepting; let every connection answer what it was asked and close
        (for at most ``timeout`` seconds); abort the rest; cancel what still runs."""
        self.stop_accepting()
        self._all_closed.clear()
        for conn in list(self.connections):
            conn.shutdown()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), timeout)
        for conn in list(self.connections):
            conn.abort()
        if self._trim_check is not None:
            self._trim_check.cancel()
            self._trim_check = None
        stuck = await cancel_all(list(self.tasks))
        if stuck:
            log.warning("server.tasks_stuck", count=len(stuck))


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
    tests/reliability/test_rel_faults.py). And its ``create_unix_server`` listens again
    with a backlog of 100, whatever the socket was bound with. Here a failed accept
    stops watching the socket for a pause that doubles from 10 ms to 0.5 s; what is
    pending is refused at once (closed, the client sees its connection end) while a
    spare descriptor of our own is there to do it with, else it waits for the next
    attempt.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        tasks: set[asyncio.Task[Any]],
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
    # (the umask is the process's: bind before starting threads that create files)
    old_umask = os.umask(0o177)
    try:
        sock.bind(os.fspath(path))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot bind {path}: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock
