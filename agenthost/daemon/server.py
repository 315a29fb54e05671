"""The daemon's Unix socket: connections, requests in order, watch streams.

The patterns are the host server's (:mod:`agenthost.host.server`): the socket file is
0600 from the moment it exists in a 0700 directory, peers of another uid are refused
(SO_PEERCRED, root excepted), each connection's requests are answered in order even
when some take time (a spawn, a stop), and a client that does not read its answers
cannot make the daemon buffer without bound. A watching connection that falls behind
is served from the hub's buffers, or dropped (see :mod:`agenthost.daemon.fanout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, cast

import structlog
from pydantic import BaseModel

from agenthost.daemon.aio import cancel_all
from agenthost.daemon.fanout import WatchState
from agenthost.daemon.protocol import DaemonMessageType, validate_daemon_payload
from agenthost.errors import AgentHostError, ErrorCode, FrameTooLarge
from agenthost.host.server import bind_private_socket
from agenthost.protocol import (
    DEFAULT_FRAME_LIMIT,
    FrameDecoder,
    Request,
    RequestError,
    decode_request,
    encode_error,
)
from agenthost.wire.peer import admit_peer, peer_hung_up

if TYPE_CHECKING:
    from asyncio import Transport

log = structlog.get_logger("agenthost.daemon.server")

HIGH_WATER: Final = 1 << 20
CLOSE_TIMEOUT: Final = 2.0

Reply = bytes | None | Awaitable[bytes]
"""A response frame, None if the handler wrote it itself, or an awaitable of it."""


class Dispatcher(Protocol):
    """What the server needs from the daemon."""

    def dispatch(
        self,
        conn: DaemonConnection,
        mtype: DaemonMessageType,
        payload: BaseModel,
        request: Request,
    ) -> Reply: ...

    def unwatch(self, conn: DaemonConnection) -> None: ...

    def resume(self, conn: DaemonConnection) -> None: ...


class DaemonConnection(asyncio.Protocol):
    """One client of the daemon."""

    def __init__(self, server: DaemonServer) -> None:
        self.server = server
        self.transport: Transport | None = None
        self.decoder = FrameDecoder(server.max_frame)
        self.peer_pid = 0
        self.peer_uid = -1
        self.watch: WatchState | None = None  # set by the hub while watching
        self.write_paused = False
        self.closed = False
        self._inbox: deque[bytes | FrameTooLarge] = deque()
        self._busy = False
        self._eof = False

    # --- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = self.transport = cast("Transport", base)
        # pause (and so resume, which pumps a lagging watcher) at or below the lag limit
        high = min(HIGH_WATER, self.server.max_queue)
        transport.set_write_buffer_limits(high=high, low=high // 4)
        peer = admit_peer(transport, "daemon")
        if peer is None:
            self.closed = True
            return
        self.peer_pid, self.peer_uid = peer
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        for frame in self.decoder.feed(data):
            if self._busy:
                self._inbox.append(frame)
            else:
                self._process(frame)
            if self.closed:
                return

    def eof_received(self) -> bool:
        # a client that only shut its write side still gets its answers and stream;
        # one that closed entirely is let go now (an idle stream would never tell)
        self._eof = True
        if peer_hung_up(self.transport):
            return False
        self._close_if_done()
        return True

    def _close_if_done(self) -> None:
        watching = self.watch is not None
        if self._eof and not (self._busy or self._inbox or watching or self.closed):
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.unwatch()
        # and whatever the dispatcher still runs for it: a watcher the hub dropped has
        # no watch any more, but may have a backfill waiting for a drain that will
        # never come
        self.server.dispatcher.unwatch(self)
        self.server.forget(self)
        self._inbox.clear()

    def pause_writing(self) -> None:
        # a client that does not read its answers: stop reading its requests (a
        # watcher lags: the hub serves it from its buffers once it drains)
        self.write_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()
            if self.watch is not None and self.watch.lagging:
                self.server.dispatcher.resume(self)

    # --- the hub's view (fanout.Watcher) -------------------------------------------

    def send(self, data: bytes) -> None:
        """Write a frame (or several) to the client."""
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def queued(self) -> int:
        """Bytes written but not yet taken by the client."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def paused(self) -> bool:
        """Whether the transport asked us to stop writing for now."""
        return self.write_paused or self.closed

    def drop(self, reason: str) -> None:
        """Abort a watcher that fell behind; it may watch again with ``since``."""
        log.info("watcher.dropped", peer_pid=self.peer_pid, reason=reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def unwatch(self) -> None:
        """Stop the stream on this connection."""
        if self.watch is not None:
            self.server.dispatcher.unwatch(self)
            self.watch = None
            if self._eof and not self.closed:
                asyncio.get_running_loop().call_soon(self._close_if_done)

    def close(self) -> None:
        """Close after the buffered frames were written."""
        self.unwatch()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- requests ---------------------------------------------------------------------

    def _process(self, frame: bytes | FrameTooLarge) -> None:
        if isinstance(frame, FrameTooLarge):
            self.send(encode_error("", None, frame.code, frame.message))
            self.close()
            return
        try:
            request = decode_request(frame)
            mtype, payload = validate_daemon_payload(request)
        except RequestError as exc:
            self.send(encode_error(exc.request_type, exc.request_id, exc.code, exc.message))
            return
        try:
            reply = self.server.dispatcher.dispatch(self, mtype, payload, request)
        except AgentHostError as exc:
            self.send(encode_error(request.type, request.id, exc.code, exc.message))
            return
        except Exception as exc:  # a bug must not take the daemon down
            log.exception("request.failed", type=request.type)
            self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))
            return
        if reply is None:
            return
        if isinstance(reply, bytes):
            self.send(reply)
            return
        self._busy = True
        task = asyncio.get_running_loop().create_task(self._finish(reply, request))
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    async def _finish(self, reply: Awaitable[bytes], request: Request) -> None:
        try:
            self.send(await reply)
        except AgentHostError as exc:
            self.send(encode_error(request.type, request.id, exc.code, exc.message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("request.failed", type=request.type)
            self.send(encode_error(request.type, request.id, ErrorCode.INTERNAL, repr(exc)))
        self._busy = False
        while self._inbox and not self._busy and not self.closed:
            self._process(self._inbox.popleft())
        self._close_if_done()


class DaemonServer:
    """Listens on ``<home>/daemon.sock``."""

    def __init__(
        self,
        path: Path,
        dispatcher: Dispatcher,
        *,
        max_frame: int = DEFAULT_FRAME_LIMIT,
        max_queue: int = HIGH_WATER,
    ) -> None:
        self.path = path
        self.dispatcher = dispatcher
        self.max_frame = max_frame
        self.max_queue = max_queue
        self.connections: set[DaemonConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._all_closed = asyncio.Event()

    async def start(self) -> None:
        """Bind the socket (a leftover file is removed: the caller holds the daemon lock)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = bind_private_socket(self.path)
        self._inode = os.stat(self.path).st_ino
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(lambda: DaemonConnection(self), sock=sock)

    def forget(self, conn: DaemonConnection) -> None:
        self.connections.discard(conn)
        if not self.connections:
            self._all_closed.set()

    def stop_accepting(self) -> None:
        """Close the listening socket and remove its file (if it is still ours)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop accepting, cancel running requests, close every connection."""
        self.stop_accepting()
        await cancel_all(list(self.tasks))
        for conn in list(self.connections):
            conn.close()
        if self.connections:
            self._all_closed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), timeout)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
