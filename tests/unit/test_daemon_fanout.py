"""agenthost.daemon.fanout: the merged stream's buffers, lagging and dropped watchers,
and the backfills of agenthost.daemon.backfill stitched to them. In memory: the watchers
are stand-ins with a settable queue size, the hosts a source of numbered frames."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from agenthost.daemon.backfill import Backfills
from agenthost.daemon.fanout import Held, Hub, WatchState
from agenthost.daemon.protocol import WatchCursor, WatchRequest

from hosttools import wait_until as until


class FakeWatcher:
    """Records what the hub sends; ``backlog`` plays the transport's queued bytes."""

    def __init__(self, backlog: int = 0, paused: bool = False) -> None:
        self.watch: WatchState | None = None
        self.frames: list[dict[str, Any]] = []
        self.backlog = backlog
        self.is_paused = paused
        self.dropped: str | None = None

    def send(self, data: bytes) -> None:
        for line in data.splitlines():
            if line:
                self.frames.append(json.loads(line))

    def queued(self) -> int:
        return self.backlog

    def paused(self) -> bool:
        return self.is_paused

    def drop(self, reason: str) -> None:
        self.dropped = reason

    def offsets(self, agent_id: str = "a") -> list[int]:
        return [
            f["offset"] for f in self.frames if f["kind"] == "event" and f["agent_id"] == agent_id
        ]

    def notices(self) -> list[str]:
        return [f["type"] for f in self.frames if f["kind"] == "notice"]

    def response(self) -> dict[str, Any]:
        payload: dict[str, Any] = next(f for f in self.frames if f["kind"] == "response")["payload"]
        return payload


def frame(agent_id: str, offset: int) -> bytes:
    return json.dumps({"kind": "event", "agent_id": agent_id, "offset": offset}).encode() + b"\n"


def feed(hub: Hub, agent_id: str, first: int, last: int, epoch: str = "e") -> None:
    if agent_id not in hub.feeds:
        hub.attached(agent_id, epoch, first - 1)
    for offset in range(first, last + 1):
        hub.publish(agent_id, offset, frame(agent_id, offset))


def watch(hub: Hub, watcher: FakeWatcher, **request: Any) -> dict[str, Any]:
    hub.watch(watcher, WatchRequest(**request), "w")
    return watcher.response()


def test_live_watchers_get_every_event_once() -> None:
    hub = Hub()
    a, b = FakeWatcher(), FakeWatcher()
    watch(hub, a)
    watch(hub, b, agents=["x"])
    feed(hub, "a", 1, 5)
    feed(hub, "x", 1, 2)
    assert a.offsets("a") == [1, 2, 3, 4, 5] and a.offsets("x") == [1, 2]
    assert b.offsets("a") == [] and b.offsets("x") == [1, 2]
    assert a.notices() == ["host_attached", "host_attached"] and b.notices() == ["host_attached"]


def test_replay_since_and_truncation() -> None:
    hub = Hub(buffer_events=10)
    feed(hub, "a", 1, 25)  # the buffer keeps 16..25
    fresh = FakeWatcher()
    start = watch(hub, fresh)["agents"]["a"]
    assert start == {
        "epoch": "e",
        "stream_offset": 25,
        "oldest_offset": 16,
        "from_offset": 15,
        "truncated": True,
    }
    assert fresh.offsets() == list(range(16, 26))
    resumed = FakeWatcher()
    start = watch(hub, resumed, since={"a": WatchCursor(epoch="e", offset=20)})["agents"]["a"]
    assert start["from_offset"] == 20 and start["truncated"] is False
    assert resumed.offsets() == [21, 22, 23, 24, 25]
    other = FakeWatcher()
    watch(hub, other, since={"a": WatchCursor(epoch="old", offset=20)})
    assert other.offsets() == list(range(16, 26))  # another epoch: from the oldest kept
    live = FakeWatcher()
    assert watch(hub, live, live_only=True)["agents"]["a"]["from_offset"] == 25
    feed(hub, "a", 26, 26)
    assert live.offsets() == [26] and resumed.offsets()[-1] == 26


def test_a_slow_watcher_lags_then_catches_up_from_the_buffer() -> None:
    hub = Hub(buffer_events=100, max_queue=1000)
    slow = FakeWatcher()
    watch(hub, slow)
    feed(hub, "a", 1, 3)
    slow.backlog = 5000  # its transport fills up: it lags, the hub stops writing to it
    feed(hub, "a", 4, 4)
    assert slow.watch is not None and slow.watch.lagging
    feed(hub, "a", 5, 50)
    assert slow.offsets() == [1, 2, 3, 4]
    slow.backlog = 0  # it drained: the connection calls pump
    hub.pump(slow)
    assert slow.offsets() == list(range(1, 51)) and not slow.watch.lagging
    feed(hub, "a", 51, 51)
    assert slow.offsets()[-1] == 51 and slow.dropped is None


def test_a_paused_replay_resumes_where_it_stopped() -> None:
    hub = Hub(buffer_events=2000)
    feed(hub, "a", 1, 1000)
    watcher = FakeWatcher(paused=True)
    watch(hub, watcher)
    assert watcher.offsets() == list(range(1, 257))  # one slice, then it waits
    feed(hub, "a", 1001, 1001)  # a lagging watcher gets live events through the buffer
    watcher.is_paused = False
    hub.pump(watcher)
    assert watcher.offsets() == list(range(1, 1002))


def test_a_watcher_that_falls_out_of_the_buffer_is_dropped() -> None:
    hub = Hub(buffer_events=10, max_queue=100)
    slow, fast = FakeWatcher(), FakeWatcher()
    watch(hub, slow)
    watch(hub, fast)
    feed(hub, "a", 1, 2)
    slow.backlog = 1000
    feed(hub, "a", 3, 30)
    assert slow.dropped is not None and "fell behind" in slow.dropped
    assert slow not in hub.watchers and hub.dropped == 1
    assert fast.offsets() == list(range(1, 31)) and fast.dropped is None


def test_gaps_and_new_epochs() -> None:
    hub = Hub()
    watcher = FakeWatcher()
    watch(hub, watcher)
    feed(hub, "a", 1, 3)
    hub.publish("a", 7, frame("a", 7))  # the daemon missed 4..6
    gap = [f for f in watcher.frames if f.get("type") == "gap"]
    assert gap and gap[0]["after"] == 3 and gap[0]["before"] == 7
    assert watcher.offsets() == [1, 2, 3, 7]
    hub.attached("a", "e2", 0)  # a new stream
    hub.publish("a", 1, frame("a", 1))
    assert watcher.offsets()[-1] == 1 and hub.feeds["a"].epoch == "e2"
    assert watcher.dropped is None


def test_a_watcher_ahead_of_a_restarted_daemon_gets_no_duplicate() -> None:
    hub = Hub()
    hub.attached("a", "e", 40)  # a restarted daemon: the recorded position trails
    watcher = FakeWatcher()
    start = watch(hub, watcher, since={"a": WatchCursor(epoch="e", offset=50)})["agents"]["a"]
    assert start["from_offset"] == 50 and start["truncated"] is False
    feed(hub, "a", 41, 55)  # the follower catches up: 41..50 again, then new ones
    assert watcher.offsets() == [51, 52, 53, 54, 55]
    lagging = FakeWatcher(backlog=10**9)  # the same through the buffer
    watch(hub, lagging, since={"a": WatchCursor(epoch="e", offset=53)})
    feed(hub, "a", 56, 57)
    lagging.backlog = 0
    hub.pump(lagging)
    assert lagging.offsets() == [54, 55, 56, 57]


def test_a_position_for_an_agent_not_attached_yet_is_kept_until_it_is() -> None:
    # a host unreachable when the restarted daemon answered the watch attaches later,
    # from the daemon's recorded position (186), behind the watcher's (190)
    hub = Hub()
    watcher = FakeWatcher()
    start = watch(hub, watcher, since={"a": WatchCursor(epoch="e", offset=190)})
    assert start["agents"] == {}
    feed(hub, "a", 187, 195)
    assert watcher.offsets() == [191, 192, 193, 194, 195]
    assert watcher.notices() == ["host_attached"]


def test_an_awaited_stream_that_starts_later_says_gap() -> None:
    hub = Hub()
    watcher = FakeWatcher()
    watch(hub, watcher, since={"a": WatchCursor(epoch="e", offset=10), "b": WatchCursor(epoch="x")})
    feed(hub, "a", 21, 22)  # the daemon has nothing of 11..20
    gap = [f for f in watcher.frames if f.get("type") == "gap"]
    assert [(g["after"], g["before"]) for g in gap] == [(10, 21)]
    assert watcher.offsets() == [21, 22]
    feed(hub, "b", 1, 2, epoch="other")  # another epoch: the whole stream is new to it
    assert watcher.offsets("b") == [1, 2] and watcher.dropped is None


class FakeHost:
    """A host's side of one agent's stream for a backfill: it holds ``first``..``last``
    and serves slices of ``size`` events. ``during_read`` runs at every read, while the
    slice is "on its way" (the agent printing meanwhile, say); ``gate``, when set, holds
    every read until it is opened."""

    def __init__(self, agent_id: str, first: int, last: int, size: int = 7) -> None:
        self.agent_id = agent_id
        self.first = first
        self.last = last
        self.size = size
        self.reads: list[tuple[int, int]] = []
        self.during_read: Callable[[], None] | None = None
        self.gate: asyncio.Event | None = None

    async def read(self, first: int, last: int) -> tuple[int, list[bytes]]:
        self.reads.append((first, last))
        if self.gate is not None:
            await self.gate.wait()
        if self.during_read is not None:
            self.during_read()
        start = max(first, self.first)
        stop = min(last, self.last, start + self.size - 1)
        return start, [frame(self.agent_id, o) for o in range(start, stop + 1)]


def restarted(hub: Hub, agent_id: str, recorded: int, last: int) -> None:
    """A restarted daemon's buffer: it starts after the recorded offset."""
    hub.attached(agent_id, "e", recorded)
    feed(hub, agent_id, recorded + 1, last)


def since(**offsets: int) -> WatchRequest:
    return WatchRequest(since={a: WatchCursor(epoch="e", offset=o) for a, o in offsets.items()})


async def settle(backfills: Backfills, watcher: FakeWatcher) -> None:
    """Wait until every backfill of ``watcher`` has ended."""
    tasks = backfills.tasks(watcher)
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks), 5)


def test_backfill_stitches_to_the_buffer_whatever_it_evicted_meanwhile() -> None:
    # the buffer keeps 10 events; the agent prints 25 while each slice is read, so by
    # the time a slice arrives the buffer has moved far past where the backfill began
    async def run() -> FakeWatcher:
        hub = Hub(buffer_events=10)
        restarted(hub, "a", 40, 45)
        request = since(a=30)
        assert hub.backfill_needs(request) == {"a": ("e", 30, 40)}
        host = FakeHost("a", 1, 10_000)
        printed = iter(range(46, 10_000))

        def agent_prints() -> None:
            if len(host.reads) <= 4:
                for _ in range(25):
                    offset = next(printed)
                    hub.publish("a", offset, frame("a", offset))

        host.during_read = agent_prints
        watcher = FakeWatcher()
        assert hub.watch(watcher, request, "w", {"a": Held("e", 1)}) == ["a"]
        start = watcher.response()["agents"]["a"]
        assert start["from_offset"] == 30 and start["truncated"] is False
        assert watcher.offsets() == []  # live events wait for the backfill
        backfills = Backfills(hub)
        backfills.start(watcher, {"a": host})
        await settle(backfills, watcher)
        assert watcher.watch is not None and not watcher.watch.filling
        feed(hub, "a", 146, 147)  # live again
        return watcher

    watcher = asyncio.run(run())
    assert watcher.offsets() == list(range(31, 148))  # each offset once, in order
    assert watcher.dropped is None


def test_the_response_says_what_the_host_no_longer_has() -> None:
    hub = Hub()
    restarted(hub, "a", 40, 45)
    partial = FakeWatcher()
    assert hub.watch(partial, since(a=30), "w", {"a": Held("e", 35)}) == ["a"]
    start = partial.response()["agents"]["a"]
    assert start["from_offset"] == 34 and start["truncated"] is True
    assert partial.watch is not None and partial.watch.cursors["a"] == 35
    for held in (None, {"a": Held("other", 1)}, {"a": Held("e", 41)}):
        # nothing from the host (gone, another stream, nothing older): the buffer only
        watcher = FakeWatcher()
        assert hub.watch(watcher, since(a=30), "w", held) == []
        start = watcher.response()["agents"]["a"]
        assert start["from_offset"] == 40 and start["truncated"] is True
        assert watcher.offsets() == [41, 42, 43, 44, 45]


def test_a_host_that_lost_what_it_promised_drops_the_watcher() -> None:
    hub = Hub()
    restarted(hub, "a", 40, 45)
    watcher = FakeWatcher()
    hub.watch(watcher, since(a=30), "w", {"a": Held("e", 1)})
    assert hub.fill_range(watcher, "a") == (31, 40)
    hub.fill(watcher, "a", 31, [frame("a", o) for o in range(31, 36)])
    assert hub.fill_range(watcher, "a") == (36, 40)
    hub.fill(watcher, "a", 38, [frame("a", 38)])  # 36 and 37 were pruned meanwhile
    assert watcher.dropped is not None and "no longer has" in watcher.dropped
    assert watcher.offsets() == [31, 32, 33, 34, 35] and watcher not in hub.watchers


def test_backfills_of_several_agents_go_independently() -> None:
    async def run() -> None:
        hub = Hub()
        restarted(hub, "a", 40, 42)
        restarted(hub, "b", 20, 22)
        slow, quick = FakeHost("a", 1, 100), FakeHost("b", 1, 100)
        slow.gate = asyncio.Event()  # a host that does not answer yet
        watcher = FakeWatcher()
        filling = hub.watch(watcher, since(a=0, b=0), "w", {"a": Held("e", 1), "b": Held("e", 1)})
        assert filling == ["a", "b"]
        backfills = Backfills(hub)
        backfills.start(watcher, {"a": slow, "b": quick})
        b_task = next(t for t in backfills.tasks(watcher) if t.get_name() == "backfill b")
        await asyncio.wait_for(b_task, 5)
        feed(hub, "b", 23, 24)
        assert watcher.offsets("b") == list(range(1, 25))  # b is live; a still waits
        assert watcher.offsets("a") == [] and slow.reads == [(1, 40)]
        feed(hub, "a", 43, 43)
        slow.gate.set()
        await settle(backfills, watcher)
        assert watcher.offsets("a") == list(range(1, 44))

    asyncio.run(run())


def test_back_pressure_and_a_watcher_gone_mid_backfill() -> None:
    async def run() -> None:
        hub = Hub(max_queue=1000)
        restarted(hub, "a", 1000, 1001)
        host = FakeHost("a", 1, 2000, size=100)
        watcher = FakeWatcher()
        hub.watch(watcher, since(a=0), "w", {"a": Held("e", 1)})
        backfills = Backfills(hub)

        def stall() -> None:  # its transport fills up during the second slice
            if len(host.reads) == 2:
                watcher.is_paused = True
                watcher.backlog = 5000

        host.during_read = stall
        backfills.start(watcher, {"a": host})
        (task,) = backfills.tasks(watcher)
        # fill_ready said no: the watcher lags (so that its drain resumes it) ...
        await until(lambda: watcher.watch is not None and watcher.watch.lagging, "a stall")
        # ... and the backfill waits for that drain: no slice read meanwhile
        assert len(host.reads) == 2 and not task.done()
        assert watcher.offsets() == list(range(1, 201))
        watcher.is_paused, watcher.backlog = False, 0
        host.during_read = None
        host.gate = asyncio.Event()  # the next read hangs ...
        hub.pump(watcher)
        backfills.drained(watcher)  # what the daemon does when the transport drains
        await until(lambda: len(host.reads) == 3, "the next slice")
        hub.unwatch(watcher)  # ... and the watcher goes away meanwhile
        backfills.cancel(watcher)
        await asyncio.wait([task], timeout=5)
        assert task.cancelled() and backfills.tasks(watcher) == []
        host.gate.set()
        assert watcher.offsets() == list(range(1, 201))  # nothing after it left

    asyncio.run(run())
