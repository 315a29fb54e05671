"""Where a follow of a stream is, and what it missed: :class:`Position`,
:class:`Gap` and the :class:`Cursor` that decides both from attach responses and
events. Sans-IO: :mod:`agenthost.follow` does the connecting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeAlias

from agenthost.protocol import AttachResponse, StreamEvent


class Position(NamedTuple):
    """Where a follow is: the stream (``epoch``, "" when not known yet) and the last
    offset of it that was yielded (or skipped over: see :class:`Gap`)."""

    epoch: str
    offset: int


GapReason: TypeAlias = Literal["evicted", "new_epoch"]


@dataclass(frozen=True, slots=True)
class Gap:
    """Events the follow will never yield, reported where they would have been.

    ``reason`` "evicted": the events of stream ``epoch`` with offsets strictly between
    ``after`` and ``before`` were no longer kept by the host when the follow could read
    them. "new_epoch": the host's stream is not the one followed so far (its offsets
    say nothing about the old ones, whose unread end is lost); the new stream ``epoch``
    is followed from its start: ``after`` is 0 and ``before`` the first offset it still
    keeps (1 unless it evicted some already), or, followed from a terminal agent's
    screen, the first offset after that screen.
    """

    epoch: str
    after: int
    before: int
    reason: GapReason

    def __str__(self) -> str:
        if self.reason == "new_epoch":
            return f"a new stream {self.epoch}, from offset {self.before}"
        first, last = self.after + 1, self.before - 1
        span = f"event {first}" if first == last else f"events {first}-{last}"
        return f"{span} evicted before they could be read"


class Cursor:
    """The decisions of a follow about offsets and epochs (no I/O).

    ``after`` is the position to resume after: ``(epoch, offset)``; ``epoch`` "" means
    "whatever stream the host has". A position is owed every event after it, offset 0
    included (nothing read yet: what was evicted is a gap). None is from the oldest
    retained event, and owes nothing before it.
    """

    def __init__(self, after: tuple[str, int] | None = None) -> None:
        epoch, offset = after if after is not None else ("", 0)
        if offset < 0:
            raise ValueError(f"a position's offset is never negative, not {offset}")
        self.epoch = epoch
        self.offset = offset
        # whether events missing after `offset` are a gap for the caller (from the
        # oldest retained, nothing before the first event is owed)
        self.owed = after is not None

    @property
    def position(self) -> Position:
        """Where the follow is."""
        return Position(self.epoch, self.offset)

    def start_at(self, offset: int) -> None:
        """Start after ``offset`` of whatever stream the host has (no position yet)."""
        self.offset = max(0, offset)
        self.owed = self.offset > 0

    def other_stream(self, response: AttachResponse, from_offset: int) -> bool:
        """Whether an attach after ``from_offset`` reached a stream other than the
        known one, past its start: then attach again from 0."""
        return bool(self.epoch) and response.epoch != self.epoch and from_offset > 0

    def attached(self, response: AttachResponse, from_offset: int) -> tuple[bool, Gap | None]:
        """Take an attach response; return whether the epoch is new, and the gap it
        reveals (None if none)."""
        new_epoch = response.epoch != self.epoch
        gap: Gap | None = None
        if self.epoch and new_epoch:
            gap = Gap(response.epoch, 0, response.oldest_offset, "new_epoch")
        elif self.owed and response.truncated:
            gap = Gap(response.epoch, from_offset, response.oldest_offset, "evicted")
        self.epoch = response.epoch
        if from_offset > response.stream_offset:
            # beyond the head (the host lost the end we had): live from its next event
            self.offset = response.stream_offset
        else:
            self.offset = max(from_offset, response.oldest_offset - 1)
        self.owed = True
        return new_epoch, gap

    def event(self, event: StreamEvent) -> tuple[bool, Gap | None]:
        """Take an event; return whether to yield it (False: a duplicate), and the gap
        before it (events evicted while the reader fell behind)."""
        if event.offset <= self.offset:
            return False, None
        gap = None
        if event.offset > self.offset + 1:
            gap = Gap(self.epoch, self.offset, event.offset, "evicted")
        self.offset = event.offset
        return True, gap
