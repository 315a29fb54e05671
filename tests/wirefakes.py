"""In-memory stand-ins for the attach stream: a producer, a journal, connections with a
transport whose drain the test controls, and a consumer that decodes what it gets.

They drive :mod:`agenthost.wire.stream` the way the host's server does (attach after
the response in one step, pump on resume, the answer in pieces first, journal reads
answered later), so tests can interleave anything and check the attach guarantees of
DESIGN.md section 3 on the bytes a client would read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agenthost.protocol import AttachResponse, EventEncoder, MessageType, encode_response
from agenthost.ringbuffer import RingBuffer
from agenthost.wire.stream import Cursor, Fanout, JournalRead, plan_attach

TS = "2026-11-23T12:00:00.000000Z"


class Journal:
    """Every event since ``oldest`` (pruning drops the oldest), read like the real one."""

    def __init__(self, read_bytes: int) -> None:
        self.records: dict[int, bytes] = {}
        self.oldest = 1
        self.read_bytes = read_bytes

    def append(self, offset: int, data: bytes) -> None:
        self.records[offset] = data

    def prune(self, before: int) -> None:
        for offset in range(self.oldest, before):
            self.records.pop(offset, None)
        self.oldest = max(self.oldest, before)

    def read(self, start: int, until: int) -> list[bytes] | None:
        """Like ``JournalReader.read``: None when ``start`` was pruned, at least one
        record when there is one, else up to about ``read_bytes``."""
        if start < self.oldest:
            return None
        out: list[bytes] = []
        size = 0
        offset = start
        while offset <= until and offset in self.records and (size < self.read_bytes or not out):
            out.append(self.records[offset])
            size += len(out[-1])
            offset += 1
        return out


class Producer:
    """The agent's side: numbers events, journals them, keeps them in the ring and
    broadcasts each batch (in the order of ``AgentStream._commit``)."""

    def __init__(
        self,
        ring: RingBuffer[bytes],
        *,
        max_queue: int,
        journal: Journal | None = None,
        pump_slice: int = 256,
        pump_bytes: int = 256 << 10,
    ) -> None:
        self.ring = ring
        self.journal = journal
        self.fanout = Fanout(
            ring,
            max_queue=max_queue,
            journal=journal is not None,
            pump_slice=pump_slice,
            pump_bytes=pump_bytes,
        )
        self.encoder = EventEncoder("t1")
        self.largest_batch = 0
        self.largest_event = 0

    @property
    def head(self) -> int:
        return self.ring.last_offset

    def oldest(self) -> int:
        """The oldest offset still served (as ``AgentStream.oldest_offset``)."""
        if self.journal is None:
            return self.ring.oldest_offset
        return min(self.ring.oldest_offset, self.journal.oldest)

    def produce(self, sizes: list[int]) -> None:
        """One batch: an ``output`` event per size, of that many bytes of data."""
        first = self.ring.next_offset
        lines = [b"x" * size for size in sizes]
        chunks = self.encoder.output_lines(first, TS, lines, "stdout")
        for n, data in enumerate(chunks):
            self.ring.append(data, len(data))
            if self.journal is not None:
                self.journal.append(first + n, data)
            self.largest_event = max(self.largest_event, len(data))
        batch = b"".join(chunks)
        self.largest_batch = max(self.largest_batch, len(batch))
        self.fanout.broadcast(first, batch, len(chunks))


@dataclass
class Consumer:
    """A client reading the bytes of its connections: checks each line as it comes.

    ``last`` is the last offset it has (kept across connections, as a client that
    reattaches after a drop would); ``sessions`` the offsets of each attach, in order.
    """

    last: int = 0
    sessions: list[list[int]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    expected: int | None = None  # the next offset of the current attach; None: detached
    _partial: bytes = b""
    _asked: list[int] = field(default_factory=list)  # offsets of attaches sent, unanswered

    def asked(self, offset: int) -> None:
        self._asked.append(offset)

    def disconnected(self) -> None:
        """The connection ended: what was not read is gone, so is the attach."""
        self._partial = b""
        self._asked.clear()
        self.expected = None

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            frame = json.loads(line)  # an event inside an answer's line breaks this
            if frame["kind"] == "response":
                self._response(frame)
            else:
                self._event(frame)

    def _response(self, frame: dict[str, Any]) -> None:
        self.responses.append(frame)
        if frame["type"] == MessageType.DETACH:
            self.expected = None
        elif frame["type"] == MessageType.ATTACH:
            answer = frame["payload"]
            requested = self._asked.pop(0)
            if answer["truncated"]:
                self.expected = answer["oldest_offset"]  # guarantee 3
            else:
                self.expected = min(requested, answer["stream_offset"]) + 1
            self.sessions.append([])

    def _event(self, frame: dict[str, Any]) -> None:
        offset = frame["offset"]
        assert self.expected is not None, f"event {offset} while not attached"
        assert offset == self.expected, f"event {offset}, expected {self.expected}"
        self.expected = offset + 1
        self.last = offset
        self.sessions[-1].append(offset)


class Conn:
    """One connection as the host's server runs it, over a transport that pauses above
    ``high`` bytes and resumes at ``low``, drained by the test: a :class:`Sink`."""

    def __init__(self, producer: Producer, consumer: Consumer, *, high: int, low: int) -> None:
        self.producer = producer
        self.consumer = consumer
        self.high = high
        self.low = low
        self.buffer = bytearray()
        self.paused = False
        self.closed = False
        self.dropped = False
        self.answer: Iterator[bytes] | None = None  # a response being written in pieces
        self.reads: list[JournalRead] = []  # asked for, not answered yet
        self.queued_before_write = 0  # the most ever queued when a write came
        self.cursor: Cursor = producer.fanout.cursor(self)

    # --- Sink ---------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        assert not self.closed, "a write after the connection was aborted"
        self.queued_before_write = max(self.queued_before_write, len(self.buffer))
        self.buffer += data
        if len(self.buffer) > self.high:
            self.paused = True

    def queued(self) -> int:
        return len(self.buffer)

    def writable(self) -> bool:
        return not (self.paused or self.closed or self.answer is not None)

    def drop(self) -> None:
        self.dropped = self.closed = True
        self.buffer.clear()  # an abort loses what was not sent
        self.consumer.disconnected()

    # --- what the server does -----------------------------------------------------------

    def idle(self) -> bool:
        """Whether the server would serve a request now (answers come in order)."""
        return not (self.paused or self.closed or self.answer is not None)

    def follow(self, read: JournalRead | None) -> None:
        if read is not None:
            self.reads.append(read)

    def attach(self, offset: int) -> AttachResponse:
        producer = self.producer
        plan = plan_attach(offset, head=producer.head, oldest=producer.oldest())
        response = AttachResponse(
            agent_id="t1",
            stream_offset=producer.head,
            oldest_offset=producer.oldest(),
            truncated=plan.truncated,
        )
        self.consumer.asked(offset)
        self.write(encode_response(MessageType.ATTACH, "a", response))
        self.follow(self.cursor.attach(plan.start))  # the same step: nothing in between
        return response

    def detach(self) -> None:
        self.cursor.detach()
        self.write(encode_response(MessageType.DETACH, "d"))

    def start_answer(self, pieces: int) -> None:
        """A response of ``pieces`` pieces, written as the transport takes them."""
        self.cursor.lag()
        self.answer = iter(
            [b'{"kind":"response","type":"host.history","id":"h","payload":{"e":[']
            + [b'"%s",' % (b"y" * 40) for _ in range(pieces)]
            + [b'"end"]}}\n']
        )
        self._write_answer()

    def _write_answer(self) -> None:
        assert self.answer is not None
        while not (self.paused or self.closed):
            piece = next(self.answer, None)
            if piece is None:
                self.answer = None
                if self.cursor.attached:
                    self.follow(self.cursor.pump())
                return
            self.write(piece)

    def drain(self, limit: int) -> None:
        """The client reads up to ``limit`` bytes; the transport resumes at ``low``."""
        if self.closed:
            return
        data = bytes(self.buffer[:limit])
        del self.buffer[:limit]
        self.consumer.feed(data)
        if self.paused and len(self.buffer) <= self.low:
            self.paused = False
            if self.answer is not None:  # the rest of the answer first
                self._write_answer()
            if self.cursor.lagging and self.writable():
                self.follow(self.cursor.pump())

    def answer_read(self, read: JournalRead, *, fail: bool = False) -> None:
        """Run ``read`` against the journal now and hand the answer back."""
        self.reads.remove(read)
        if fail:
            self.cursor.journal_failed(read)
            return
        journal = self.producer.journal
        assert journal is not None
        self.follow(self.cursor.journal_records(read, journal.read(read.start, read.until)))

    def settle(self) -> None:
        """Drain everything and answer every read, until nothing moves."""
        while not self.closed and (self.buffer or self.reads or self.answer is not None):
            if self.reads:
                self.answer_read(self.reads[0])
            self.drain(1 << 30)
