"""The daemon's socket service: ``daemon.*`` requests and the watchers' side.

The socket, the peer check, requests in order, the pause policy, the half-close policy
and the close order are the wire server's (:mod:`agenthost.wire.server`), as for the
host. What is the daemon's: each connection is a :class:`~agenthost.daemon.fanout.Watcher`
of the hub while it watches; one that falls behind is served from the hub's buffers,
or dropped (see :mod:`agenthost.daemon.fanout`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final, Protocol

import structlog
from pydantic import BaseModel

from agenthost.daemon.fanout import WatchState
from agenthost.daemon.protocol import DAEMON_MESSAGES, DaemonMessageType
from agenthost.protocol import DEFAULT_FRAME_LIMIT, Request
from agenthost.wire.connection import Reply
from agenthost.wire.server import HIGH_WATER, Server, ServerConnection

log = structlog.get_logger("agenthost.daemon.server")

__all__ = ["DaemonConnection", "DaemonServer", "Dispatcher", "Reply"]

DEFAULT_MAX_QUEUE: Final = HIGH_WATER


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


class DaemonConnection(ServerConnection[DaemonMessageType]):
    """One client of the daemon."""

    def __init__(self, server: DaemonServer) -> None:
        super().__init__(server, "daemon", DAEMON_MESSAGES.validate)
        self.server: DaemonServer = server
        self.watch: WatchState | None = None  # set by the hub while watching

    def dispatch(
        self, mtype: DaemonMessageType, payload: BaseModel | None, request: Request
    ) -> Reply:
        assert payload is not None  # the daemon's table gives every request a model
        return self.server.dispatcher.dispatch(self, mtype, payload, request)

    # --- the stream, as the request side sees it ------------------------------------------

    def streaming(self) -> bool:
        return self.watch is not None

    def writable(self) -> None:
        # a lagging watcher is served from the hub's buffers once its transport drains
        if self.watch is not None and self.watch.lagging:
            self.server.dispatcher.resume(self)

    def stop(self) -> None:
        self.unwatch()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # and whatever the dispatcher still runs for it: a watcher the hub dropped has
        # no watch any more, but may have a backfill waiting for a drain that will
        # never come
        self.server.dispatcher.unwatch(self)

    # --- the hub's view (fanout.Watcher) -------------------------------------------

    def queued(self) -> int:
        """Bytes written but not yet taken by the client."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def paused(self) -> bool:
        """Whether the connection may not write now (its transport asked us to wait)."""
        return not self.requests.writable

    def drop(self, reason: str) -> None:
        """Abort a watcher that fell behind; it may watch again with ``since``."""
        log.info("watcher.dropped", peer_pid=self.peer_pid, reason=reason)
        self.abort()

    def unwatch(self) -> None:
        """Stop the stream on this connection."""
        if self.watch is not None:
            self.server.dispatcher.unwatch(self)
            self.watch = None
            self.requests.stream_ended()


class DaemonServer(Server[DaemonConnection]):
    """Listens on ``<home>/daemon.sock``."""

    def __init__(
        self,
        path: Path,
        dispatcher: Dispatcher,
        *,
        max_frame: int = DEFAULT_FRAME_LIMIT,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        super().__init__(path, max_frame=max_frame, max_queue=max_queue)
        self.dispatcher = dispatcher

    def connection(self) -> DaemonConnection:
        return DaemonConnection(self)

    async def start(self) -> None:
        """Bind the socket (a leftover file is removed: the caller holds the daemon lock)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        await super().start()
