"""The attach guarantees (DESIGN.md section 3) under any interleaving, in memory.

A hypothesis state machine drives a producer with a tiny ring (and a journal, or none)
and two clients over fake transports: produce, attach at any offset (0, the last one it
has, the head, beyond it, anywhere), detach, read k bytes, answer a request in pieces,
answer or fail journal reads late, prune the journal, reconnect after a drop. The
consumers decode every byte they read and check, as it comes, that each attach
delivers from ``max(requested + 1, oldest)`` on, in order, each offset once, with no
event after a detach response or inside another answer's line; the machine checks
that ``truncated`` tells the truth, that a send queue stays bounded, and that a client
that was not dropped ends caught up.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from wirefakes import Conn, Consumer, Journal, Producer

from agenthost.ringbuffer import RingBuffer

CLIENTS = st.integers(0, 1)


class AttachStream(RuleBasedStateMachine):
    producer: Producer
    conns: list[Conn]
    gone: list[Conn]  # replaced connections: their reads may still be answered

    @initialize(
        journal=st.booleans(),
        entries=st.integers(1, 6),
        ring_bytes=st.integers(150, 1500),
        max_queue=st.integers(200, 800),
        pump_slice=st.integers(1, 4),
        pump_bytes=st.integers(100, 400),
        read_bytes=st.integers(50, 400),
    )
    def setup(
        self,
        journal: bool,
        entries: int,
        ring_bytes: int,
        max_queue: int,
        pump_slice: int,
        pump_bytes: int,
        read_bytes: int,
    ) -> None:
        self.producer = Producer(
            RingBuffer(entries, ring_bytes),
            max_queue=max_queue,
            journal=Journal(read_bytes) if journal else None,
            pump_slice=pump_slice,
            pump_bytes=pump_bytes,
        )
        self.conns = [self._connect(Consumer()) for _ in range(2)]
        self.gone = []

    def _connect(self, consumer: Consumer) -> Conn:
        high = self.producer.fanout.max_queue  # the server's high-water mark <= max_queue
        return Conn(self.producer, consumer, high=high, low=high // 4)

    def _retained(self, offset: int) -> bool:
        journal = self.producer.journal
        return self.producer.ring.get(offset) is not None or (
            journal is not None and offset in journal.records
        )

    # --- rules ------------------------------------------------------------------------

    @rule(sizes=st.lists(st.integers(0, 80), min_size=1, max_size=4))
    def produce(self, sizes: list[int]) -> None:
        self.producer.produce(sizes)

    @rule(i=CLIENTS, limit=st.integers(1, 600))
    def drain(self, i: int, limit: int) -> None:
        self.conns[i].drain(limit)

    @rule(
        i=CLIENTS,
        where=st.sampled_from(["zero", "last", "head", "beyond", "anywhere"]),
        anywhere=st.integers(0, 10**6),
    )
    def attach(self, i: int, where: str, anywhere: int) -> None:
        conn = self.conns[i]
        if not conn.idle():
            return  # the server serves a request only then (answers come in order)
        head = self.producer.head
        offset = {
            "zero": 0,
            "last": conn.consumer.last,
            "head": head,
            "beyond": head + 1 + anywhere % 5,
            "anywhere": anywhere % (head + 1),
        }[where]
        self._attach(conn, offset)

    def _attach(self, conn: Conn, offset: int) -> None:
        head = self.producer.head
        response = conn.attach(offset)
        # truncated exactly when an event after the offset is no longer retained
        gone = any(not self._retained(o) for o in range(offset + 1, head + 1))
        assert response.truncated == gone
        assert response.oldest_offset == self.producer.oldest()

    @rule(i=CLIENTS)
    def detach(self, i: int) -> None:
        conn = self.conns[i]
        if conn.idle() and conn.cursor.attached:
            conn.detach()

    @rule(i=CLIENTS, pieces=st.integers(1, 5))
    def answer_in_pieces(self, i: int, pieces: int) -> None:
        conn = self.conns[i]
        if conn.idle():
            conn.start_answer(pieces)

    @precondition(lambda self: any(c.reads for c in self.conns + self.gone))
    @rule(pick=st.integers(0, 10**6), fail=st.integers(0, 9))
    def answer_read(self, pick: int, fail: int) -> None:
        pending = [(c, r) for c in self.conns + self.gone for r in c.reads]
        conn, read = pending[pick % len(pending)]
        conn.answer_read(read, fail=fail == 0)  # a damaged journal, now and then

    @precondition(lambda self: self.producer.journal is not None)
    @rule(keep=st.integers(0, 10))
    def prune_journal(self, keep: int) -> None:
        journal = self.producer.journal
        assert journal is not None
        journal.prune(max(journal.oldest, self.producer.head + 1 - keep))

    @rule(i=CLIENTS)
    def reconnect_after_drop(self, i: int) -> None:
        """A dropped client connects again and attaches from the last offset it has."""
        conn = self.conns[i]
        if not conn.closed:
            return
        self.gone.append(conn)
        again = self.conns[i] = self._connect(conn.consumer)
        last = conn.consumer.last
        self._attach(again, last)
        journal = self.producer.journal
        again.settle()
        sessions = again.consumer.sessions
        if sessions[-1] and not again.dropped:
            truncated = again.consumer.responses[-1]["payload"]["truncated"]
            if not truncated:  # it gets the rest: from the ring, or from the journal
                assert sessions[-1][0] == last + 1
            if journal is not None and journal.oldest == 1:
                assert not truncated  # nothing lost while the journal keeps everything

    @rule(i=CLIENTS)
    def settle(self, i: int) -> None:
        self._settled(self.conns[i])

    def _settled(self, conn: Conn) -> None:
        conn.settle()
        if conn.cursor.attached:  # not dropped: no gap, caught up to the head
            assert conn.consumer.expected == self.producer.head + 1
            assert not conn.cursor.lagging

    # --- invariants -------------------------------------------------------------------

    @invariant()
    def send_queues_are_bounded(self) -> None:
        # a write only ever lands on a queue of at most max_queue bytes
        for conn in self.conns:
            assert conn.queued_before_write <= self.producer.fanout.max_queue

    @invariant()
    def the_fanout_holds_exactly_the_attached_cursors(self) -> None:
        attached = {c.cursor for c in self.conns if c.cursor.attached}
        assert self.producer.fanout.attached == attached
        for conn in self.conns:
            if conn.dropped:
                assert not conn.cursor.attached

    @invariant()
    def one_journal_read_at_a_time(self) -> None:
        for conn in self.conns:
            reading = conn.cursor.reading
            assert reading is None or reading in conn.reads

    def teardown(self) -> None:
        for conn in getattr(self, "conns", []):
            self._settled(conn)


AttachStream.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_attach_stream = AttachStream.TestCase
