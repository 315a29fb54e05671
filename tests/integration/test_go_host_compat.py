"""The client and the CLI against a host of protocol 1.0 as first published.

That host (the reference Go host) sends no ``kind``, no ``offset`` for a send, errors
without ``code``, and ``chat_entry`` objects with Go's field names. The fake in
tests/gohost.py serves a real socket the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import uvloop

from agenthost import AsyncClient, Client, ProtocolError, StreamEvent, UnknownType

from gohost import FakeGoHost
from hosttools import DEADLINE

WHEN = datetime(2025, 3, 1, 13, 0, 0, 123456, tzinfo=UTC)  # gohost.GO_TIME in UTC


@pytest.fixture
def gohost(home: Path) -> Iterator[FakeGoHost]:
    with FakeGoHost(home, "g1") as host:
        yield host


def test_every_verb_works_with_a_1_0_host(gohost: FakeGoHost) -> None:
    with Client("g1", home=gohost.home) as client:
        ping = client.ping()
        assert (ping.protocol_version, ping.min_protocol_version) == ("1.0", "1.0")
        assert ping.started_at == WHEN
        status = client.status()
        assert status.host.pid == 4242 and status.agent.state == "idle"
        assert [a.id for a in client.list()] == ["g1"]
        sent = client.send("hello")
        assert sent.offset is None and not sent.duplicate
        assert gohost.request_types().count("host.send") == 1  # never sent twice
        history = client.history()
        assert [str(e) for e in history.entries] == ["user: hello", "assistant: echo: hello"]
        events = []
        for event in client.attach(0):
            events.append(event)
            if event.type == "state" and event.state == "idle":
                break
        assert [e.offset for e in events] == [1, 2, 3, 4, 5]
        assert [e.type for e in events] == ["chat_entry", "state", "output", "chat_entry", "state"]
        # the entries with Go's field names did not end the stream: raw data
        answer = events[3]
        assert answer.chat_entry is None
        assert json.loads(answer.data or "")["Content"] == "echo: hello"
        assert str(events[1]) == "#2 state running"
        client.detach()
        stop = client.stop(timeout=5)
        assert stop.stopped and stop.final_state == "done" and stop.exit_code is None


def test_an_error_without_code_to_an_unknown_type_is_unknown_type(gohost: FakeGoHost) -> None:
    with Client("g1", home=gohost.home) as client:
        with pytest.raises(UnknownType, match="unknown message type: host.interrupt"):
            client.interrupt()
        with pytest.raises(UnknownType):
            client.pending()
        with pytest.raises(UnknownType):
            client.respond("r1", "allow")
        assert client.status().agent.id == "g1"  # the connection is still usable


def test_async_attach_with_and_without_await(gohost: FakeGoHost) -> None:
    async def main() -> tuple[list[int], int, list[int]]:
        async with AsyncClient("g1", home=gohost.home) as client:
            await client.send("one")
            plain: list[int] = []
            async for event in client.attach(0):  # no await needed
                plain.append(event.offset)
                if event.offset == 5:
                    break
            await client.detach()
            sub = await client.attach(2)  # the old form: the response first
            head = sub.response.stream_offset
            resumed = []
            async for event in sub:
                resumed.append(event.offset)
                if event.offset == head:
                    break
            return plain, head, resumed

    plain, head, resumed = uvloop.run(asyncio.wait_for(main(), DEADLINE))
    assert plain == [1, 2, 3, 4, 5]
    assert head == 5 and resumed == [3, 4, 5]


@pytest.mark.parametrize(
    ("garbage", "says"),
    [
        (b"this is not json\n", "not JSON"),
        (b"[1,2,3]\n", "a JSON list, not an object"),
        (b'{"type":"output","agent_id":"g1","offset":"six","timestamp":"t"}\n', "offset"),
        (b'{"type":"host.status","success":true,"payload":"up"}\n', "payload"),
    ],
)
def test_garbage_from_the_host_ends_the_stream_with_a_clear_error(
    gohost: FakeGoHost, garbage: bytes, says: str
) -> None:
    async def main() -> tuple[list[int], BaseException, BaseException]:
        async with AsyncClient("g1", home=gohost.home) as client:
            await client.send("x")
            seen: list[int] = []
            try:
                async for event in client.attach(0):
                    seen.append(event.offset)
                    if event.offset == 5:
                        gohost.inject(garbage)
            except ProtocolError as exc:
                stream_error: BaseException = exc
            else:
                raise AssertionError("the stream ended without an error")
            try:
                await client.status()  # fails at once, does not wait for a timeout
            except ProtocolError as exc:
                request_error: BaseException = exc
            else:
                raise AssertionError("a request after garbage succeeded")
            return seen, stream_error, request_error

    seen, stream_error, request_error = uvloop.run(asyncio.wait_for(main(), DEADLINE))
    assert seen == [1, 2, 3, 4, 5]
    assert str(stream_error).startswith("malformed frame from host: ") and says in str(stream_error)
    assert str(request_error) == str(stream_error)


def test_a_frame_of_an_unknown_kind_is_skipped_and_the_stream_goes_on(
    gohost: FakeGoHost,
) -> None:
    # a later minor version may add kinds; docs/protocol.md tells clients to ignore them
    async def main() -> tuple[list[int], str]:
        async with AsyncClient("g1", home=gohost.home) as client:
            await client.send("x")
            seen: list[int] = []
            async for event in client.attach(0):
                seen.append(event.offset)
                if event.offset == 2:
                    gohost.inject(b'{"kind":"notice","type":"gap","after":1}\n')
                if event.offset == 5:
                    break
            return seen, (await client.status()).agent.id

    seen, agent_id = uvloop.run(asyncio.wait_for(main(), DEADLINE))
    assert seen == [1, 2, 3, 4, 5] and agent_id == "g1"


def test_a_garbage_reply_fails_the_request_waiting_for_it(gohost: FakeGoHost) -> None:
    async def main() -> BaseException:
        async with AsyncClient("g1", home=gohost.home, request_timeout=DEADLINE) as client:
            gohost.inject(b"\xff\xfe garbage\n")
            with pytest.raises(ProtocolError) as info:
                await client.request("host.status")  # answered after the garbage
            return info.value

    error = uvloop.run(asyncio.wait_for(main(), DEADLINE))
    assert "not JSON" in str(error)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "agenthost", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_works_with_a_1_0_host(gohost: FakeGoHost) -> None:
    home = gohost.home
    status = _cli(home, "status", "g1")
    assert status.returncode == 0, status.stderr
    assert "idle" in status.stdout and "4242" in status.stdout
    sent = _cli(home, "send", "g1", "hi", "there")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "sent to g1 (the host reports no offset)"
    assert gohost.request_types().count("host.send") == 1
    sent_json = _cli(home, "send", "g1", "again", "--json")
    assert json.loads(sent_json.stdout) == {"ok": True, "offset": None, "duplicate": False}
    history = _cli(home, "history", "g1")
    assert history.returncode == 0, history.stderr
    assert history.stdout.splitlines()[:2] == ["› hi there", "echo: hi there"]
    attach = _cli(home, "attach", "g1", "--no-follow")
    assert attach.returncode == 0, attach.stderr
    # the 1.0 host's chat entries (Role/Content) are shown as their JSON, in order
    lines = attach.stdout.splitlines()
    assert [line for line in lines if line.startswith("·")][:2] == ["· running", "· idle"]
    raw = [json.loads(line.removeprefix("entry│ ")) for line in lines if line.startswith("entry│")]
    assert [(e["Role"], e["Content"]) for e in raw[:2]] == [
        ("user", "hi there"),
        ("assistant", "echo: hi there"),
    ], lines
    as_json = _cli(home, "attach", "g1", "--no-follow", "--json")
    events = [StreamEvent.model_validate_json(line) for line in as_json.stdout.splitlines()]
    assert [e.offset for e in events] == list(range(1, 11))
