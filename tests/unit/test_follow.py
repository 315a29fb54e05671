"""agenthost.follow in memory: the cursor's decisions, and the follow driven over a
scripted client (no socket, no host process)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agenthost.errors import AgentHostError, HostNotFound, NotConnected, VersionUnsupported
from agenthost.follow import (
    Attached,
    Backoff,
    Cursor,
    Follow,
    Gap,
    Lost,
    Position,
    SyncFollow,
    retry_for,
)
from agenthost.models import Screen, TerminalSize
from agenthost.protocol import AttachResponse, EventEncoder, StatusResponse, StreamEvent

NOW = "2025-01-02T03:04:05.678Z"
ENCODER = EventEncoder("a1")


def frame(offset: int) -> bytes:
    """An event as a host sends it (without the newline)."""
    return ENCODER.output(offset, NOW, f"line {offset}", "stdout").rstrip(b"\n")


def response(epoch: str, head: int, oldest: int = 1, truncated: bool = False) -> AttachResponse:
    return AttachResponse(
        agent_id="a1", stream_offset=head, oldest_offset=oldest, truncated=truncated, epoch=epoch
    )


def status(protocol: str = "1.1") -> StatusResponse:
    return StatusResponse.model_validate(
        {
            "host": {
                "pid": 1,
                "version": "0",
                "protocol_version": protocol,
                "started_at": NOW,
                "socket_path": "/x",
            },
            "agent": {"id": "a1", "state": "running", "started_at": NOW},
        }
    )


# --- the cursor ------------------------------------------------------------------------


def event(offset: int) -> StreamEvent:
    return StreamEvent.model_validate_json(frame(offset))


def test_from_the_oldest_a_truncated_attach_is_no_gap() -> None:
    cursor = Cursor(None)
    new_epoch, gap = cursor.attached(response("e1", 20, oldest=11, truncated=True), 0)
    assert new_epoch and gap is None
    assert cursor.position == Position("e1", 10)  # the first event to come is 11


def test_after_a_position_evicted_events_are_a_gap() -> None:
    cursor = Cursor(("e1", 5))
    new_epoch, gap = cursor.attached(response("e1", 20, oldest=9, truncated=True), 5)
    assert not new_epoch
    assert gap == Gap("e1", 5, 9, "evicted") and str(gap) == (
        "events 6-8 evicted before they could be read"
    )
    assert cursor.position == ("e1", 8)


def test_an_offset_without_epoch_is_owed_too() -> None:
    cursor = Cursor(("", 5))
    _, gap = cursor.attached(response("e1", 20, oldest=7, truncated=True), 5)
    assert gap == Gap("e1", 5, 7, "evicted") and str(gap).startswith("event 6 ")


def test_a_position_at_zero_is_owed_too() -> None:
    # "after 0" is a position (nothing read yet, all owed): what was evicted is a gap;
    # only no position at all (Cursor(None)) is "from the oldest kept", silently
    for cursor in (Cursor(("", 0)), Cursor(("e1", 0))):
        _, gap = cursor.attached(response("e1", 1100, oldest=101, truncated=True), 0)
        assert gap == Gap("e1", 0, 101, "evicted") and str(gap) == (
            "events 1-100 evicted before they could be read"
        )
        assert cursor.position == ("e1", 100)


def test_another_epoch_is_followed_from_its_start() -> None:
    cursor = Cursor(("e1", 5))
    assert cursor.other_stream(response("e2", 3), 5)  # attach again, from 0
    assert not cursor.other_stream(response("e1", 3), 5)
    assert not Cursor(None).other_stream(response("e2", 3), 0)  # nothing known
    new_epoch, gap = cursor.attached(response("e2", 3), 0)
    assert new_epoch and gap == Gap("e2", 0, 1, "new_epoch")
    assert cursor.position == ("e2", 0)


def test_beyond_the_head_is_live_from_the_next_event() -> None:
    cursor = Cursor(("e1", 50))
    _, gap = cursor.attached(response("e1", 30, oldest=1), 50)
    assert gap is None and cursor.position == ("e1", 30)
    assert cursor.event(event(31)) == (True, None)


def test_events_are_deduplicated_and_jumps_reported() -> None:
    cursor = Cursor(("e1", 5))
    cursor.attached(response("e1", 5), 5)
    assert cursor.event(event(4)) == (False, None)
    assert cursor.event(event(5)) == (False, None)
    assert cursor.event(event(6)) == (True, None)
    assert cursor.event(event(9)) == (True, Gap("e1", 6, 9, "evicted"))
    assert cursor.position == ("e1", 9)


def test_a_negative_offset_is_refused() -> None:
    with pytest.raises(ValueError):
        Cursor(("e1", -1))


def test_backoff() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.pause(n) for n in range(5)] == [0.0, 0.1, 0.2, 0.4, 0.5]


# --- the follow over a scripted client --------------------------------------------------


@dataclass
class Conn:
    """What one connection does: fail to connect, or attach and send ``events``
    (whatever offset was asked: a scripted host), then end."""

    epoch: str = "e1"
    head: int = 0
    events: list[int] = field(default_factory=list)
    oldest: int = 1
    truncated: bool = False
    connect_error: AgentHostError | None = None
    protocol: str = "1.1"
    screen_at: int | None = None
    """A terminal agent's host: a snapshot attach answers its screen as of this offset."""


class ScriptedClient:
    """A FollowClient whose connections follow a script."""

    socket_path = Path("/nonexistent/hosts/a1.sock")

    def __init__(self, *script: Conn) -> None:
        self.script = list(script)
        self.conn: Conn | None = None
        self.attached_at: list[int] = []
        self.connects = 0
        self._queue: list[int] = []

    async def connect(self) -> None:
        if self.conn is not None:
            return
        if not self.script:
            raise HostNotFound("script over")
        conn = self.script.pop(0)
        self.connects += 1
        if conn.connect_error is not None:
            raise conn.connect_error
        self.conn = conn

    async def close(self) -> None:
        self.conn = None
        self._queue = []

    async def status(self) -> StatusResponse:
        assert self.conn is not None
        answer = status(self.conn.protocol)
        if self.conn.screen_at is not None:
            agent = answer.agent.model_copy(update={"terminal": TerminalSize(cols=80, rows=24)})
            answer = answer.model_copy(update={"agent": agent})
        return answer

    async def _attach(self, offset: int, snapshot: bool) -> Any:
        assert self.conn is not None
        c = self.conn
        self.attached_at.append(-1 if snapshot else offset)
        self._queue = list(c.events)
        resp = response(c.epoch, c.head, c.oldest, c.truncated)
        if snapshot:
            assert c.screen_at is not None, "a snapshot of an agent that has no terminal"
            resp = resp.model_copy(update={"screen": self._screen(c.screen_at)})
        return type("Sub", (), {"response": resp})()

    @staticmethod
    def _screen(offset: int) -> Screen:
        return Screen.model_validate(
            {
                "offset": offset,
                "cols": 80,
                "rows": 24,
                "cursor": {"col": 0, "row": 0},
                "lines": [],
                "dump": "",
            }
        )

    def attach(self, offset: int = 0, *, snapshot: bool = False) -> Any:
        return self._attach(offset, snapshot)

    async def recv_frame(self, timeout: float | None = None) -> tuple[StreamEvent, bytes]:
        if self.conn is None or not self._queue:
            raise NotConnected("the host closed the connection")
        data = frame(self._queue.pop(0))
        return StreamEvent.model_validate_json(data), data


def forever(lost: Lost) -> bool:
    return True


NO_PAUSE = Backoff(0.0, 0.0)


async def collect(follow: Follow) -> list[StreamEvent | Gap]:
    return [item async for item in follow]


def offsets(items: list[StreamEvent | Gap]) -> list[int]:
    return [i.offset for i in items if isinstance(i, StreamEvent)]


@pytest.mark.asyncio
async def test_resumes_after_the_last_offset_without_duplicates() -> None:
    client = ScriptedClient(
        Conn(head=5, events=[1, 2, 3, 4, 5]),
        Conn(head=8, events=[3, 4, 5, 6, 7, 8]),  # a replay overlapping what we had
    )
    losses: list[Lost] = []

    def policy(lost: Lost) -> bool:
        losses.append(lost)
        return len(losses) < 3

    follow = Follow(client, keep_trying=policy, backoff=NO_PAUSE)
    frames: list[bytes] = []
    items: list[StreamEvent | Gap] = []
    async for item in follow:
        items.append(item)
        frames.append(follow.frame)
    assert offsets(items) == [1, 2, 3, 4, 5, 6, 7, 8] and len(items) == 8
    assert frames == [frame(n) for n in range(1, 9)]  # the host's bytes, untouched
    assert client.attached_at == [0, 5]
    assert follow.position == ("e1", 8) and follow.attaches == 2
    # delivered, delivered, then no host: failures count only attempts without events
    assert [(type(x.error), x.failures, x.attaches) for x in losses] == [
        (NotConnected, 0, 1),
        (NotConnected, 0, 2),
        (HostNotFound, 1, 2),
    ]


@pytest.mark.asyncio
async def test_a_new_epoch_is_reported_and_followed_from_its_start() -> None:
    client = ScriptedClient(
        Conn(epoch="e2", head=3, events=[3]),  # the attach after 5 reaches another stream
        Conn(epoch="e2", head=3, events=[1, 2, 3]),
    )
    seen: list[Attached] = []
    follow = Follow(
        client,
        ("e1", 5),
        keep_trying=lambda lost: False,
        on_attached=seen.append,
        backoff=NO_PAUSE,
    )
    items = await collect(follow)
    assert items[0] == Gap("e2", 0, 1, "new_epoch")
    assert offsets(items) == [1, 2, 3]
    assert client.attached_at == [5, 0] and client.connects == 2  # a fresh connection
    assert [(a.from_offset, a.new_epoch) for a in seen] == [(0, True)]


@pytest.mark.asyncio
async def test_evicted_events_are_reported_where_they_were() -> None:
    client = ScriptedClient(
        Conn(head=3, events=[1, 2, 3]),
        Conn(head=20, oldest=10, truncated=True, events=[10, 11, 15]),
    )
    follow = Follow(client, keep_trying=lambda lost: lost.attaches < 2, backoff=NO_PAUSE)
    items = await collect(follow)
    assert items == [
        event(1),
        event(2),
        event(3),
        Gap("e1", 3, 10, "evicted"),
        event(10),
        event(11),
        Gap("e1", 11, 15, "evicted"),  # dropped while reading (the client re-attached)
        event(15),
    ]


@pytest.mark.asyncio
async def test_the_policy_sees_each_failure_and_ends_the_follow() -> None:
    client = ScriptedClient(*(Conn(connect_error=HostNotFound("nobody")) for _ in range(5)))
    seen: list[int] = []

    def policy(lost: Lost) -> bool:
        seen.append(lost.failures)
        return lost.failures < 3

    assert await collect(Follow(client, keep_trying=policy, backoff=NO_PAUSE)) == []
    assert seen == [1, 2, 3] and client.connects == 3


@pytest.mark.asyncio
async def test_giving_up_without_ever_attaching_raises_the_error() -> None:
    client = ScriptedClient(Conn(connect_error=HostNotFound("nobody answers")))
    with pytest.raises(HostNotFound, match="nobody answers"):
        await collect(Follow(client, keep_trying=retry_for(0.0), backoff=NO_PAUSE))
    client = ScriptedClient(Conn(connect_error=HostNotFound("no host")))  # the default
    with pytest.raises(HostNotFound, match="no host"):
        await collect(Follow(client, backoff=NO_PAUSE))


@pytest.mark.asyncio
async def test_retry_for_keeps_trying_within_its_time() -> None:
    client = ScriptedClient(
        Conn(connect_error=HostNotFound("restarting")),
        Conn(head=2, events=[1, 2]),
    )
    follow = Follow(client, keep_trying=retry_for(30.0), backoff=NO_PAUSE)
    items = []
    async for item in follow:
        items.append(item)
        if isinstance(item, StreamEvent) and item.offset == 2:
            break
    assert offsets(items) == [1, 2]


@pytest.mark.asyncio
async def test_stop_from_the_attached_hook_ends_before_any_event() -> None:
    client = ScriptedClient(Conn(head=3, events=[1, 2, 3]))

    def stop(attached: Attached) -> None:
        follow.stop()

    follow = Follow(client, keep_trying=forever, on_attached=stop, backoff=NO_PAUSE)
    assert await collect(follow) == []


@pytest.mark.asyncio
async def test_an_async_start_hook_gives_the_first_offset_only() -> None:
    client = ScriptedClient(Conn(head=10, events=[8, 9, 10]), Conn(head=10, events=[]))

    async def start(c: Any) -> int:
        return 7

    follow = Follow(client, start=start, keep_trying=lambda lost: lost.failures == 0)
    assert offsets(await collect(follow)) == [8, 9, 10]
    assert client.attached_at == [7, 10]


@pytest.mark.asyncio
async def test_a_host_of_another_major_version_raises() -> None:
    client = ScriptedClient(Conn(protocol="2.0"))
    with pytest.raises(VersionUnsupported):
        await collect(Follow(client, keep_trying=forever))
    client = ScriptedClient(Conn(protocol="garbage"))
    with pytest.raises(VersionUnsupported):
        await collect(Follow(client, keep_trying=forever))


def test_the_blocking_twin() -> None:
    client = ScriptedClient(Conn(head=2, events=[1, 2]))
    with asyncio.Runner() as runner:
        follow = SyncFollow(Follow(client, keep_trying=lambda lost: False), runner.run)
        assert offsets(list(follow)) == [1, 2]
        assert follow.position == ("e1", 2) and follow.frame == frame(2)
        assert follow.attaches == 1


# --- from a terminal agent's screen -------------------------------------------------------


@pytest.mark.asyncio
async def test_a_terminal_agent_starts_from_its_screen_then_resumes_by_offset() -> None:
    client = ScriptedClient(
        Conn(head=7, screen_at=7, events=[8, 9]),  # the host sends what follows the screen
        Conn(head=10, screen_at=10, events=[8, 9, 10]),  # the same stream: by offset
    )
    seen: list[Attached] = []
    follow = Follow(
        client, snapshot=True, keep_trying=lambda lost: len(seen) < 2, on_attached=seen.append
    )
    follow.backoff = NO_PAUSE
    items = await collect(follow)
    assert offsets(items) == [8, 9, 10] and not [i for i in items if isinstance(i, Gap)]
    assert client.attached_at == [-1, 9]  # a snapshot, then after the last offset
    assert seen[0].response.screen is not None and seen[0].from_offset == 7
    assert seen[1].response.screen is None


@pytest.mark.asyncio
async def test_a_new_stream_of_a_terminal_agent_is_painted_from_its_screen() -> None:
    client = ScriptedClient(
        Conn(head=4, screen_at=4, events=[5]),
        Conn(epoch="e2", head=30, screen_at=30, events=[29, 30]),  # after 5: another stream
        Conn(epoch="e2", head=31, screen_at=31, events=[32]),  # its screen, then what follows
    )
    seen: list[Attached] = []
    follow = Follow(
        client,
        snapshot=True,
        keep_trying=lambda lost: client.script != [],
        on_attached=seen.append,
        backoff=NO_PAUSE,
    )
    items = await collect(follow)
    assert client.attached_at == [-1, 5, -1]
    assert [i for i in items if isinstance(i, Gap)] == [Gap("e2", 0, 32, "new_epoch")]
    assert offsets(items) == [5, 32]
    assert seen[-1].new_epoch and seen[-1].from_offset == 31


@pytest.mark.asyncio
async def test_snapshot_asked_of_an_agent_without_a_terminal_is_an_ordinary_follow() -> None:
    client = ScriptedClient(Conn(head=2, events=[1, 2]))
    follow = Follow(client, snapshot=True, keep_trying=lambda lost: False, backoff=NO_PAUSE)
    assert offsets(await collect(follow)) == [1, 2]
    assert client.attached_at == [0]


@pytest.mark.asyncio
async def test_snapshot_with_a_position_resumes_by_offset() -> None:
    client = ScriptedClient(Conn(head=9, screen_at=9, events=[8, 9]))
    follow = Follow(
        client, ("e1", 7), snapshot=True, keep_trying=lambda lost: False, backoff=NO_PAUSE
    )
    assert offsets(await collect(follow)) == [8, 9]
    assert client.attached_at == [7]
