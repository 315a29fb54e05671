"""Pause and resume after a usage limit, in a real host with the demo agent (whose
`/limit S` reports a limit the way Claude Code signed in with a subscription does):
the agent goes `paused` until the reset, is resumed by the host at that time and told
what was interrupted, or at once by `agenthost resume`, or by a person's message."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from sandboxtools import require_sandbox

from conftest import HostFactory
from hosttools import (
    HostProc,
    attached,
    cli,
    events_until,
    history,
    is_state,
    wait_for,
)


@pytest.fixture(params=["off", "none"])
def host(host_factory: HostFactory, request: pytest.FixtureRequest) -> HostProc:
    """The demo agent, unconfined and in a sandbox (pauses work the same in one)."""
    if request.param != "off":
        require_sandbox()
    return host_factory("u1", "--agent", "demo", "--sandbox", request.param)


def is_action(action: str) -> object:
    return lambda e: e["type"] == "governance" and e["governance"]["action"] == action


def governance(events: list[dict[str, object]], action: str) -> dict[str, object]:
    [found] = [
        e["governance"]
        for e in events
        if e["type"] == "governance" and e["governance"]["action"] == action
    ]  # type: ignore[index]
    return found  # type: ignore[return-value]


def test_a_usage_limit_pauses_until_its_reset_then_the_agent_carries_on(
    host: HostProc,
) -> None:
    with attached(host, timeout=30) as conn:
        sent_at = time.time()
        assert conn.request("host.send", {"input": "/limit 2"})["success"]
        events = events_until(conn, is_state("paused"))
        paused = governance(events, "paused")
        assert paused["actor"] == "host"
        assert "You've hit your 5-hour limit" in str(paused["reason"])
        until = datetime.fromisoformat(str(paused["until"])).timestamp()
        assert sent_at + 2 < until < sent_at + 6  # the reset (whole seconds) + margin
        agent = host.agent()
        assert agent["state"] == "paused" and "paused_until" in agent
        status = cli(host.home, "status", "u1")
        assert "paused until" in status.stdout
        # nobody does anything: at the time the host resumes it and tells it why
        events = events_until(conn, is_action("resumed"))  # type: ignore[arg-type]
        events += events_until(conn, lambda e: e["type"] == "result")
    resumed = governance(events, "resumed")
    assert resumed["actor"] == "host" and resumed["reason"] == "the usage limit has reset"
    told = [
        e["chat_entry"]["content"]
        for e in events
        if e["type"] == "chat_entry" and e["chat_entry"]["role"] == "user"
    ]
    assert len(told) == 1
    assert "stopped by a usage limit" in told[0]
    assert "The request was: /limit 2" in told[0]
    assert "Starting on it: step one is done." in told[0]
    assert "Tool calls that did not finish: Bash: make build" in told[0]
    assert time.time() >= until  # not before its time
    wait_for(lambda: host.agent()["state"] == "idle", what="the resumed turn done")
    assert "paused_until" not in host.agent()
    roles = [(e["role"], e.get("content", "")) for e in history(host)]
    assert any(r == "governance" and "paused by host" in c for r, c in roles)
    assert any(r == "governance" and "resumed by host" in c for r, c in roles)


def test_resume_now_and_a_persons_message_end_the_pause(host: HostProc) -> None:
    with attached(host, timeout=30) as conn:
        assert conn.request("host.send", {"input": "/limit 3600"})["success"]
        events_until(conn, is_state("paused"))
        done = cli(host.home, "resume", "u1", "--json")
        assert done.returncode == 0, done
        assert json.loads(done.stdout)["resumed"] is True
        events = events_until(conn, is_action("resumed"))  # type: ignore[arg-type]
        events += events_until(conn, lambda e: e["type"] == "result")
        assert governance(events, "resumed")["actor"] == "client"
        events_until(conn, is_state("idle"))
        # not paused: nothing to resume
        again = cli(host.home, "resume", "u1")
        assert again.returncode == 0 and "is not paused (state idle)" in again.stderr

        # paused again; a message from a person resumes it with that message only
        assert conn.request("host.send", {"input": "/limit 3600"})["success"]
        events_until(conn, is_state("paused"))
        assert conn.request("host.send", {"input": "hello there"})["success"]
        events = events_until(conn, is_action("resumed"))  # type: ignore[arg-type]
        events += events_until(conn, lambda e: e["type"] == "result")
    resumed = governance(events, "resumed")
    assert resumed["reason"] == "a message was sent while it was paused"
    users = [
        e["chat_entry"]["content"]
        for e in events
        if e["type"] == "chat_entry" and e["chat_entry"]["role"] == "user"
    ]
    assert users == ["hello there"]


def test_a_plain_api_error_is_no_pause(host: HostProc) -> None:
    with attached(host, timeout=30) as conn:
        assert conn.request("host.send", {"input": "/error"})["success"]
        events = events_until(conn, is_state("idle"))
    assert not [e for e in events if e["type"] == "governance"]
    assert "paused" not in [e.get("state") for e in events]


def test_stopping_a_paused_agent_ends_it_cleanly(host: HostProc) -> None:
    with attached(host, timeout=30) as conn:
        assert conn.request("host.send", {"input": "/limit 3600"})["success"]
        events_until(conn, is_state("paused"))
    with host.raw() as conn:
        stopped = conn.request("host.stop", {"timeout": 5})
    assert stopped["success"] and stopped["payload"]["final_state"] == "done"
    host.wait_exit()
