"""agenthost.ringbuffer.RingBuffer, checked against a naive list model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agenthost.ringbuffer import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, RingBuffer, Since


class Item:
    """A distinct object per append, so identity can be checked."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __repr__(self) -> str:
        return f"Item({self.offset})"


class Model:
    """The obvious implementation: a Python list of (offset, item, size)."""

    def __init__(self, max_entries: int, max_bytes: int, first_offset: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.first_offset = first_offset
        self.next_offset = first_offset
        self.kept: list[tuple[int, Item, int]] = []
        self.appended = 0

    def append(self, item: Item, size: int) -> int:
        offset = self.next_offset
        self.next_offset += 1
        self.appended += 1
        self.kept.append((offset, item, size))
        while len(self.kept) > self.max_entries:
            self.kept.pop(0)
        while sum(s for _, _, s in self.kept) > self.max_bytes and len(self.kept) > 1:
            self.kept.pop(0)
        return offset

    @property
    def oldest(self) -> int:
        return self.kept[0][0] if self.kept else self.next_offset

    def since(self, offset: int) -> tuple[list[Item], int, bool]:
        items = [(o, it) for o, it, _ in self.kept if o > offset]
        retained = {o for o, _, _ in self.kept}
        # every offset a stream ever had: 1 .. next-1 (those before first_offset are gone)
        truncated = any(o not in retained for o in range(max(offset + 1, 1), self.next_offset))
        first = items[0][0] if items else self.next_offset
        if truncated and not items:
            first = self.oldest
        return [it for _, it in items], first, truncated

    def slice(self, start: int, max_count: int | None) -> list[Item]:
        items = [it for o, it, _ in self.kept if o >= start]
        if max_count is not None:
            items = items[: max(max_count, 0)]
        return items

    def get(self, offset: int) -> Item | None:
        for o, it, _ in self.kept:
            if o == offset:
                return it
        return None

    def newest(self, n: int) -> list[Item]:
        if n <= 0:
            return []
        return [it for _, it, _ in self.kept[-n:]]


class RingMachine(RuleBasedStateMachine):
    @initialize(
        max_entries=st.integers(min_value=1, max_value=12),
        max_bytes=st.integers(min_value=1, max_value=200),
        first_offset=st.integers(min_value=1, max_value=50),
    )
    def setup(self, max_entries: int, max_bytes: int, first_offset: int) -> None:
        self.ring: RingBuffer[Item] = RingBuffer(max_entries, max_bytes, first_offset=first_offset)
        self.model = Model(max_entries, max_bytes, first_offset)

    @rule(size=st.integers(min_value=0, max_value=80))
    def append(self, size: int) -> None:
        item = Item(self.model.next_offset)
        assert self.ring.append(item, size) == self.model.append(item, size)
        # the newest item is always kept, even when it alone exceeds max_bytes
        assert self.ring.get(item.offset) is item
        assert self.ring.last_offset == item.offset

    @rule(sizes=st.lists(st.integers(min_value=0, max_value=80), max_size=30))
    def extend(self, sizes: list[int]) -> None:
        """A batch is the same as one append per item (wrapping, evicting by count and
        by bytes, more items than the ring holds)."""
        first = self.model.next_offset
        items = [Item(first + i) for i in range(len(sizes))]
        assert self.ring.extend(items, sizes) == first
        for item, size in zip(items, sizes, strict=True):
            self.model.append(item, size)
        if items:
            assert self.ring.get(items[-1].offset) is items[-1]

    @rule(big=st.integers(min_value=1, max_value=1000))
    def append_huge(self, big: int) -> None:
        item = Item(self.model.next_offset)
        size = self.ring.max_bytes + big
        self.ring.append(item, size)
        self.model.append(item, size)
        assert len(self.ring) == 1
        assert self.ring.newest(5) == [item]

    @rule(delta=st.integers(min_value=-60, max_value=20))
    def since(self, delta: int) -> None:
        offset = max(0, self.model.next_offset - 1 + delta)
        got = self.ring.since(offset)
        assert isinstance(got, Since)
        items, first, truncated = self.model.since(offset)
        assert got.truncated is truncated
        assert _same(got.items, items)
        assert got.first_offset == first
        if got.items:
            assert got.items[0].offset == got.first_offset

    @rule()
    def attach_from_zero(self) -> None:
        got = self.ring.since(0)
        items, first, truncated = self.model.since(0)
        assert (got.first_offset, got.truncated) == (first, truncated)
        assert _same(got.items, items)

    @rule()
    def since_beyond_head(self) -> None:
        for offset in (self.model.next_offset - 1, self.model.next_offset, 10**12):
            got = self.ring.since(offset)
            assert got.items == []
            assert got.truncated is False
            assert got.first_offset == self.model.next_offset

    @rule(
        delta=st.integers(min_value=-60, max_value=20),
        max_count=st.one_of(st.none(), st.integers(min_value=-2, max_value=15)),
    )
    def slice(self, delta: int, max_count: int | None) -> None:
        start = self.model.next_offset + delta
        assert _same(self.ring.slice(start, max_count), self.model.slice(start, max_count))

    @rule(delta=st.integers(min_value=-60, max_value=5))
    def get(self, delta: int) -> None:
        offset = self.model.next_offset + delta
        assert self.ring.get(offset) is self.model.get(offset)

    @rule(n=st.integers(min_value=-2, max_value=20))
    def newest(self, n: int) -> None:
        assert _same(self.ring.newest(n), self.model.newest(n))

    @invariant()
    def bounds_and_offsets(self) -> None:
        ring, model = self.ring, self.model
        kept = model.kept
        assert len(ring) == len(kept)
        assert ring.next_offset == model.next_offset
        assert ring.last_offset == model.next_offset - 1
        assert ring.oldest_offset == model.oldest
        assert ring.total_bytes == sum(s for _, _, s in kept)
        assert ring.evicted == model.appended - len(kept)
        assert len(ring) <= ring.max_entries
        assert ring.total_bytes <= ring.max_bytes or len(ring) == 1
        # contiguous offsets from oldest_offset, in order, the very objects appended
        everything = ring.slice(0)
        assert [it.offset for it in everything] == list(range(ring.oldest_offset, ring.next_offset))
        assert _same(everything, [it for _, it, _ in kept])


def _same(a: list[Item], b: list[Item]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


TestRingMachine = RingMachine.TestCase
TestRingMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


# --- fixed cases -------------------------------------------------------------------------


def test_defaults() -> None:
    ring: RingBuffer[str] = RingBuffer()
    assert ring.max_entries == DEFAULT_MAX_ENTRIES == 1000
    assert ring.max_bytes == DEFAULT_MAX_BYTES
    assert len(ring) == 0
    assert (ring.oldest_offset, ring.next_offset, ring.last_offset) == (1, 1, 0)
    assert ring.since(0) == Since([], 1, False)


def test_offsets_start_at_one_and_grow_by_one() -> None:
    ring: RingBuffer[str] = RingBuffer(3, 1000)
    assert [ring.append(s, 1) for s in "abcde"] == [1, 2, 3, 4, 5]
    assert ring.since(0) == Since(["c", "d", "e"], 3, True)
    assert ring.since(1) == Since(["c", "d", "e"], 3, True)
    assert ring.since(2) == Since(["c", "d", "e"], 3, False)
    assert ring.since(4) == Since(["e"], 5, False)
    assert ring.since(5) == Since([], 6, False)
    assert ring.since(99) == Since([], 6, False)
    assert ring.get(2) is None and ring.get(3) == "c" and ring.get(6) is None


def test_byte_bound_evicts_oldest_but_keeps_newest() -> None:
    ring: RingBuffer[str] = RingBuffer(100, 10)
    ring.append("a", 4)
    ring.append("b", 4)
    assert ring.slice(1) == ["a", "b"]
    ring.append("c", 4)  # 12 > 10: "a" goes
    assert ring.slice(1) == ["b", "c"] and ring.total_bytes == 8
    ring.append("huge", 50)  # alone over the bound: kept, everything else goes
    assert ring.slice(1) == ["huge"] and ring.total_bytes == 50
    assert ring.since(0) == Since(["huge"], 4, True)
    ring.append("d", 1)  # the huge one goes now
    assert ring.slice(1) == ["d"] and ring.total_bytes == 1
    assert ring.evicted == 4


def test_first_offset_above_one() -> None:
    ring: RingBuffer[str] = RingBuffer(5, 100, first_offset=101)
    assert (ring.oldest_offset, ring.next_offset, ring.last_offset) == (101, 101, 100)
    # nothing retained yet, but offsets 1..100 are gone: attach at 0 is truncated
    assert ring.since(0) == Since([], 101, True)
    assert ring.since(100) == Since([], 101, False)
    assert ring.append("x", 1) == 101
    assert ring.since(0) == Since(["x"], 101, True)
    assert ring.since(50) == Since(["x"], 101, True)
    assert ring.since(100) == Since(["x"], 101, False)
    assert ring.since(101) == Since([], 102, False)
    assert ring.get(101) == "x" and ring.get(1) is None


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((0, 10), {}),
        ((-1, 10), {}),
        ((10, 0), {}),
        ((10, -5), {}),
        ((10, 10), {"first_offset": 0}),
        ((10, 10), {"first_offset": -1}),
    ],
)
def test_constructor_rejects_bad_bounds(args: tuple[int, int], kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        RingBuffer(*args, **kwargs)


def test_minimal_bounds() -> None:
    ring: RingBuffer[str] = RingBuffer(1, 1)
    for i, s in enumerate("abc", start=1):
        assert ring.append(s, 5) == i
        assert ring.slice(0) == [s]
    assert ring.evicted == 2


@settings(max_examples=50, deadline=None)
@given(
    max_entries=st.integers(min_value=1, max_value=50),
    n=st.integers(min_value=0, max_value=400),
)
def test_storage_is_fixed_and_reads_return_the_appended_objects(max_entries: int, n: int) -> None:
    """Structural facts behind O(1) append: the slots are preallocated once and reused
    (no growth with the number of appends), and reads hand back the very objects."""
    ring: RingBuffer[Item] = RingBuffer(max_entries, 1 << 30)
    slots = ring._items  # structural check of the circular array
    items = [Item(i + 1) for i in range(n)]
    for item in items:
        ring.append(item, 1)
        assert ring._items is slots
        assert len(slots) == max_entries
    kept = items[-max_entries:] if n else []
    assert _same(ring.since(0).items, kept)
    assert _same(ring.newest(max_entries), kept)
    assert all(ring.get(it.offset) is it for it in kept)
    # evicted slots are cleared: no reference to an evicted item stays in the array
    assert sum(s is not None for s in slots) == len(kept)
    evicted_ids = {id(it) for it in items[: n - len(kept)]}
    assert not any(id(s) in evicted_ids for s in slots if s is not None)


def test_byte_evictions_drop_references() -> None:
    """Evicted items are released (the ring may hold large encoded events)."""
    ring: RingBuffer[Item] = RingBuffer(10, 10)
    items = [Item(i) for i in range(1, 6)]
    for item in items:
        ring.append(item, 2)
    big = Item(6)
    ring.append(big, 10)
    assert ring.slice(0) == [big]
    assert [s for s in ring._items if s is not None] == [big]
