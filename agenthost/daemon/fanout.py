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
Those are *backfilled*: the daemon reads them from the host (its ring, or its journal)
before it answers (:meth:`Hub.backfill_needs`), and they are sent ahead of the buffer.
"""

from __future__ import annotations

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
class Backfill:
    """Events read from a host for one watcher: ``frames`` are ``(offset, bytes)``
    pairs, contiguous from ``first_offset`` (later than asked when the host no longer
    had the first ones)."""

    first_offset: int
    frames: list[tuple[int, bytes]]


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
            if state is None or not state.wants(agent_id):
                continue
            cursor = state.cursors.setdefault(agent_id, offset)
            if state.lagging:
                if cursor < oldest:
                    self._drop(watcher, f"fell behind the buffer of {agent_id}")
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
            if state is None or agent_id not in state.cursors:
                continue
            behind = old is not None and state.cursors[agent_id] < old.ring.next_offset
            if behind:  # it still needed events of the buffer being replaced
                self._drop(watcher, f"a new stream of {agent_id} replaced what it missed")
            else:
                state.cursors[agent_id] = first_offset
        return feed

    # --- the watchers' side -------------------------------------------------------------

    def backfill_needs(self, request: WatchRequest) -> dict[str, tuple[str, int, int]]:
        """Agents whose watcher position is older than the buffer: agent id ->
        ``(epoch, after, upto)``, the offsets to read from the host (``after`` < o <=
        ``upto``)."""
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
        backfill: dict[str, Backfill] | None = None,
    ) -> None:
        """Answer ``daemon.watch``, register the watcher and start its replay, in one step
        (``backfill``: what was read from hosts for positions older than the buffers)."""
        wanted = frozenset(request.agents) if request.agents is not None else None
        state = WatchState(wanted)
        starts: dict[str, WatchStart] = {}
        early: list[bytes] = []
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
            start = max(after + 1, ring.oldest_offset)
            first = start
            fill = (backfill or {}).get(agent_id)
            if fill is not None and fill.frames and fill.frames[-1][0] + 1 >= ring.oldest_offset:
                # the host had what the buffer lacks, up to where the buffer starts
                early.extend(frame for offset, frame in fill.frames if offset < start)
                first = min(start, fill.first_offset)
            state.cursors[agent_id] = start
            starts[agent_id] = WatchStart(
                epoch=feed.epoch,
                stream_offset=ring.last_offset,
                oldest_offset=ring.oldest_offset,
                from_offset=first - 1,
                truncated=first > after + 1,
            )
        watcher.watch = state
        watcher.send(encode_response("daemon.watch", request_id, WatchResponse(agents=starts)))
        if early:
            watcher.send(b"".join(early))
        self.watchers.add(watcher)
        self.pump(watcher)

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
