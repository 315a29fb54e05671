"""The merged stream of every host: per-agent replay buffers and ``daemon.watch`` clients.

Each host's events reach the daemon through its follower and are handed to
:meth:`Hub.publish` as wire bytes, encoded once. The hub keeps the newest of them per
agent in a :class:`~agenthost.ringbuffer.RingBuffer` indexed by the *host's* offsets,
so a watcher that reconnects (after being dropped, or after the daemon restarted) can
say where it was (``since``) and continue without a gap or a duplicate, as long as the
buffer still holds what it missed.

Watchers work like the host's attached clients (:mod:`agenthost.host.server`): each
has a cursor per agent, the next offset it must get.

* A watcher that keeps up gets every new event at once, the same bytes as everybody.
* When its queued bytes pass ``max_queue`` it *lags*: new events stay in the buffers,
  and it is pumped from them, in slices, whenever its transport drains, until it has
  caught up. A replay is served the same way.
* If a cursor of a lagging watcher falls out of its buffer, it cannot be served
  exactly once any more: it is dropped (its connection closed). It may watch again
  with ``since``, and ``truncated`` tells it what is gone.

So a slow watcher never slows a host, the daemon or the other watchers. Registration
and the start of a replay happen in one synchronous step on the event loop, so no
event falls between them. Notices are not buffered: they go to every watcher at once.

A watcher may ask for events older than a buffer holds (after a daemon restart, the
buffers start at the recorded positions, which trail what the old daemon delivered).
Those are *backfilled* (:mod:`agenthost.daemon.backfill` does the reading): the daemon
first learns how far back the host (or its journal) still goes (:class:`Held`), answers,
and registers the watcher at once with its cursor behind the buffer, the agent marked
*filling*. Live events of that agent are not sent to it (they stay in the buffer, as for
a lagging watcher); slices read from the host are handed to :meth:`Hub.fill`, each only
when the watcher's transport accepts more (:meth:`Hub.fill_ready`), and
:meth:`Hub.fill_range` says what to read next: whatever lies between the cursor and the
buffer's oldest offset *now*, however much the buffer evicted meanwhile. Once the cursor
reaches the buffer, in the same synchronous step, the agent is served from the buffer
as usual. So the stitch is exact whatever the agent printed during the backfill, and
the daemon holds one slice at a time, never the whole range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import structlog

from agenthost.daemon.protocol import (
    NoticeType,
    WatchRequest,
    WatchResponse,
    WatchStart,
    encode_notice,
)
from agenthost.protocol import encode_response
from agenthost.ringbuffer import RingBuffer

log = structlog.get_logger("agenthost.daemon.fanout")

DEFAULT_BUFFER_EVENTS: Final = 1000
DEFAULT_BUFFER_BYTES: Final = 8 << 20
DEFAULT_MAX_QUEUE: Final = 8 << 20
PUMP_SLICE: Final = 256  # events per write when catching a watcher up


@dataclass(slots=True)
class WatchState:
    """One watcher's position: the next offset it needs, per agent."""

    agents: frozenset[str] | None
    cursors: dict[str, int] = field(default_factory=dict)
    lagging: bool = True
    filling: set[str] = field(default_factory=set)
    """Agents whose cursor is older than their buffer: served by a backfill, not from
    the buffer, until the cursor reaches it."""
    awaited: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Positions (epoch, last offset) the watcher gave for agents the daemon had not
    attached yet (a host unreachable at start, or not reattached yet): kept until
    their stream appears, so it starts after them rather than over them."""

    def wants(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents


class Watcher(Protocol):
    """What the hub needs from a watching connection."""

    watch: WatchState | None

    def send(self, data: bytes) -> None: ...

    def queued(self) -> int: ...

    def paused(self) -> bool: ...

    def drop(self, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Held:
    """How far back a host (or its journal) still holds one agent's stream ``epoch``:
    ``first_offset`` is the oldest offset it can serve."""

    epoch: str
    first_offset: int


@dataclass(slots=True)
class Feed:
    """One agent's stream as the daemon has seen it."""

    epoch: str
    ring: RingBuffer[bytes]


@dataclass
class Hub:
    """Per-agent buffers and the watching connections."""

    buffer_events: int = DEFAULT_BUFFER_EVENTS
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    max_queue: int = DEFAULT_MAX_QUEUE
    feeds: dict[str, Feed] = field(default_factory=dict)
    watchers: set[Watcher] = field(default_factory=set)
    dropped: int = 0

    # --- the hosts' side ----------------------------------------------------------------

    def attached(self, agent_id: str, epoch: str, from_offset: int, **fields: Any) -> None:
        """A follower (re)attached to the agent's host after ``from_offset``."""
        feed = self.feeds.get(agent_id)
        if feed is None or feed.epoch != epoch or feed.ring.next_offset != from_offset + 1:
            # a new stream, or not where the buffer ends: a fresh buffer from there
            self._new_feed(agent_id, epoch, from_offset + 1)
        self.notice(
            NoticeType.HOST_ATTACHED, agent_id, epoch=epoch, from_offset=from_offset, **fields
        )

    def publish(self, agent_id: str, offset: int, frame: bytes) -> None:
        """One event of ``agent_id``'s host (``frame`` is its wire line)."""
        feed = self.feeds.get(agent_id)
        if feed is None:
            feed = self._new_feed(agent_id, "", offset)
        elif offset != feed.ring.next_offset:
            # events the daemon never got (evicted from the host's ring first)
            self.notice(NoticeType.GAP, agent_id, after=feed.ring.last_offset, before=offset)
            feed = self._new_feed(agent_id, feed.epoch, offset)
        ring = feed.ring
        ring.append(frame, len(frame))
        oldest = ring.oldest_offset
        for watcher in list(self.watchers):
            state = watcher.watch
            if state is None or not state.wants(agent_id) or agent_id in state.filling:
                continue  # (a backfill reaches the buffer later, whatever it evicted)
            cursor = state.cursors.setdefault(agent_id, offset)
            if state.lagging:
                if cursor < oldest:
                    self._drop(watcher, f"fell behind the buffer of {agent_id}")
                continue
            if offset < cursor:
                # it has this one: its position is ahead of the daemon's (a restarted
                # daemon's buffer starts at the recorded position, which trails)
                continue
            # invariant: a watcher that does not lag has had everything before this
            state.cursors[agent_id] = offset + 1
            watcher.send(frame)
            if watcher.queued() > self.max_queue:
                state.lagging = True

    def notice(self, ntype: NoticeType, agent_id: str, **fields: Any) -> None:
        """Send a notice to the watchers of ``agent_id`` (not buffered)."""
        frame = encode_notice(ntype, agent_id, **fields)
        for watcher in list(self.watchers):
            state = watcher.watch
            if state is not None and state.wants(agent_id):
                watcher.send(frame)

    def forget(self, agent_id: str) -> None:
        self.feeds.pop(agent_id, None)

    def _new_feed(self, agent_id: str, epoch: str, first_offset: int) -> Feed:
        old = self.feeds.get(agent_id)
        feed = Feed(
            epoch, RingBuffer(self.buffer_events, self.buffer_bytes, first_offset=first_offset)
        )
        self.feeds[agent_id] = feed
        for watcher in list(self.watchers):
            state = watcher.watch
            if state is None:
                continue
            if agent_id in state.awaited:
                self._resume_awaited(watcher, state, agent_id, feed)
                continue
            if agent_id not in state.cursors:
                continue
            behind = old is not None and state.cursors[agent_id] < old.ring.next_offset
            if behind or agent_id in state.filling:  # it still needed events of the old one
                self._drop(watcher, f"a new stream of {agent_id} replaced what it missed")
            elif old is not None and old.epoch == epoch:  # the same stream goes on
                state.cursors[agent_id] = max(state.cursors[agent_id], first_offset)
            else:
                state.cursors[agent_id] = first_offset
        return feed

    def _resume_awaited(
        self, watcher: Watcher, state: WatchState, agent_id: str, feed: Feed
    ) -> None:
        """The stream of an agent the watcher had a position in appeared: continue
        after that position; if the stream starts later (the daemon did not get what
        came between), say so with a ``gap`` notice, as for any events the daemon
        never got."""
        epoch, last = state.awaited.pop(agent_id)
        first = feed.ring.next_offset
        if epoch != feed.epoch:  # another stream: all of it is new to the watcher
            state.cursors[agent_id] = first
            return
        if last + 1 < first:
            watcher.send(encode_notice(NoticeType.GAP, agent_id, after=last, before=first))
        state.cursors[agent_id] = max(last + 1, first)

    # --- the watchers' side -------------------------------------------------------------

    def backfill_needs(self, request: WatchRequest) -> dict[str, tuple[str, int, int]]:
        """Agents whose watcher position is older than the buffer: agent id ->
        ``(epoch, after, upto)``, the offsets the buffer lacks now (``after`` < o <=
        ``upto``; the buffer may evict more before the backfill is done)."""
        needs = {}
        for agent_id, feed in self.feeds.items():
            cursor = request.since.get(agent_id)
            if request.live_only or cursor is None or cursor.epoch != feed.epoch:
                continue
            if request.agents is not None and agent_id not in request.agents:
                continue
            if cursor.offset + 1 < feed.ring.oldest_offset:
                needs[agent_id] = (feed.epoch, cursor.offset, feed.ring.oldest_offset - 1)
        return needs

    def watch(
        self,
        watcher: Watcher,
        request: WatchRequest,
        request_id: str | int | None,
        held: dict[str, Held] | None = None,
    ) -> list[str]:
        """Answer ``daemon.watch``, register the watcher and start its replay, in one step.

        ``held``: how far back the hosts still go, for positions older than the buffers.
        Return the agents to backfill (their events come through :meth:`fill`)."""
        wanted = frozenset(request.agents) if request.agents is not None else None
        state = WatchState(wanted)
        starts: dict[str, WatchStart] = {}
        for agent_id, feed in sorted(self.feeds.items()):
            if not state.wants(agent_id):
                continue
            ring = feed.ring
            cursor = request.since.get(agent_id)
            if request.live_only:
                after = ring.last_offset
            elif cursor is not None and cursor.epoch == feed.epoch:
                after = cursor.offset
            else:
                after = 0  # a stream new to this watcher: from the oldest kept
            first = max(after + 1, ring.oldest_offset)
            hold = (held or {}).get(agent_id)
            if hold is not None and hold.epoch == feed.epoch:
                begin = max(after + 1, hold.first_offset)
                if begin < first:  # the host has some of what the buffer lacks
                    first = begin
                    state.filling.add(agent_id)
            state.cursors[agent_id] = first
            starts[agent_id] = WatchStart(
                epoch=feed.epoch,
                stream_offset=ring.last_offset,
                oldest_offset=ring.oldest_offset,
                from_offset=first - 1,
                truncated=first > after + 1,
            )
        if not request.live_only:
            for agent_id, position in request.since.items():
                if agent_id not in self.feeds and state.wants(agent_id):
                    state.awaited[agent_id] = (position.epoch, position.offset)
        watcher.watch = state
        watcher.send(encode_response("daemon.watch", request_id, WatchResponse(agents=starts)))
        self.watchers.add(watcher)
        self.pump(watcher)
        return sorted(state.filling)

    def fill_ready(self, watcher: Watcher) -> bool:
        """Whether a backfill may send the watcher its next slice now. When not, the
        watcher counts as lagging, so that its transport's drain pumps it (and wakes
        the backfill)."""
        state = watcher.watch
        if state is None:
            return False
        if watcher.paused() or watcher.queued() > self.max_queue:
            state.lagging = True
            return False
        return True

    def fill_range(self, watcher: Watcher, agent_id: str) -> tuple[int, int] | None:
        """The offsets a backfill must read next for ``agent_id``: ``(first, last)``,
        from the watcher's cursor to just before the buffer's oldest offset as it is
        now. None when there is nothing more to backfill: then the watcher is served
        from the buffer, starting in this very step (or it is gone)."""
        state = watcher.watch
        if state is None or agent_id not in state.filling:
            return None
        feed = self.feeds.get(agent_id)
        cursor = state.cursors.get(agent_id)
        if feed is not None and cursor is not None and cursor < feed.ring.oldest_offset:
            return cursor, feed.ring.oldest_offset - 1
        state.filling.discard(agent_id)  # reached the buffer (or the agent was forgotten)
        self.pump(watcher)
        return None

    def fill(self, watcher: Watcher, agent_id: str, first: int, frames: Sequence[bytes]) -> None:
        """Backfilled events of ``agent_id``: ``frames`` are contiguous from offset
        ``first``. What the watcher already has and what the buffer holds are skipped;
        if the events at the watcher's cursor are missing (the host no longer has
        them, or could not be read), exactly once is impossible: it is dropped."""
        state = watcher.watch
        if state is None or agent_id not in state.filling:
            return
        feed = self.feeds.get(agent_id)
        cursor = state.cursors[agent_id]
        if feed is None:
            return  # forgotten: fill_range ends the backfill
        if first > cursor or first + len(frames) <= cursor:  # nothing at the cursor
            self._drop(
                watcher, f"the host no longer has the events of {agent_id} after {cursor - 1}"
            )
            return
        end = min(first + len(frames), feed.ring.oldest_offset)  # the buffer has the rest
        if end > cursor:
            watcher.send(b"".join(frames[cursor - first : end - first]))
            state.cursors[agent_id] = end

    def pump(self, watcher: Watcher) -> None:
        """Serve a lagging watcher from the buffers until it has caught up or its
        transport asks to wait (then it is pumped again when it drains)."""
        state = watcher.watch
        if state is None:
            return
        state.lagging = True
        while True:
            progressed = False
            for agent_id, cursor in list(state.cursors.items()):
                if agent_id in state.filling:
                    continue  # its backfill serves it until it reaches the buffer
                feed = self.feeds.get(agent_id)
                if feed is None:
                    del state.cursors[agent_id]
                    continue
                if cursor < feed.ring.oldest_offset:
                    self._drop(watcher, f"fell behind the buffer of {agent_id}")
                    return
                items = feed.ring.slice(cursor, PUMP_SLICE)
                if items:
                    watcher.send(b"".join(items))
                    state.cursors[agent_id] = cursor + len(items)
                    progressed = True
                if watcher.paused():
                    return
            if not progressed:
                state.lagging = False  # caught up: live events from now on
                return

    def unwatch(self, watcher: Watcher) -> None:
        """Forget a watcher (it asked to stop, or its connection is gone)."""
        self.watchers.discard(watcher)
        watcher.watch = None

    def _drop(self, watcher: Watcher, reason: str) -> None:
        self.dropped += 1
        self.unwatch(watcher)
        watcher.drop(reason)
