"""The host's socket service: attached connections, their cursors, the fan-out.

The socket, the peer check, requests in order, the pause policy and answers in pieces
are the wire server's (:mod:`agenthost.wire.server`, :mod:`agenthost.wire.connection`);
what is the host's is the attach stream.

Each attached connection has a cursor, the next offset it must receive, and a send
queue: the transport's write buffer, bounded by ``max_queue`` bytes.

* A connection that keeps up gets each batch of new events as one ``write`` of bytes
  that were encoded once for everybody. The transport keeps references to those
  bytes, so clients that are behind by the same batches share their memory.
* When a client's queue passes ``max_queue``, it *lags*: new events stay in the ring
  only. When its transport drains (``resume_writing``), it is pumped from the ring, in
  slices, from its cursor, until it has caught up.
* If a lagging client's cursor falls out of the ring (the events it still needs were
  evicted), it is caught up from the journal (read in a worker thread) when the host has
  one. Without a journal it can no longer be served exactly once: it is dropped
  (connection aborted) and may reattach from its last offset, with ``truncated``
  telling it what is gone. The agent and the other clients never wait for a slow one.

A replay writes a slice only when the transport is below its high-water mark and no
answer is being written in pieces (no event lands inside an answer's line); answers
never wait behind a replay.

Registration and replay snapshot happen in one synchronous step on the event loop, so
nothing can be produced in between (attach guarantee 2).

These decisions are sans-IO objects of :mod:`agenthost.wire.stream` (a cursor per
connection, the fan-out over them), proven in memory; this module runs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import structlog

from agenthost.errors import AgentHostError
from agenthost.journal import JournalReader
from agenthost.protocol import (
    DEFAULT_FRAME_LIMIT,
    MessageType,
    Request,
    validate_request,
)
from agenthost.ringbuffer import RingBuffer
from agenthost.wire.connection import Pieces, Reply
from agenthost.wire.server import Server, ServerConnection
from agenthost.wire.stream import PUMP_BYTES, PUMP_SLICE, Fanout, JournalRead

if TYPE_CHECKING:
    from pydantic import BaseModel

log = structlog.get_logger("agenthost.server")

__all__ = [
    "PUMP_BYTES",
    "PUMP_SLICE",
    "Connection",
    "HostServer",
    "Pieces",
    "Reply",
    "RequestHandler",
]

JOURNAL_READ: Final = 256 << 10  # bytes per journal read when catching a client up
DEFAULT_MAX_QUEUE: Final = 16 << 20  # bytes queued per client before it lags


class RequestHandler(Protocol):
    """What the server needs from the host."""

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel | None, request: Request
    ) -> Reply: ...


def _validate(request: Request) -> tuple[MessageType, BaseModel | None]:
    # A request without a payload (ping, status...) comes with None, and no model is
    # loaded for it (agenthost.protocol.validate_request): the host's handlers of these
    # take none.
    return validate_request(request)


class _CursorSink:
    """A connection's send side as its cursor sees it (:class:`agenthost.wire.stream.Sink`)."""

    __slots__ = ("conn", "write")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.write: Callable[[bytes], None] = conn.requests.send  # the hot path: no hop

    def queued(self) -> int:
        transport = self.conn.transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def writable(self) -> bool:
        return self.conn.requests.writable

    def drop(self) -> None:
        self.conn.drop()


class Connection(ServerConnection[MessageType]):
    """One client connection of the host: its requests, and an optional stream.

    The stream's decisions are its :attr:`cursor`'s (:mod:`agenthost.wire.stream`);
    what is left here is I/O: the journal reads the cursor asks for, in a worker thread.
    """

    def __init__(self, server: HostServer) -> None:
        super().__init__(server, "host", _validate)
        self.server: HostServer = server
        self.cursor = server.fanout.cursor(_CursorSink(self))

    def dispatch(self, mtype: MessageType, payload: BaseModel | None, request: Request) -> Reply:
        return self.server.handler.dispatch(self, mtype, payload, request)

    # --- the stream, as the request side sees it ------------------------------------------

    def streaming(self) -> bool:
        return self.cursor.attached

    def hold(self) -> None:
        self.cursor.lag()  # no event may land inside the answer's line

    def writable(self) -> None:
        if self.cursor.lagging:
            self._follow(self.cursor.pump())

    def stop(self) -> None:
        self.detach()

    # --- streaming --------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        """Whether events are streamed to this connection."""
        return self.cursor.attached

    def attach(self, start_offset: int) -> None:
        """Stream from ``start_offset`` on: replay what is retained, then live events.

        Called right after the attach response was written, in the same step.
        """
        self._follow(self.cursor.attach(start_offset))

    def detach(self) -> None:
        """Stop streaming to this connection (no event follows the detach response)."""
        self.cursor.detach()
        self.requests.stream_ended()

    def _follow(self, read: JournalRead | None) -> None:
        if read is not None:
            self.server.spawn(self._read_journal(read))

    async def _read_journal(self, read: JournalRead) -> None:
        """Run a read the cursor asked for in a worker thread (a cold disk delays this
        client only) and hand it the records."""
        journal = self.server.journal
        assert journal is not None  # the cursor asks only when there is one
        loop = asyncio.get_running_loop()
        try:
            records = await loop.run_in_executor(
                None, journal.read, read.start, read.until, JOURNAL_READ
            )
        except AgentHostError as exc:  # a damaged journal: this client cannot be served
            log.error("journal.read_failed", error=str(exc))
            self.cursor.journal_failed(read)
            return
        self._follow(self.cursor.journal_records(read, records))

    def drop(self) -> None:
        """Abort a client that fell behind what can be served (its cursor detached
        itself); it may reattach from its offset."""
        log.info(
            "client.dropped",
            peer_pid=self.peer_pid,
            next_offset=self.cursor.next_offset,
            oldest_offset=self.server.ring.oldest_offset,
        )
        self.abort()


class HostServer(Server[Connection]):
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
        super().__init__(path, max_frame=max_frame, max_queue=max_queue)
        self.ring = ring
        self.handler = handler
        self.fanout = Fanout(ring, max_queue=max_queue)
        self._journal: JournalReader | None = None
        self.on_forget: Callable[[Connection], None] | None = None
        """Told of every connection that is gone (a terminal's size policy)."""

    @property
    def journal(self) -> JournalReader | None:
        """The journal that serves clients the ring lost (None: they are dropped)."""
        return self._journal

    @journal.setter
    def journal(self, reader: JournalReader | None) -> None:
        self._journal = reader
        self.fanout.journal = reader is not None

    @property
    def dropped(self) -> int:
        """How many clients were dropped for falling behind."""
        return self.fanout.dropped

    def connection(self) -> Connection:
        return Connection(self)

    def forget(self, conn: Connection) -> None:
        """A connection is gone."""
        conn.cursor.detach()
        if self.on_forget is not None:
            self.on_forget(conn)
        super().forget(conn)

    def broadcast(self, first_offset: int, data: bytes, count: int) -> None:
        """Hand a batch of new events (offsets ``first_offset..``) to every client."""
        self.fanout.broadcast(first_offset, data, count)
