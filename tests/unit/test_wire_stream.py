"""The attach stream (agenthost.wire.stream) in memory: fake sinks, a producer and a
consumer that decodes the bytes it would read (see tests/wirefakes.py)."""

from __future__ import annotations

import pytest
from wirefakes import Conn, Consumer, Journal, Producer

from agenthost.ringbuffer import RingBuffer
from agenthost.wire.stream import AttachStart, Fanout, plan_attach


def world(
    *,
    entries: int = 100,
    journal: bool = False,
    max_queue: int = 1 << 20,
    pump_slice: int = 256,
    pump_bytes: int = 256 << 10,
) -> Producer:
    return Producer(
        RingBuffer(entries, 1 << 30),
        max_queue=max_queue,
        journal=Journal(read_bytes=500) if journal else None,
        pump_slice=pump_slice,
        pump_bytes=pump_bytes,
    )


def connect(producer: Producer, *, high: int | None = None) -> Conn:
    """A connection whose transport pauses above ``high`` (at most ``max_queue``, as
    the server sets it) and resumes at a quarter of it."""
    high = producer.fanout.max_queue if high is None else high
    return Conn(producer, Consumer(), high=high, low=high // 4)


class Recorder:
    """A sink that keeps each write as given (to see which bytes are shared)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.dropped = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def queued(self) -> int:
        return sum(map(len, self.writes))

    def writable(self) -> bool:
        return True

    def drop(self) -> None:
        self.dropped = True


@pytest.mark.parametrize(
    ("offset", "head", "oldest", "expected"),
    [
        (0, 0, 1, AttachStart(1, False)),  # nothing produced yet
        (0, 10, 1, AttachStart(1, False)),  # everything kept
        (0, 10, 4, AttachStart(4, True)),  # at 0 after evictions: truncated
        (3, 10, 4, AttachStart(4, False)),  # has everything up to the oldest kept
        (2, 10, 4, AttachStart(4, True)),  # event 3 is gone
        (7, 10, 4, AttachStart(8, False)),
        (10, 10, 4, AttachStart(11, False)),  # at the head: live only
        (50, 10, 4, AttachStart(11, False)),  # beyond the head: live from the next
        (0, 10, 11, AttachStart(11, True)),  # nothing retained, events were produced
    ],
)
def test_plan_attach(offset: int, head: int, oldest: int, expected: AttachStart) -> None:
    assert plan_attach(offset, head=head, oldest=oldest) == expected


def test_replay_then_live_each_offset_once() -> None:
    producer = world()
    producer.produce([5, 5, 5])
    conn = connect(producer)
    conn.attach(1)
    producer.produce([5])
    producer.produce([5, 5])
    conn.settle()
    assert conn.consumer.sessions == [[2, 3, 4, 5, 6]]
    assert not conn.cursor.lagging


def test_attach_beyond_the_head_streams_the_next_event() -> None:
    producer = world()
    producer.produce([5, 5])
    conn = connect(producer)
    response = conn.attach(40)
    producer.produce([5])
    conn.settle()
    assert response.stream_offset == 2 and not response.truncated
    assert conn.consumer.sessions == [[3]]


def test_a_live_batch_is_the_same_bytes_for_every_client() -> None:
    producer = world()
    sinks = [Recorder(), Recorder()]
    for sink in sinks:
        assert producer.fanout.cursor(sink).attach(1) is None
    producer.produce([5, 5])
    first, second = (sink.writes[-1] for sink in sinks)
    assert first is second  # encoded once, one write each


def test_a_slow_client_lags_and_is_served_from_the_ring_in_slices() -> None:
    producer = world(max_queue=300, pump_slice=3, pump_bytes=1 << 20)
    slow = connect(producer)
    fast = connect(producer)
    slow.attach(0)
    fast.attach(0)
    for _ in range(20):
        producer.produce([30])
        fast.settle()
    assert slow.cursor.lagging and slow.cursor.attached  # the agent went on regardless
    assert slow.queued() <= 300 + producer.largest_batch
    assert fast.consumer.sessions == [list(range(1, 21))]
    sizes = []
    while slow.buffer:
        before = slow.cursor.next_offset
        slow.drain(1 << 20)
        sizes.append(slow.cursor.next_offset - before)
    assert max(sizes) == 3  # a slice at a time, each when the transport drained
    assert slow.consumer.sessions == [list(range(1, 21))] and not slow.cursor.lagging


def test_a_slice_is_bounded_in_bytes() -> None:
    producer = world(pump_bytes=250)
    producer.produce([100] * 10)
    sink = Recorder()
    producer.fanout.cursor(sink).attach(1)
    assert all(len(w) < 250 + producer.largest_event for w in sink.writes)
    assert len(sink.writes) > 1


def test_without_a_journal_a_client_that_fell_out_of_the_ring_is_dropped() -> None:
    producer = world(entries=5, max_queue=100)
    conn = connect(producer)
    conn.attach(0)
    for _ in range(8):
        producer.produce([40])
    assert conn.dropped and not conn.cursor.attached
    assert producer.fanout.dropped == 1
    assert not producer.fanout.attached
    # It reattaches from what it has: truncated, from the oldest kept.
    again = connect(producer)
    again.consumer = conn.consumer
    response = again.attach(conn.consumer.last)
    again.settle()
    assert response.truncated and response.oldest_offset == 4
    assert again.consumer.sessions[-1] == [4, 5, 6, 7, 8]


def test_with_a_journal_a_client_that_fell_out_is_caught_up_from_it() -> None:
    producer = world(entries=3, journal=True, max_queue=100)
    conn = connect(producer)
    conn.attach(0)
    for _ in range(12):
        producer.produce([40])
    assert conn.cursor.attached and not conn.dropped  # waits for its drain
    assert not conn.reads
    conn.drain(1 << 20)
    assert conn.reads  # it asks the journal for what the ring lost
    read = conn.reads[0]
    assert read.start == conn.cursor.next_offset and read.until == producer.ring.oldest_offset - 1
    producer.produce([40])  # meanwhile the ring moves on
    conn.settle()
    assert conn.consumer.sessions == [list(range(1, 14))]
    assert not conn.cursor.lagging and conn.cursor.reading is None


def test_journal_records_wait_for_the_sink() -> None:
    producer = world(entries=2, journal=True)
    producer.produce([40] * 6)
    conn = connect(producer, high=60)
    conn.attach(0)
    (read,) = conn.reads
    conn.write(b"")  # still the attach response queued ...
    conn.paused = True  # ... and the transport above its mark
    conn.answer_read(read)
    assert conn.cursor.next_offset == 1  # nothing written into a full queue
    conn.settle()
    assert conn.consumer.sessions == [[1, 2, 3, 4, 5, 6]]


def test_a_read_for_an_earlier_attach_is_void() -> None:
    producer = world(entries=2, journal=True)
    producer.produce([40] * 6)
    conn = connect(producer)
    conn.attach(0)
    (stale,) = conn.reads
    conn.detach()
    conn.attach(4)
    conn.answer_read(stale)  # answered after the reattach: ignored
    conn.settle()
    assert conn.consumer.sessions == [[], [5, 6]]


def test_a_read_for_a_detached_client_writes_nothing() -> None:
    producer = world(entries=2, journal=True)
    producer.produce([40] * 6)
    conn = connect(producer)
    conn.attach(0)
    (read,) = conn.reads
    conn.detach()
    conn.answer_read(read)
    conn.settle()
    assert conn.consumer.sessions == [[]] and not conn.dropped
    assert conn.consumer.responses[-1]["type"] == "host.detach"


def test_records_pruned_meanwhile_or_a_failed_read_drop_the_client() -> None:
    for fail in (False, True):
        producer = world(entries=2, journal=True)
        producer.produce([40] * 6)
        conn = connect(producer)
        conn.attach(0)
        (read,) = conn.reads
        assert producer.journal is not None
        producer.journal.prune(3)
        conn.answer_read(read, fail=fail)
        assert conn.dropped and producer.fanout.dropped == 1


def test_no_event_lands_inside_an_answer_written_in_pieces() -> None:
    producer = world()
    conn = connect(producer, high=50)
    conn.attach(0)
    conn.drain(1 << 20)
    conn.start_answer(pieces=4)
    assert conn.answer is not None  # paused in the middle of the line
    producer.produce([5, 5])
    producer.produce([5])
    conn.settle()  # the consumer decodes every line: an event inside one fails
    assert conn.consumer.sessions == [[1, 2, 3]]
    assert conn.consumer.responses[-1]["type"] == "host.history"


def test_no_event_follows_the_detach_response() -> None:
    producer = world(max_queue=50)
    conn = connect(producer)
    conn.attach(0)
    producer.produce([30, 30])
    producer.produce([30])  # lagging: this one waits in the ring
    conn.drain(1 << 20)
    conn.detach()
    producer.produce([30])
    conn.settle()
    assert conn.consumer.responses[-1]["type"] == "host.detach"
    assert conn.consumer.expected is None  # an event after it would have failed
    conn.attach(conn.consumer.last)  # the same connection attaches again
    conn.settle()
    assert conn.consumer.sessions[-1][-1] == 4


def test_detach_unregisters() -> None:
    fanout = Fanout(RingBuffer(4, 1000), max_queue=10)
    sink = Recorder()
    cursor = fanout.cursor(sink)
    cursor.attach(1)
    assert fanout.attached == {cursor}
    cursor.detach()
    fanout.broadcast(1, b"x\n", 1)
    assert not fanout.attached and not sink.writes


def test_an_empty_answer_drops_rather_than_asking_again() -> None:
    producer = world(entries=2, journal=True)
    producer.produce([40] * 6)
    conn = connect(producer)
    conn.attach(0)
    (read,) = conn.reads
    conn.reads.clear()
    assert conn.cursor.journal_records(read, []) is None
    assert conn.dropped
