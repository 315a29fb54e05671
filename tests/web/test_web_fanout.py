"""One follow of the host per agent, shared by the gateway's streams of it (agenthost/
web/fanout.py), against real hosts and real HTTP clients: streams that start at
different places each get every offset once, in order; a browser that stops reading
leaves the shared follow without holding the others back, and catches up on its own;
the last stream that leaves closes the host connection; the shared follow goes on
through a restart of the host."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import httpx
import psutil

from hosttools import DEADLINE, ECHO, wait_for
from webtools import Gateway, HostFactory, SseEvent, echoed, head, offsets, say, sse_events, until


def connections(gateway: Gateway) -> int:
    """The gateway's Unix sockets: those to hosts, and the event loop's own pair."""
    return len(psutil.Process(gateway.proc.pid).net_connections(kind="unix"))


def settled(gateway: Gateway, hosts: int) -> None:
    """Wait until the gateway has ``hosts`` connections to hosts (a stream that caught
    up closes its own a moment after it joined the shared follow); a connection the
    gateway closed is closed for the host too."""
    expected = LOOP_SOCKETS + hosts
    wait_for(
        lambda: connections(gateway) == expected,
        what=f"{hosts} host connections (not {connections(gateway) - LOOP_SOCKETS})",
    )


LOOP_SOCKETS = 2
"""The event loop's self-pipe (a socket pair), the gateway's only other Unix sockets."""


def test_a_gateway_at_rest_has_no_host_connection(gateway: Gateway) -> None:
    assert connections(gateway) == LOOP_SOCKETS


@contextlib.contextmanager
def streams(api: httpx.Client, agent: str, asks: list[dict[str, Any]]) -> Iterator[list[Any]]:
    """Open a stream per ``asks`` item (kw of httpx's stream: params, headers)."""
    with contextlib.ExitStack() as stack:
        opened = []
        for kw in asks:
            response = stack.enter_context(api.stream("GET", f"/api/agents/{agent}/events", **kw))
            assert response.status_code == 200, response.read()
            opened.append(sse_events(response))
        yield opened


def exactly_once(got: list[SseEvent], first: int) -> None:
    assert not [e for e in got if e.event != "message"], got
    assert offsets(got) == list(range(first, first + len(got)))
    # each id with its own event (not another's bytes)
    assert all(e.json()["offset"] == int(e.id or 0) for e in got)


def test_streams_from_different_offsets_each_get_every_offset_once_from_one_follow(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("f1", "--agent", "lines", command=ECHO)
    api = gateway.client()
    for n in range(6):
        say(api, "f1", f"a{n}")
    top = head(host)
    assert top >= 6
    asks: list[tuple[dict[str, Any], int]] = [
        ({"params": {"after": top}}, top + 1),
        ({"params": {"after": 0}}, 1),
        ({"params": {"after": top // 2}}, top // 2 + 1),
        ({"params": {"tail": 3}}, top - 2),
        ({"params": {"after": 1}, "headers": {"Last-Event-ID": "2"}}, 3),
        ({}, 1),
    ]
    with streams(api, "f1", [kw for kw, _ in asks]) as opened:
        say(api, "f1", "b0")
        # each caught up (or started at the shared position): one host connection
        got = [until(events, echoed("b0")) for events in opened]
        settled(gateway, 1)
        for n in range(1, 30):
            say(api, "f1", f"b{n}")
        # a stream that joins late, from an old offset, while the others are live
        with streams(api, "f1", [{"params": {"after": 4}}]) as (late,):
            got.append(until(late, echoed("b29")))
            asks.append(({}, 5))
            for n, events in enumerate(opened):
                got[n] += until(events, echoed("b29"))
            settled(gateway, 1)
    for (_, first), seen in zip(asks, got, strict=True):
        exactly_once(seen, first)
        assert seen[-1].json().get("data") == "echo b29"
    # the last stream gone, the shared follow's connection is closed too
    settled(gateway, 0)
    with streams(api, "f1", [{"params": {"after": top}}]) as (again,):
        say(api, "f1", "c0")
        exactly_once(until(again, echoed("c0")), top + 1)
        settled(gateway, 1)  # a new shared follow
    settled(gateway, 0)


STUCK_FLOOD = 15000
"""Messages of the flood a browser does not read: their 30,000 events (about 7 MB) are
more than the kernel's socket buffers (4 MiB at most here) and the shared follow's log
(2 MiB) hold."""


def until_result(chunks: Iterator[bytes], got: bytearray) -> bytearray:
    """Read raw bytes (faster than parsing, so that the flood is read well within the
    gateway's write deadline) until the turn's result."""
    for chunk in chunks:
        got += chunk
        if b'"type":"result"' in got[-len(chunk) - 32 :]:
            return got
    raise AssertionError("the stream ended before the turn's result")


EVENT = re.compile(
    rb'^id: (\d+)\ndata: \{"kind":"event","type":"\w+","agent_id":"\w+","offset":(\d+),', re.M
)


def ids_of(raw: bytes) -> list[int]:
    """The ids of a stream's raw bytes, each checked against its event's own offset."""
    pairs = EVENT.findall(raw)
    assert len(pairs) == len(re.findall(rb"^id: ", raw, re.M)), "an event of another form"
    assert b"event: truncated" not in raw
    assert all(i == o for i, o in pairs)
    return [int(i) for i, _ in pairs]


def test_a_stuck_browser_does_not_hold_the_others_back_and_catches_up_on_its_own(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("f2")
    api = gateway.client()
    start = head(host)
    path = "/api/agents/f2/events"
    ask = {"params": {"after": start}}
    with api.stream("GET", path, **ask) as stuck, api.stream("GET", path, **ask) as reader:
        settled(gateway, 1)  # both on the shared follow
        say(api, "f2", f"/flood {STUCK_FLOOD}")
        stuck_chunks = stuck.iter_bytes()
        held = bytearray(next(stuck_chunks))  # then it reads nothing while the agent floods
        # the other gets the whole turn while the stuck one still reads nothing
        read = until_result(reader.iter_bytes(), bytearray())
        # read again, it finds itself behind the shared log, and catches up on its own
        rest = until_result(stuck_chunks, held)
    assert "web.stream_behind" in gateway.log()
    for raw in (read, rest):
        ids = ids_of(raw)
        assert len(ids) > 2 * STUCK_FLOOD
        assert ids == list(range(start + 1, start + 1 + len(ids)))


def test_shared_streams_go_on_through_a_restart_of_the_host(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    first = host_factory("f3", "--agent", "lines", "--linger", "0", command=ECHO)
    api = gateway.client()
    say(api, "f3", "zero")
    top = head(first)
    asks = [{"params": {"after": top}}, {"params": {"after": 0}}, {"params": {"tail": 1}}]
    starts = [top + 1, 1, top]
    with streams(api, "f3", asks) as opened:
        say(api, "f3", "one")
        got = [until(events, echoed("one")) for events in opened]
        say(api, "f3", "exit")
        first.wait_exit()
        host_factory("f3", "--agent", "lines", command=ECHO)  # the same journal
        say(api, "f3", "two")
        for n, events in enumerate(opened):
            got[n] += until(events, echoed("two"))
        settled(gateway, 1)  # the shared follow came back, alone
    for seen, start in zip(got, starts, strict=True):
        exactly_once(seen, start)


def test_garbage_positions_are_refused_before_any_follow(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("f4")
    api = gateway.client()
    asks: list[dict[str, Any]] = [
        {"params": {"after": "-1"}},
        {"params": {"tail": "x"}},
        {"headers": {"Last-Event-ID": "1e9"}},
        {"params": {"after": "9" * 40}},
    ]
    for kw in asks:
        answer = api.get("/api/agents/f4/events", timeout=DEADLINE, **kw)
        assert answer.status_code == 400, (kw, answer.text)
    assert connections(gateway) == LOOP_SOCKETS
