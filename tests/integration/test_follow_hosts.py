"""agenthost.follow against real hosts: what only processes can show (a host that
exits and another that continues its stream, or starts a new one; a ring that evicts
what a slow follower had not read yet)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from agenthost.client import AsyncClient
from agenthost.follow import Follow, Gap, retry_for
from agenthost.protocol import StreamEvent
from agenthost.wire.client import StreamLimit

from conftest import HostFactory
from daemontools import flood_command
from hosttools import DEADLINE, ECHO, HostProc, wait_for

Item = StreamEvent | Gap


async def until(follow: Follow, items: list[Item], done: Callable[[Item], bool]) -> None:
    """Append what ``follow`` yields to ``items`` until an item is ``done``."""
    while True:
        item = await asyncio.wait_for(anext(follow), DEADLINE)
        items.append(item)
        if done(item):
            return


def output(data: str) -> Callable[[Item], bool]:
    return lambda i: isinstance(i, StreamEvent) and i.type == "output" and i.data == data


def offsets(items: list[Item]) -> list[int]:
    return [i.offset for i in items if isinstance(i, StreamEvent)]


def say(host: HostProc, text: str) -> None:
    with host.raw() as conn:
        assert conn.request("host.send", {"input": text})["success"]


def end_run(host: HostProc) -> None:
    """The agent exits; with --linger 0 its host exits too."""
    say(host, "exit")
    host.wait_exit()


@pytest.mark.asyncio
async def test_a_restarted_host_of_the_same_stream_resumes_without_duplicate_or_gap(
    host_factory: HostFactory, home: Path
) -> None:
    first = host_factory("f1", "--agent", "lines", "--linger", "0", command=ECHO)
    client = AsyncClient("f1", home=home)
    follow = Follow(client, keep_trying=retry_for(DEADLINE))
    items: list[Item] = []
    try:
        say(first, "one")
        await until(follow, items, output("echo one"))
        epoch = follow.position.epoch
        end_run(first)
        second = host_factory("f1", "--agent", "lines", command=ECHO)  # the journal's stream
        say(second, "two")
        await until(follow, items, output("echo two"))
    finally:
        await follow.aclose()
        await client.close()
    assert not [i for i in items if isinstance(i, Gap)]
    seen = offsets(items)
    assert seen == list(range(1, len(seen) + 1))  # each offset once, none missing
    assert follow.position == (epoch, seen[-1]) and follow.attaches == 2


@pytest.mark.asyncio
async def test_a_host_with_a_new_stream_is_reported_and_followed_from_its_start(
    host_factory: HostFactory, home: Path
) -> None:
    args = ("--agent", "lines", "--no-journal")
    first = host_factory("f2", *args, "--linger", "0", command=ECHO)
    client = AsyncClient("f2", home=home)
    follow = Follow(client, keep_trying=retry_for(DEADLINE))
    items: list[Item] = []
    try:
        say(first, "one")
        await until(follow, items, output("echo one"))
        old = follow.position
        end_run(first)
        second = host_factory("f2", *args, command=ECHO)  # no journal: a new stream
        say(second, "two")
        await until(follow, items, output("echo two"))
    finally:
        await follow.aclose()
        await client.close()
    gaps = [i for i in items if isinstance(i, Gap)]
    assert len(gaps) == 1 and gaps[0].reason == "new_epoch" and gaps[0].epoch != old.epoch
    after = items[items.index(gaps[0]) + 1 :]
    assert offsets(after) == list(range(1, len(after) + 1))  # the new stream from its start
    assert follow.position.epoch == gaps[0].epoch


@pytest.mark.asyncio
async def test_a_follower_behind_a_small_ring_reports_the_gap_honestly(
    host_factory: HostFactory, home: Path
) -> None:
    total = 3000
    host = host_factory(
        "f3",
        "--agent",
        "lines",
        "--no-journal",
        "--ring-size",
        "100",
        command=flood_command("--wait", "--count", str(total), "--rate", "0"),
    )
    # a reader that keeps little: what it does not read in time, the ring evicts
    client = AsyncClient("f3", home=home, stream_limit=StreamLimit(items=20))
    follow = Follow(client, keep_trying=lambda lost: False)
    items: list[Item] = []
    try:
        await until(follow, items, lambda i: isinstance(i, StreamEvent))  # attached
        # only now the flood (a fresh follow is owed nothing from before its attach)
        with host.raw() as conn:
            assert conn.request("host.send", {"input": "go"})["success"]
        # the agent prints everything meanwhile: nobody reads it
        await asyncio.to_thread(wait_printed, host, total)
        await until(follow, items, output(f"line {total}"))
    finally:
        await follow.aclose()
        await client.close()
    # every offset is yielded once, in order, or inside a gap that says so
    covered: list[int] = []
    for item in items:
        if isinstance(item, Gap):
            assert item.reason == "evicted" and item.before > item.after + 1
            covered += range(item.after + 1, item.before)
        else:
            covered.append(item.offset)
    assert covered == list(range(1, len(covered) + 1))
    assert any(isinstance(i, Gap) for i in items)


def wait_printed(host: HostProc, total: int) -> None:
    """Wait until the host has given the agent's ``total`` lines their offsets."""

    def head() -> int:
        with host.raw() as conn:
            payload = conn.request("host.history", {"limit": 1})["payload"]
        return int(payload["offset"])

    wait_for(lambda: head() >= total, what=f"{total} lines printed")
