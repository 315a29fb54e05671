"""agenthost.web.limits in memory: the caps fit the descriptor limit, the connection
table gives the place of the longest waiting to a newcomer (never a busy one's), the
stream slots count per token and in all, and the refusal is a well-formed answer."""

from __future__ import annotations

import json

import h11
import pytest

from agenthost.web.limits import (
    MAX_CONNECTIONS,
    MAX_STREAMS,
    MAX_STREAMS_PER_TOKEN,
    RESERVED_FDS,
    RETRY_SECONDS,
    STREAM_FDS,
    Caps,
    Connections,
    StreamSlots,
    caps_for,
    overloaded_answer,
)


def test_the_caps_at_systemds_soft_limit_are_the_documented_ones() -> None:
    assert caps_for(1024) == Caps(connections=448, streams=112, streams_per_token=32)


@pytest.mark.parametrize("nofile", [256, 512, 1000, 1024, 2048, 4096, 8192, 65536, 524288])
def test_the_caps_leave_the_reserve_free(nofile: int) -> None:
    caps = caps_for(nofile)
    # every connection open, every stream with its host's descriptors: the reserve stays
    assert RESERVED_FDS + caps.connections + caps.streams * STREAM_FDS <= nofile
    assert 0 < caps.streams_per_token < caps.streams < caps.connections
    assert caps.connections <= MAX_CONNECTIONS and caps.streams <= MAX_STREAMS
    assert caps.streams_per_token <= MAX_STREAMS_PER_TOKEN


def test_with_plenty_of_descriptors_the_caps_are_the_maxima() -> None:
    assert caps_for(524288) == Caps(MAX_CONNECTIONS, MAX_STREAMS, MAX_STREAMS_PER_TOKEN)


@pytest.mark.parametrize("nofile", [0, 1, 100, 129])
def test_a_tiny_limit_still_gives_working_caps(nofile: int) -> None:
    caps = caps_for(nofile)
    assert caps.streams >= 1 and caps.streams_per_token >= 1
    assert caps.connections > caps.streams


# --- connections -------------------------------------------------------------------------


def test_connections_are_admitted_while_there_is_room() -> None:
    table: Connections[str] = Connections(3)
    assert [table.open(c) for c in "abc"] == [(True, None)] * 3
    assert len(table) == 3 and not table.full


def test_at_the_cap_the_longest_waiting_gives_its_place() -> None:
    table: Connections[str] = Connections(3)
    for c in "abc":
        table.open(c)
    table.busy("a")  # a's request is in: never evicted
    table.waiting("b")  # b waits again (after an answer): now the newest waiting
    assert table.open("d") == (True, "c")
    assert table.full and len(table) == 3
    assert table.open("e") == (True, "b")
    assert table.open("f") == (True, "d")


def test_with_every_connection_busy_a_newcomer_is_refused() -> None:
    table: Connections[str] = Connections(2)
    for c in "ab":
        table.open(c)
        table.busy(c)
    assert table.open("c") == (False, None)
    assert len(table) == 2 and table.full
    table.closed("a")
    assert table.open("c") == (True, None) and not table.full


def test_an_evicted_or_refused_connection_never_counts_again() -> None:
    table: Connections[str] = Connections(1)
    table.open("a")
    assert table.open("b") == (True, "a")
    for step in (table.waiting, table.busy, table.closed):
        step("a")  # what its protocol still reports while it closes
    assert len(table) == 1
    table.busy("b")
    assert table.open("c") == (False, None)
    table.waiting("c")
    table.closed("c")
    assert len(table) == 1


# --- streams -----------------------------------------------------------------------------


def test_stream_slots_per_token_and_in_all() -> None:
    slots = StreamSlots(Caps(connections=10, streams=5, streams_per_token=2))
    assert [slots.take("t1") for _ in range(3)] == [None, None, "token"]
    assert [slots.take("t2") for _ in range(2)] == [None, None]
    assert slots.take("t3") is None
    assert slots.take("t4") == "all" and slots.open == 5
    assert slots.take("t1") == "token"  # its own share is the first refusal
    slots.give_back("t1")
    assert slots.take("t4") is None
    assert slots.take("t1") == "all"


def test_giving_back_more_than_was_taken_changes_nothing() -> None:
    slots = StreamSlots(Caps(connections=10, streams=2, streams_per_token=2))
    slots.give_back("nobody")
    assert slots.open == 0
    slots.take("t1")
    slots.give_back("t1")
    slots.give_back("t1")
    assert slots.open == 0 and slots.take("t1") is None and slots.take("t1") is None
    assert slots.take("t1") == "token"


# --- the refusal -------------------------------------------------------------------------


def test_the_refusal_is_a_503_in_the_apis_error_shape() -> None:
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/api/agents", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(overloaded_answer())
    response = client.next_event()
    assert isinstance(response, h11.Response) and response.status_code == 503
    headers = {name.decode(): value.decode() for name, value in response.headers}
    assert headers["retry-after"] == str(RETRY_SECONDS)
    assert headers["connection"] == "close"
    data = client.next_event()
    assert isinstance(data, h11.Data)
    assert json.loads(data.data) == {
        "error": "the gateway has too many connections: try again shortly",
        "code": "overloaded",
    }
    assert isinstance(client.next_event(), h11.EndOfMessage)
