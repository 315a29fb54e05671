"""The demo agent through a real host: chat entries, tool entries, states, history."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from conftest import HostFactory
from hosttools import HostProc, RawConn


def turn_events(conn: RawConn, turns: int = 1) -> list[dict[str, Any]]:
    """Events until the ``turns``-th ``result`` event and the idle state after it."""
    events: list[dict[str, Any]] = []
    results = 0
    while True:
        f = conn.frame()
        if f["kind"] != "event":
            continue
        events.append(f)
        results += f["type"] == "result"
        if results >= turns and f["type"] == "state" and f["state"] == "idle":
            return events


def run_turn(host: HostProc, text: str) -> list[dict[str, Any]]:
    """Attach, send ``text``, return the events up to the end of its turn."""
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.request("host.send", {"input": text})
        return turn_events(conn)


def test_a_full_turn(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        sent = conn.request("host.send", {"input": "count these four words"})["payload"]
        events = turn_events(conn)
    chats = [e for e in events if e["type"] == "chat_entry"]
    user, *rest = [e["chat_entry"] for e in chats]
    assert user["role"] == "user" and user["content"] == "count these four words"
    assert chats[0]["offset"] == sent["offset"]
    roles = [(c["role"], c.get("tool_name"), c.get("tool_result")) for c in rest]
    assert roles == [
        ("assistant", None, None),
        ("tool", "Bash", None),
        ("tool", "Bash", "4"),
        ("assistant", None, None),
    ]
    call, result = rest[1], rest[2]
    assert call["tool_input"] == "wc -w" and call["input"]["command"] == "wc -w"
    assert call["tool_use_id"] == result["tool_use_id"] and result["is_error"] is False
    assert rest[-1]["content"] == 'You said "count these four words". That is 4 words.'
    states = [e["state"] for e in events if e["type"] == "state"]
    assert states == ["idle", "running", "idle"]
    (turn,) = [e["result"] for e in events if e["type"] == "result"]
    assert turn["subtype"] == "success" and turn["usage"]["output_tokens"] > 0
    # every stdout line is also kept raw, as an output event, before what it became
    raw = [json.loads(e["data"]) for e in events if e["type"] == "output"]
    assert [r["type"] for r in raw] == [
        "system",
        "user",  # the message echoed (--replay-user-messages): not a second chat entry
        "assistant",
        "assistant",
        "user",
        "assistant",
        "result",
    ]
    agent = host.agent()
    assert agent["state"] == "idle" and agent["model"] == "demo-1" and agent["turns"] == 1
    assert agent["session_id"] == raw[0]["session_id"] and agent["cost_usd"] > 0
    with host.raw() as conn:
        entries = conn.request("host.history")["payload"]["entries"]
        last_two = conn.request("host.history", {"limit": 2})["payload"]
    assert [e["role"] for e in entries] == ["user", "assistant", "tool", "tool", "assistant"]
    assert last_two["entries"] == entries[-2:] and last_two["total"] == 5
    assert all(e["offset"] for e in entries)


def test_messages_queued_during_a_turn_keep_it_running(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "/sleep 0.3"})
        conn.send("host.send", {"input": "second"})
        events = turn_events(conn, turns=2)
    states = [e["state"] for e in events if e["type"] == "state"]
    # one "running" for both turns: the first result does not make it idle
    assert states == ["idle", "running", "idle"]
    assert sum(e["type"] == "result" for e in events) == 2


def test_input_that_would_break_a_json_agent_cannot(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    nasty = 'line one\nline "two" \\ with {"json": true}\u2028 and ünïcödé \x00 end'
    events = run_turn(host, nasty)
    entries = [e["chat_entry"] for e in events if e["type"] == "chat_entry"]
    answers = [c["content"] for c in entries if c["role"] != "tool"]
    assert answers[0] == nasty  # recorded as sent
    assert answers[-1].endswith("That is 12 words.")  # the agent understood it
    assert host.agent()["pid"] > 0


def test_error_result_sets_last_error_and_stays_idle(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    events = run_turn(host, "/error")
    (turn,) = [e["result"] for e in events if e["type"] == "result"]
    assert turn["is_error"] is True and turn["terminal_reason"] == "api_error"
    agent = host.agent()
    assert agent["state"] == "idle" and "demo failure" in agent["last_error"]


def test_exit_and_signal_commands(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.send", {"input": "/exit 3"})
    agent = host.wait_state("error")
    assert agent["exit_code"] == 3 and agent.get("signal") is None
    other = host_factory("d2", "--agent", "demo")
    with other.raw() as conn:
        conn.request("host.send", {"input": "/signal KILL"})
    agent = other.wait_state("error")
    assert agent["exit_code"] == -9 and agent["signal"] == "SIGKILL"


def test_demo_stderr_is_captured(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.request("host.send", {"input": "/stderr something odd"})
        # stdout and stderr are separate pipes: the stderr line may arrive before or
        # after the turn's end; read until both happened
        events: list[dict[str, Any]] = []
        done = False
        while not (done and any(e.get("stream") == "stderr" for e in events)):
            events.append(conn.read_until(lambda f: f["kind"] == "event"))
            done = done or (events[-1]["type"] == "result")
    stderr = [e["data"] for e in events if e.get("stream") == "stderr"]
    assert stderr == ["something odd"]


def test_demo_sigterm_is_a_clean_exit(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        # a finished turn proves the agent is past its start-up (signal handler set)
        conn.request("host.attach", {"offset": 0})
        conn.request("host.send", {"input": "hi"})
        turn_events(conn)
        stop = conn.request("host.stop", {"timeout": 5})["payload"]
    assert stop["exit_code"] == 0 and stop["final_state"] == "done" and stop["graceful"]


def test_demo_agent_alone_dies_on_a_non_json_line() -> None:
    # Like Claude Code: a stdin line that is not JSON kills it. Through the host that
    # cannot happen (the adapter always writes JSON); here we feed it directly.
    out = subprocess.run(
        [sys.executable, "-m", "agenthost.agents.demo_agent", "--pace", "0"],
        input=b"hello, not json\n",
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == 1 and b"not valid JSON" in out.stderr
