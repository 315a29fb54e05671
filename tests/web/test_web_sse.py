"""Server-Sent Events of the gateway against real hosts: ids are offsets; ``after``,
``tail`` and ``Last-Event-ID`` (which wins) resume exactly once and in order;
``truncated`` says what is gone; a stream goes on through a restart of its host; the
overview stream; pings; a stop of the gateway with streams open."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthost.client import AsyncClient
from agenthost.follow import Backoff
from agenthost.web.fanout import Hub, shared_stream
from agenthost.web.payloads import PING, AgentKey
from agenthost.web.sse import Watch

from hosttools import DEADLINE, ECHO, HEAD, HostProc, lines_agent, wait_for, wait_until
from webtools import (
    Gateway,
    HostFactory,
    SseEvent,
    echoed,
    head,
    offsets,
    say,
    sse_events,
    take,
    until,
)


@contextlib.contextmanager
def stream(api: httpx.Client, agent: str, **kw: Any) -> Iterator[Iterator[SseEvent]]:
    """The events of ``GET /api/agents/AGENT/events`` (``kw``: params, headers)."""
    with api.stream("GET", f"/api/agents/{agent}/events", **kw) as response:
        assert response.status_code == 200, response.read()
        yield sse_events(response)


def echoed_head(api: httpx.Client, host: HostProc, agent: str, word: str) -> int:
    """The head of the echo agent's stream once it echoed ``word`` (its last output)."""
    with stream(api, agent, params={"tail": 4}) as events:
        until(events, echoed(word))
    return head(host)


def events_after(api: httpx.Client, agent: str, count: int, **kw: Any) -> list[SseEvent]:
    with stream(api, agent, **kw) as events:
        return take(events, count)


def test_after_tail_and_last_event_id_start_where_they_say(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("e1", "--agent", "lines", command=ECHO)
    api = gateway.client()
    for word in ("a", "b", "c", "d"):
        say(api, "e1", word)
    last = echoed_head(api, host, "e1", "d")
    assert offsets(events_after(api, "e1", 3, params={"after": 2})) == [3, 4, 5]
    assert offsets(events_after(api, "e1", 2, params={"tail": 2})) == [last - 1, last]
    assert offsets(events_after(api, "e1", 2, params={"tail": 10_000})) == [1, 2]
    # Last-Event-ID wins over ?after= and ?tail= (a browser reconnects with both)
    got = events_after(api, "e1", 2, params={"after": 1, "tail": 1}, headers={"Last-Event-ID": "5"})
    assert offsets(got) == [6, 7]
    assert all(e.event == "message" and e.json()["offset"] == int(e.id or 0) for e in got)


def test_reconnecting_with_last_event_id_gives_each_offset_once_in_order(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("e2", "--agent", "lines", command=ECHO)
    api = gateway.client()
    seen: list[int] = []
    last_id: str | None = None
    for round_ in range(4):
        say(api, "e2", f"w{round_}")
        headers = {"Last-Event-ID": last_id} if last_id else {}
        with stream(api, "e2", headers=headers) as events:
            got = until(events, echoed(f"w{round_}"))
            seen += offsets(got)
            last_id = got[-1].id
    assert seen == list(range(1, len(seen) + 1))


def test_truncated_says_which_events_are_gone(gateway: Gateway, host_factory: HostFactory) -> None:
    host = host_factory("e3", "--agent", "lines", "--no-journal", "--ring-size", "4", command=ECHO)
    api = gateway.client()
    for word in ("a", "b", "c", "d", "e"):
        say(api, "e3", word)
    last = echoed_head(api, host, "e3", "e")
    got = events_after(api, "e3", 2, params={"after": 1})
    assert got[0].event == "truncated" and got[0].id is None
    gap = got[0].json()
    assert gap["reason"] == "evicted" and gap["after"] == 1 and gap["before"] == last - 3
    assert isinstance(gap["epoch"], str) and gap["epoch"]
    assert got[1].id == str(last - 3)
    # from the oldest kept (no position): nothing was owed, no notice
    assert offsets(events_after(api, "e3", 1)) == [last - 3]


KEPT = 1000
"""Events a host keeps in its ring by default (``--ring-size``)."""
CHATTY = lines_agent(
    "import sys\nfor n in range(1100):\n    print(f'line {n}', flush=True)\nsys.stdin.read()\n"
)


def test_after_zero_is_a_position_and_reports_what_the_ring_evicted(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("z1", "--agent", "lines", "--no-journal", command=CHATTY)
    api = gateway.client()
    wait_for(lambda: head(host) > KEPT, what="more events than the ring keeps")
    with stream(api, "z1") as events:
        got = until(events, lambda e: e.event == "message" and e.json().get("data") == "line 1099")
    # no position given (from the oldest kept): nothing was owed, no notice
    assert got[0].event == "message" and int(got[0].id or 0) > 1
    for ask in ({"params": {"after": 0}}, {"headers": {"Last-Event-ID": "0"}}):
        first, second = events_after(api, "z1", 2, **ask)
        assert first.event == "truncated", (ask, first)
        gap = first.json()
        assert (gap["reason"], gap["after"]) == ("evicted", 0), gap
        assert second.event == "message" and gap["before"] == int(second.id or 0) > 1


def end_run(host: HostProc, api: httpx.Client, agent: str) -> None:
    say(api, agent, "exit")
    host.wait_exit()


def test_a_stream_goes_on_through_a_restart_of_its_host(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    first = host_factory("e4", "--agent", "lines", "--linger", "0", command=ECHO)
    api = gateway.client()
    with stream(api, "e4") as events:
        say(api, "e4", "one")
        got = until(events, echoed("one"))
        end_run(first, api, "e4")
        host_factory("e4", "--agent", "lines", command=ECHO)  # the same journal
        say(api, "e4", "two")
        got += until(events, echoed("two"))
    assert not [e for e in got if e.event != "message"]
    assert offsets(got) == list(range(1, len(got) + 1))


def test_a_new_stream_after_a_restart_is_announced(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    args = ("--agent", "lines", "--no-journal")
    first = host_factory("e5", *args, "--linger", "0", command=ECHO)
    api = gateway.client()
    with stream(api, "e5") as events:
        say(api, "e5", "one")
        until(events, echoed("one"))
        end_run(first, api, "e5")
        host_factory("e5", *args, command=ECHO)
        say(api, "e5", "two")
        got = until(events, echoed("two"))
    notices = [e for e in got if e.event == "truncated"]
    assert len(notices) == 1 and notices[0].json()["reason"] == "new_epoch"
    after = got[got.index(notices[0]) + 1 :]
    assert offsets(after) == list(range(1, len(after) + 1))


def test_the_overview_stream_sends_the_list_and_its_changes(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("o1")
    api = gateway.client()
    with api.stream("GET", "/api/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
        first = next(events)
        assert first.event == "agents" and first.id is None
        assert [i["key"] for i in first.json()] == ["o1"]
        host_factory("o2")
        later = until(events, lambda e: len(e.json()) == 2)
    assert [i["key"] for i in later[-1].json()] == ["o1", "o2"]
    host_factory("o3")  # while nobody listens (or the last one is leaving)
    with api.stream("GET", "/api/events") as response:
        got = until(sse_events(response), lambda e: len(e.json()) == 3)
    assert [i["key"] for i in got[-1].json()] == ["o1", "o2", "o3"]


@pytest.mark.asyncio
async def test_a_quiet_stream_pings_and_ends_when_the_gateway_closes(
    host_factory: HostFactory, home: Path
) -> None:
    host_factory("p1")
    closing = asyncio.Event()
    hub = Hub(lambda key: AsyncClient(key.agent_id, home=home), lambda _key: Backoff(0.05, 2.0),
              closing.is_set)  # fmt: skip
    key = AgentKey("p1", None)
    allowed = [True]
    watch = Watch(closing, lambda: allowed[0], ping_seconds=0.01, check_seconds=0.01)
    client = AsyncClient("p1", home=home)
    body = shared_stream(hub, key, watch, client=client, after=HEAD)
    assert await asyncio.wait_for(anext(body), DEADLINE) == PING
    closing.set()
    rest = [chunk async for chunk in body]
    assert rest in ([], [PING])
    assert not client.connected
    assert hub.shared(key) is None  # the last stream closed the shared follow
    # a stream whose token no longer allows it ends as well
    closing = asyncio.Event()
    hub.closing = closing.is_set
    watch = Watch(closing, lambda: allowed[0], ping_seconds=0.01, check_seconds=0.01)
    body = shared_stream(hub, key, watch, after=HEAD)
    assert await asyncio.wait_for(anext(body), DEADLINE) == PING
    allowed[0] = False
    assert len([chunk async for chunk in body]) <= 1
    assert hub.shared(key) is None


def test_revoking_a_token_ends_its_open_streams(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("rv")
    token = gateway.add_token("watcher", "read")
    api = gateway.client(token)
    with (
        api.stream("GET", "/api/agents/rv/events") as one,
        api.stream("GET", "/api/events") as overview,
    ):
        assert one.status_code == 200 and overview.status_code == 200
        events = sse_events(overview)
        assert next(events).event == "agents"
        gateway.cli("token", "revoke", "watcher")
        # each ends (within a second or so), without an error
        assert all(e.event == "agents" for e in events)
        assert all(e.event == "message" for e in sse_events(one))
    assert api.get("/api/agents/rv/events").status_code == 401


def test_sigterm_ends_open_streams_and_the_gateway_cleanly(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("g1")
    paths = ["/api/agents/g1/events", "/api/events", "/api/agents/g1/events"]
    ended: list[str] = []

    def read(path: str) -> None:
        headers = {"Authorization": f"Bearer {gateway.token}"}
        with httpx.Client(base_url=gateway.url, headers=headers, timeout=DEADLINE) as api:
            with api.stream("GET", path) as response:
                for _ in response.iter_lines():
                    pass
        ended.append(path)

    readers = [threading.Thread(target=read, args=(p,)) for p in paths]
    for reader in readers:
        reader.start()
    wait_for(lambda: opened(gateway) >= 3, what="three open streams")
    assert gateway.stop(signal.SIGTERM) == 0
    for reader in readers:
        reader.join(DEADLINE)
    assert sorted(ended) == sorted(paths)  # each stream ended as a complete answer


def opened(gateway: Gateway) -> int:
    """Streams the gateway started answering (it logs each request as it answers)."""
    log = gateway.log()
    return log.count('"path": "/api/agents/g1/events"') + log.count('"path": "/api/events"')


CLIENTS = 200
FLOOD = 300
PER_TOKEN = 20
"""Streams per token here: below the gateway's cap per token (docs/web.md, Limits)."""


@pytest.mark.slow
@pytest.mark.asyncio
async def test_200_streams_on_one_agent_under_a_flood_miss_nothing(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("fl")
    start = head(host)
    headers = {"Authorization": f"Bearer {gateway.token}"}
    viewers = [gateway.add_token(f"viewer-{n}", "read") for n in range(CLIENTS // PER_TOKEN)]
    limits = httpx.Limits(max_connections=CLIENTS + 10)
    async with httpx.AsyncClient(
        base_url=gateway.url, headers=headers, timeout=DEADLINE, limits=limits
    ) as api:
        opened = 0

        async def follow(token: str) -> list[int]:
            nonlocal opened
            seen: list[int] = []
            path = "/api/agents/fl/events"
            mine = {"Authorization": f"Bearer {token}"}
            async with api.stream("GET", path, params={"after": start}, headers=mine) as response:
                assert response.status_code == 200
                opened += 1
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        seen.append(int(line[4:]))
                    elif line.startswith("data: ") and '"type":"result"' in line:
                        return seen
            raise AssertionError(f"the stream ended after {seen[-3:]}")

        readers = [asyncio.create_task(follow(viewers[n % len(viewers)])) for n in range(CLIENTS)]
        await wait_until(lambda: opened == CLIENTS, "every stream open")
        sent = await api.post("/api/agents/fl/send", json={"input": f"/flood {FLOOD}"})
        assert sent.status_code == 200
        results = await asyncio.wait_for(asyncio.gather(*readers), 120)
    last = results[0][-1]
    assert last - start > FLOOD  # the flood's messages are all in it
    for seen in results:
        assert seen == list(range(start + 1, last + 1))  # each offset once, in order


def test_a_browser_that_stops_reading_during_a_flood_loses_nothing(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("sl")
    api = gateway.client()
    start = head(host)
    with stream(api, "sl", params={"after": start}) as events:
        say(api, "sl", "/flood 5000")
        first = next(events)  # then nothing is read while the agent floods
        host.wait_state("idle")
        rest = until(events, lambda e: '"type":"result"' in e.data)
    seen = offsets([first, *rest])
    assert len(seen) > 5000
    assert seen == list(range(start + 1, start + 1 + len(seen)))
    # more than the gateway queues for a stream: it attached again, and lost nothing
    attaches = [line for line in host.log().splitlines() if "client.attached" in line]
    assert len(attaches) >= 2, attaches
