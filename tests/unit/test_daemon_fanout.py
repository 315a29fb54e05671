"""agenthost.daemon.fanout: the merged stream's buffers, lagging and dropped watchers.
Pure: the watchers are in-memory stand-ins with a settable queue size."""

from __future__ import annotations

import json
from typing import Any

from agenthost.daemon.fanout import Backfill, Hub, WatchState
from agenthost.daemon.protocol import WatchCursor, WatchRequest


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


def test_backfill_fills_what_the_buffer_lacks() -> None:
    hub = Hub()
    hub.attached("a", "e", 40)  # a restarted daemon: its buffer starts after 40
    feed(hub, "a", 41, 45)
    request = WatchRequest(since={"a": WatchCursor(epoch="e", offset=30)})
    assert hub.backfill_needs(request) == {"a": ("e", 30, 40)}
    assert hub.backfill_needs(WatchRequest(since={"a": WatchCursor(epoch="x", offset=30)})) == {}
    fill = Backfill(31, [(o, frame("a", o)) for o in range(31, 41)])
    watcher = FakeWatcher()
    hub.watch(watcher, request, "w", {"a": fill})
    start = watcher.response()["agents"]["a"]
    assert start["from_offset"] == 30 and start["truncated"] is False
    assert watcher.offsets() == list(range(31, 46))
    # the host no longer had all of them either: said so
    partial = FakeWatcher()
    hub.watch(
        partial, request, "w", {"a": Backfill(35, [(o, frame("a", o)) for o in range(35, 41)])}
    )
    assert partial.response()["agents"]["a"]["truncated"] is True
    assert partial.offsets() == list(range(35, 46))
    # nothing could be read: the buffer only, truncated
    empty = FakeWatcher()
    hub.watch(empty, request, "w", {"a": Backfill(41, [])})
    assert empty.response()["agents"]["a"]["truncated"] is True
    assert empty.offsets() == list(range(41, 46))
