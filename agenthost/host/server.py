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
  evicted), it is caught up from the journal (in a worker thread) when the host has
  one. Without a journal it can no longer be served exactly once: it is dropped
  (connection aborted) and may reattach from its last offset, with ``truncated``
  telling it what is gone. The agent and the other clients never wait for a slow one.

A replay writes a slice only when the transport is below its high-water mark and no
answer is being written in pieces (no event lands inside an answer's line); answers
never wait behind a replay.

Registration and replay snapshot happen in one synchronous step on the event loop, so
nothing can be produced in between (attach guarantee 2).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final, Protocol

import structlog
from pydantic import BaseModel

from agenthost.errors import AgentHostError
from agenthost.journal import JournalReader
from agenthost.protocol import (
    DEFAULT_FRAME_LIMIT,
    MessageType,
    Request,
    validate_payload,
)
from agenthost.ringbuffer import RingBuffer
from agenthost.wire.connection import Pieces, Reply
from agenthost.wire.server import Server, ServerConnection

log = structlog.get_logger("agenthost.server")

__all__ = ["Connection", "HostServer", "Pieces", "Reply", "RequestHandler"]

PUMP_SLICE: Final = 256  # events per write when catching a client up from the ring ...
PUMP_BYTES: Final = 256 << 10  # ... and about this many bytes at most (one event at least)
JOURNAL_READ: Final = 256 << 10  # bytes per journal read when catching a client up
DEFAULT_MAX_QUEUE: Final = 16 << 20  # bytes queued per client before it lags


class RequestHandler(Protocol):
    """What the server needs from the host."""

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel, request: Request
    ) -> Reply: ...


class Connection(ServerConnection[MessageType]):
    """One client connection of the host: its requests, and an optional stream."""

    def __init__(self, server: HostServer) -> None:
        super().__init__(server, "host", validate_payload)
        self.server: HostServer = server
        self.attached = False
        self.next_offset = 0
        self.lagging = False  # behind: served from the ring, not from live batches
        self._generation = 0  # counts attaches and detaches
        self._catching_up = False  # a journal catch-up task owns the stream
        self._drained = asyncio.Event()

    def dispatch(self, mtype: MessageType, payload: BaseModel, request: Request) -> Reply:
        return self.server.handler.dispatch(self, mtype, payload, request)

    # --- the stream, as the request side sees it ------------------------------------------

    def streaming(self) -> bool:
        return self.attached

    def hold(self) -> None:
        if self.attached:
            # No event may land inside the answer's line: the stream waits (as for a
            # slow client, in the ring or the journal) and is pumped afterwards.
            self.lagging = True

    def writable(self) -> None:
        self._drained.set()  # a journal catch-up may write again
        if self.attached and self.lagging:
            self.pump()

    def stop(self) -> None:
        self.detach()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._drained.set()  # a catch-up waiting for the drain sees the close

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
        self.requests.stream_ended()

    def pump(self) -> None:
        """Write retained events from the cursor on, until caught up or the transport
        asks us to wait (then the connection lags until ``resume_writing``)."""
        ring = self.server.ring
        self.lagging = True
        if self._catching_up:
            return  # the journal catch-up task has this connection
        requests = self.requests
        while self.attached and not requests.closed:
            if self.next_offset < ring.oldest_offset:
                if self.server.journal is not None:
                    self._start_catch_up()
                else:
                    self.drop()
                return
            if not requests.writable:
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
            requests.send(b"".join(items))
            self.next_offset += len(items)

    def _start_catch_up(self) -> None:
        self._catching_up = True
        self.server.spawn(self._catch_up(self._generation))

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
                while not self.requests.writable and current():  # nothing into a full queue
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
        self.journal: JournalReader | None = None  # serves clients the ring lost
        self.attached: set[Connection] = set()
        self.dropped = 0

    def connection(self) -> Connection:
        return Connection(self)

    def forget(self, conn: Connection) -> None:
        """A connection is gone."""
        self.attached.discard(conn)
        super().forget(conn)

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
