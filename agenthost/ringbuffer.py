"""An offset-indexed ring buffer, bounded by entry count and by total bytes. Sans-IO.

Every appended item gets the next offset (offsets start at ``first_offset``, 1 by
default, and grow by exactly one). The oldest items are evicted when either bound is
exceeded; the newest item is always kept, even if it alone exceeds the byte bound.

Offsets are contiguous, so the item with offset ``o`` sits ``o - oldest_offset`` slots
after the oldest one: lookups and slices are index arithmetic on a fixed circular
array. Append is O(1) (amortised over evictions), a read of ``k`` items is O(k); no
read scans or sorts the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_MAX_ENTRIES = 1000
DEFAULT_MAX_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class Since(Generic[T]):
    """The result of :meth:`RingBuffer.since`.

    ``items`` start at ``first_offset``; ``truncated`` is true when at least one item
    after the requested offset was evicted (so ``first_offset`` is the oldest kept).
    """

    items: list[T]
    first_offset: int
    truncated: bool


class RingBuffer(Generic[T]):
    """A bounded, offset-indexed FIFO of items with known sizes."""

    __slots__ = (
        "max_entries",
        "max_bytes",
        "_items",
        "_sizes",
        "_head",
        "_count",
        "_oldest",
        "_bytes",
        "_evicted",
    )

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        first_offset: int = 1,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        if first_offset < 1:
            raise ValueError("first_offset must be at least 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: list[T | None] = [None] * max_entries
        self._sizes: list[int] = [0] * max_entries
        self._head = 0  # slot of the oldest item
        self._count = 0
        self._oldest = first_offset  # offset of the item in slot _head
        self._bytes = 0
        self._evicted = 0

    def __len__(self) -> int:
        return self._count

    @property
    def next_offset(self) -> int:
        """The offset the next appended item will get."""
        return self._oldest + self._count

    @property
    def last_offset(self) -> int:
        """The offset of the newest item ever appended (``first_offset - 1`` if none)."""
        return self._oldest + self._count - 1

    @property
    def oldest_offset(self) -> int:
        """The offset of the oldest retained item, or ``next_offset`` when empty."""
        return self._oldest

    @property
    def total_bytes(self) -> int:
        """Sum of the sizes of the retained items."""
        return self._bytes

    @property
    def evicted(self) -> int:
        """How many items were evicted so far."""
        return self._evicted

    def clear(self) -> None:
        """Drop every item; the next offset stays what it was."""
        nxt = self.next_offset
        self._items = [None] * self.max_entries
        self._sizes = [0] * self.max_entries
        self._head = self._count = self._bytes = 0
        self._oldest = nxt

    def restart_at(self, first_offset: int) -> None:
        """Make an empty ring number its next item ``first_offset`` (a stream that
        continues one kept elsewhere, e.g. in a journal)."""
        if self._count:
            raise ValueError("restart_at needs an empty ring")
        if first_offset < 1:
            raise ValueError("first_offset must be at least 1")
        self._oldest = first_offset

    def append(self, item: T, size: int) -> int:
        """Add an item of ``size`` bytes; return its offset."""
        cap = self.max_entries
        if self._count == cap:
            self._evict_one()
        slot = self._head + self._count
        if slot >= cap:
            slot -= cap
        self._items[slot] = item
        self._sizes[slot] = size
        self._count += 1
        self._bytes += size
        while self._bytes > self.max_bytes and self._count > 1:
            self._evict_one()
        return self._oldest + self._count - 1

    def extend(self, items: list[T], sizes: list[int]) -> int:
        """Append ``items`` (``sizes[i]`` bytes each) in order; return the first one's
        offset. The same as one :meth:`append` per item, in slice copies rather than a
        loop over the items: a flooding agent's read is thousands of events."""
        n = len(items)
        first = self._oldest + self._count
        if n == 0:
            return first
        cap = self.max_entries
        if n > cap:  # only the newest cap items can stay: the others pass through
            self._evict(self._count)
            self._oldest += n - cap
            self._evicted += n - cap
            items, sizes = items[n - cap :], sizes[n - cap :]
            n = cap
        elif self._count + n > cap:
            self._evict(self._count + n - cap)
        start = self._head + self._count
        if start >= cap:
            start -= cap
        end = start + n
        if end <= cap:
            self._items[start:end] = items
            self._sizes[start:end] = sizes
        else:
            split = cap - start
            self._items[start:] = items[:split]
            self._items[: end - cap] = items[split:]
            self._sizes[start:] = sizes[:split]
            self._sizes[: end - cap] = sizes[split:]
        self._count += n
        self._bytes += sum(sizes)
        while self._bytes > self.max_bytes and self._count > 1:
            self._evict_one()
        return first

    def _evict(self, k: int) -> None:
        """Evict the ``k`` oldest items (k <= count) in slice operations."""
        if k <= 0:
            return
        cap = self.max_entries
        head = self._head
        end = head + k
        if end <= cap:
            self._bytes -= sum(self._sizes[head:end])
            self._items[head:end] = [None] * k
        else:
            self._bytes -= sum(self._sizes[head:]) + sum(self._sizes[: end - cap])
            self._items[head:] = [None] * (cap - head)
            self._items[: end - cap] = [None] * (end - cap)
        self._head = end if end < cap else end - cap
        self._count -= k
        self._oldest += k
        self._evicted += k

    def _evict_one(self) -> None:
        head = self._head
        self._items[head] = None
        self._bytes -= self._sizes[head]
        self._head = head + 1 if head + 1 < self.max_entries else 0
        self._count -= 1
        self._oldest += 1
        self._evicted += 1

    def get(self, offset: int) -> T | None:
        """The item at ``offset``, or None if it is not retained."""
        index = offset - self._oldest
        if index < 0 or index >= self._count:
            return None
        return self._items[(self._head + index) % self.max_entries]

    def slice(self, start: int, max_count: int | None = None) -> list[T]:
        """Retained items with offsets ``start, start+1, ...`` (at most ``max_count``).

        ``start`` below the oldest retained offset is clamped to it.
        """
        index = max(0, start - self._oldest)
        n = self._count - index
        if max_count is not None:
            n = min(n, max_count)
        if n <= 0:
            return []
        cap = self.max_entries
        begin = (self._head + index) % cap
        end = begin + n
        if end <= cap:
            return self._items[begin:end]  # type: ignore[return-value]
        return self._items[begin:] + self._items[: end - cap]  # type: ignore[return-value]

    def since(self, offset: int) -> Since[T]:
        """Items after ``offset`` (the last offset a reader has; 0 = from the oldest)."""
        start = max(offset + 1, 1)
        last = self.last_offset
        if start > last:
            return Since([], last + 1, False)
        truncated = start < self._oldest
        if truncated:
            start = self._oldest
        return Since(self.slice(start), start, truncated)

    def newest(self, n: int) -> list[T]:
        """The newest ``n`` retained items, oldest first."""
        if n <= 0:
            return []
        return self.slice(self.next_offset - n)
