"""The attach stream of one connection, and the fan-out of new events. Sans-IO.

A :class:`Cursor` is what one attached connection still has to receive: the next offset
it must get, and how it gets it. A :class:`Fanout` holds the attached cursors of one
stream and the ring they are served from. Neither does I/O: a cursor writes to a
:class:`Sink` (a connection's send side) and, when it needs events that only the
journal still has, *asks* for a read (:class:`JournalRead`) and is handed the records
when they come. The service runs the read (in a worker thread, say) and feeds the
answer back; everything else happens in the calls below, synchronously.

The guarantees (DESIGN.md section 3, "attach guarantees") and where they come from:

* Registration and the replay snapshot are one synchronous step (:meth:`Cursor.attach`),
  so no event is produced between them: each offset is delivered once, in order.
* A cursor that keeps up gets each batch of new events as one write of bytes encoded
  once for everybody (:meth:`Cursor.offer`); the sink keeps references, so clients
  behind by the same batches share their memory.
* When a sink's queue passes ``max_queue`` the cursor *lags*: new events stay in the
  ring, and :meth:`Cursor.pump` serves it from there, in slices of at most
  ``pump_slice`` events and about ``pump_bytes`` bytes, whenever the sink is writable
  (not paused, no answer half written).
* If a lagging cursor falls out of the ring, it is caught up from the journal when the
  stream has one, else it is dropped (``Sink.drop``: the connection is aborted) and the
  client may reattach from its last offset, ``truncated`` telling it what is gone.

So a client that cannot keep up never slows the agent or the other clients: nothing
here waits, and a sink holds at most ``max_queue`` plus one batch, or its high-water
mark plus one slice or one journal read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from agenthost.ringbuffer import RingBuffer

PUMP_SLICE: Final = 256  # events per write when catching a client up from the ring ...
PUMP_BYTES: Final = 256 << 10  # ... and about this many bytes at most (one event at least)


class Sink(Protocol):
    """The send side of one connection, as a cursor sees it."""

    def write(self, data: bytes) -> None:
        """Queue bytes for the client (never blocks)."""

    def queued(self) -> int:
        """Bytes written but not yet taken by the client."""

    def writable(self) -> bool:
        """Whether a replay may write now: not paused, not closed, and no answer is
        being written in pieces (an event must not land inside its line)."""

    def drop(self) -> None:
        """Abort the connection: the client fell behind what can be served."""


@dataclass(frozen=True, slots=True)
class JournalRead:
    """A read a cursor asks for: the journal's records ``start`` to ``until``
    (inclusive; fewer are fine, at least one unless they are gone).

    Hand the answer back with :meth:`Cursor.journal_records` or
    :meth:`Cursor.journal_failed`; ``generation`` voids the answer when the cursor
    detached or attached again meanwhile.
    """

    generation: int
    start: int
    until: int


@dataclass(frozen=True, slots=True)
class AttachStart:
    """Where an attach starts: the first offset to stream and whether events after the
    requested offset are gone (``truncated``)."""

    start: int
    truncated: bool


def plan_attach(offset: int, *, head: int, oldest: int) -> AttachStart:
    """Where to start streaming to a client that has every event up to ``offset``.

    ``head`` is the last offset assigned, ``oldest`` the oldest one still served (from
    the ring or the journal). An offset at or beyond the head streams live events only.
    """
    start = offset + 1
    if start > head:
        return AttachStart(head + 1, False)
    if start < oldest:
        return AttachStart(oldest, True)
    return AttachStart(start, False)


class Fanout:
    """The attached cursors of one stream, and the ring they are served from.

    ``journal`` says whether the stream has a journal to catch cursors up from once
    they fell out of the ring (the service may turn it on after construction).
    """

    __slots__ = ("ring", "max_queue", "journal", "pump_slice", "pump_bytes", "attached", "dropped")

    def __init__(
        self,
        ring: RingBuffer[bytes],
        *,
        max_queue: int,
        journal: bool = False,
        pump_slice: int = PUMP_SLICE,
        pump_bytes: int = PUMP_BYTES,
    ) -> None:
        self.ring = ring
        self.max_queue = max_queue
        self.journal = journal
        self.pump_slice = pump_slice
        self.pump_bytes = pump_bytes
        self.attached: set[Cursor] = set()
        self.dropped = 0
        """How many cursors were dropped for falling behind."""

    def cursor(self, sink: Sink) -> Cursor:
        """A new, detached cursor writing to ``sink``."""
        return Cursor(self, sink)

    def broadcast(self, first_offset: int, data: bytes, count: int) -> None:
        """Hand a batch of new events (offsets ``first_offset`` on, already in the
        ring) to every attached cursor."""
        for cursor in list(self.attached):  # a drop changes the set
            cursor.offer(first_offset, data, count)


class Cursor:
    """What one connection still has to receive of the stream, and how.

    ``next_offset`` is the next offset the client must get. ``lagging`` is true while
    it is served from the ring (or the journal) rather than from live batches.
    """

    __slots__ = (
        "fanout",
        "sink",
        "attached",
        "next_offset",
        "lagging",
        "generation",
        "_catching_up",
        "_reading",
        "_held",
    )

    def __init__(self, fanout: Fanout, sink: Sink) -> None:
        self.fanout = fanout
        self.sink = sink
        self.attached = False
        self.next_offset = 0
        self.lagging = False
        self.generation = 0  # counts attaches and detaches
        self._catching_up = False  # served from the journal until it reaches the ring
        self._reading: JournalRead | None = None  # the journal read in flight
        # records read (joined) and how many, waiting for the sink
        self._held: tuple[bytes, int] | None = None

    @property
    def reading(self) -> JournalRead | None:
        """The journal read this cursor waits for, if any."""
        return self._reading

    def attach(self, start_offset: int) -> JournalRead | None:
        """Stream from ``start_offset`` on: replay what is retained, then live events.

        Call it right after writing the attach response, in the same step. A journal
        read this returns must be run and its answer handed back.
        """
        self._reset()
        self.attached = True
        self.next_offset = start_offset
        self.fanout.attached.add(self)
        return self.pump()

    def detach(self) -> None:
        """Stop streaming: nothing more is written, a journal read in flight is void."""
        self._reset()
        self.attached = False
        self.lagging = False
        self.fanout.attached.discard(self)

    def _reset(self) -> None:
        self.generation += 1
        self._catching_up = False
        self._reading = None
        self._held = None

    def lag(self) -> None:
        """Take no live batch until the next :meth:`pump` (an answer is about to be
        written in pieces: no event may land inside its line)."""
        if self.attached:
            self.lagging = True

    def offer(self, first_offset: int, data: bytes, count: int) -> None:
        """A batch of new events: write it now, or leave it in the ring if lagging."""
        if self.lagging:
            # Without a journal the events it still needs are gone: drop it now. With
            # one, it is caught up from the journal once its sink drains.
            if not self.fanout.journal and self.next_offset < self.fanout.ring.oldest_offset:
                self.drop()
            return
        # a cursor that does not lag is caught up: first_offset == next_offset
        self.next_offset = first_offset + count
        self.sink.write(data)
        if self.sink.queued() > self.fanout.max_queue:
            self.lagging = True

    def pump(self) -> JournalRead | None:
        """Write retained events from the cursor on, until caught up (live batches
        from then on), the sink is not writable (call again when it is), or the
        journal must be read (the read is returned)."""
        if not self.attached:
            return None
        self.lagging = True
        fanout = self.fanout
        ring = fanout.ring
        sink = self.sink
        while self.attached:
            if self._catching_up:
                read = self._catch_up()
                if read is not None or self._catching_up:
                    return read
                continue
            if self.next_offset < ring.oldest_offset:
                if fanout.journal:
                    self._catching_up = True
                    continue
                self.drop()
                return None
            if not sink.writable():
                return None
            items = ring.slice(self.next_offset, fanout.pump_slice)
            if not items:
                self.lagging = False
                return None
            size = 0
            for n, item in enumerate(items, 1):  # events can be MiBs: bound the write
                size += len(item)
                if size >= fanout.pump_bytes:
                    del items[n:]
                    break
            sink.write(b"".join(items))
            self.next_offset += len(items)
        return None

    def _catch_up(self) -> JournalRead | None:
        """One step from the journal: write held records when the sink takes them,
        then ask for the next read, or hand over to the ring (``_catching_up`` off)."""
        if self._reading is not None:
            return None  # its answer goes on
        held = self._held
        if held is not None:
            if not self.sink.writable():
                return None  # write nothing into a full queue
            self._held = None
            self.sink.write(held[0])
            self.next_offset += held[1]
        oldest = self.fanout.ring.oldest_offset
        if self.next_offset >= oldest:
            self._catching_up = False
            return None
        read = self._reading = JournalRead(self.generation, self.next_offset, oldest - 1)
        return read

    def journal_records(self, read: JournalRead, records: list[bytes] | None) -> JournalRead | None:
        """The answer to ``read``: records from ``read.start`` on (None or empty if the
        journal no longer has them). Returns the next read, as :meth:`pump` does."""
        if read != self._reading:
            return None  # void: detached or attached again meanwhile
        self._reading = None
        if not records:  # pruned meanwhile: the client reattaches and sees truncated
            self.drop()
            return None
        # Joined now: a read is thousands of small objects, and a hundred cursors that
        # wait for their sinks kept hundreds of thousands alive, scattered over the
        # allocator's arenas, which then stayed with the process after the flood.
        records = records[: read.until - read.start + 1]
        self._held = (b"".join(records), len(records))
        return self.pump()

    def journal_failed(self, read: JournalRead) -> None:
        """``read`` failed (a damaged journal): the client cannot be served, drop it."""
        if read == self._reading:
            self._reading = None
            self.drop()

    def drop(self) -> None:
        """Detach and abort the connection: the client fell behind what can be served.

        It may reattach from its last offset.
        """
        self.fanout.dropped += 1
        self.detach()
        self.sink.drop()
