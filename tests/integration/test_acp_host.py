"""Real hosts running the scripted ACP agent (tests/fixtures/acp_agent.py).

The agent's prompt text chooses what it does (see the fixture's docstring); its
``--script`` picks the known behaviours of Claude's, Gemini's or Codex's ACP agents.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import HostFactory
from hosttools import (
    PY,
    HostProc,
    attached,
    chat,
    events_until,
    history,
    is_result,
    is_state,
    turn,
    wait_for,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ACP_AGENT = FIXTURES / "acp_agent.py"
SDK_AGENT = FIXTURES / "acp_sdk_agent.py"  # the official SDK's agent side


def acp_host(
    host_factory: HostFactory,
    home: Path,
    agent_id: str = "acp",
    *args: str,
    script: str = "default",
) -> HostProc:
    """A host of the scripted agent, idle once its session exists."""
    worktree = home / "wt"
    worktree.mkdir(exist_ok=True)
    command = [PY, "-u", str(ACP_AGENT), "--script", script, "--state", str(home / "sessions")]
    host = host_factory(agent_id, "--agent", "acp", "--cwd", str(worktree), *args, command=command)
    host.wait_state("idle")
    return host


def test_a_text_turn(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    agent = host.agent()
    assert agent["session_id"].startswith("sess-")
    assert (agent["agent_name"], agent["agent_version"]) == ("acp-fixture-default", "1.2.3")
    assert agent["modes"] == {"current": "default", "available": ["default", "plan"]}
    assert agent["commands"] == ["review", "init"]
    events = turn(host, "hello there")
    assert [e["state"] for e in events if e["type"] == "state"] == ["running"]
    assert [e["content"] for e in chat(events) if e["role"] == "assistant"] == [
        "You said: hello there"
    ]
    result = events[-1]["result"]
    assert result["stop_reason"] == "end_turn" and result["is_error"] is False
    assert result["session_id"] == agent["session_id"]
    assert result["usage"]["input_tokens"] == 10
    agent = host.wait_state("idle")
    assert agent["cost_usd"] == 0.25 and agent["context"] == {"used": 1200, "size": 200000}
    assert agent["usage"]["cache_read_input_tokens"] == 2 and agent["turns"] == 1
    outputs = [e for e in events if e["type"] == "output"]
    assert any('"session/update"' in e["data"] for e in outputs)  # every line is output too


def test_mode_and_plan(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home, "acp", "--agent-opt", "mode=plan")
    assert host.agent()["mode"] == "plan"
    events = turn(host, "/plan")
    entries = chat(events)
    assert entries[0] == {**entries[0], "content": "Let me plan", "thought": True}
    assert entries[1]["content"] == "[x] Read the code\n[~] Fix the bug\n[ ] Test"
    assert entries[2]["content"] == "Planned."
    assert [e for e in events if e["type"] == "error"] == []  # an unknown update kind
    assert [p["status"] for p in host.agent()["plan"]] == ["completed", "in_progress", "pending"]


@pytest.mark.parametrize(
    ("script", "behavior", "option", "tool_result", "stop_reason"),
    [
        ("default", "allow", None, ("ran: touch asked.txt", False), "end_turn"),
        ("default", "deny", "reject-always", ("rejected by the user", True), "end_turn"),
        ("claude", "allow", "allow_always", ("ran: touch asked.txt", False), "end_turn"),
        ("gemini", "allow", None, ("ran: touch asked.txt", False), "end_turn"),
        ("gemini", "deny", None, None, "end_turn"),  # no call announced, no result
        ("codex", "deny", None, None, "cancelled"),  # its reject ends the turn
    ],
)
def test_a_permission_answered_by_a_second_client_after_the_first_detached(
    home: Path,
    host_factory: HostFactory,
    script: str,
    behavior: str,
    option: str | None,
    tool_result: tuple[str, bool] | None,
    stop_reason: str,
) -> None:
    host = acp_host(host_factory, home, script=script)
    with attached(host) as first:
        first.request("host.send", {"input": "/ask"})
        events = events_until(first, lambda e: e["type"] == "permission_request")
        request = events[-1]["request"]
        first.request("host.detach")
    assert request["tool_input"] == "touch asked.txt"
    assert request["input"] == {"command": "touch asked.txt"}
    assert {o["kind"] for o in request["options"]} >= {"allow_once", "reject_once"}
    host.wait_state("waiting")
    with attached(host) as second:
        (pending,) = second.request("host.pending")["payload"]["requests"]
        assert pending["request_id"] == request["request_id"]
        answer: dict[str, Any] = {"request_id": request["request_id"], "behavior": behavior}
        if option is not None:
            answer["option_id"] = option
        assert second.request("host.respond", answer)["success"]
        events = events_until(second, is_result)
    assert events[-1]["result"]["stop_reason"] == stop_reason
    decided = [e["decision"] for e in events if e["type"] == "permission_response"]
    assert decided == [
        {"request_id": request["request_id"], "behavior": behavior, "actor": "client"}
    ]
    host.wait_state("idle")
    tools = [e for e in history(host) if e["role"] == "tool"]
    starts = [e for e in tools if "tool_result" not in e]
    results = [(e["tool_result"], e["is_error"]) for e in tools if "tool_result" in e]
    assert results == ([tool_result] if tool_result else [])
    if script == "gemini" and behavior == "deny":
        assert starts == []  # gemini never announced the call
    else:
        assert len(starts) == 1 and starts[0]["tool_input"] == "touch asked.txt"


def test_a_wrong_option_is_refused(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/ask"})
        events = events_until(conn, lambda e: e["type"] == "permission_request")
        rid = events[-1]["request"]["request_id"]
        for option, behavior in (
            ("nope", "allow"),
            ("reject-once", "allow"),
            ("allow-once", "deny"),
        ):
            answer = conn.request(
                "host.respond", {"request_id": rid, "behavior": behavior, "option_id": option}
            )
            assert not answer["success"] and answer["code"] == "invalid_payload"
        assert conn.request("host.respond", {"request_id": rid, "behavior": "allow"})["success"]
        events_until(conn, is_result)


def test_the_cli_shows_the_options_and_picks_one(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [PY, "-m", "agenthost", *args, "--home", str(host.home)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    with attached(host) as conn:
        conn.request("host.send", {"input": "/ask"})
        events = events_until(conn, lambda e: e["type"] == "permission_request")
        rid = events[-1]["request"]["request_id"]
        listed = cli("pending", "acp")
        assert "allow-always(allow_always)" in listed.stdout, listed
        wrong = cli("respond", "acp", rid, "deny", "--option", "allow-always")
        assert wrong.returncode != 0 and "allow_always" in wrong.stderr
        done = cli("respond", "acp", rid, "allow", "--option", "allow-always")
        assert done.returncode == 0, done.stderr
        events = events_until(conn, is_result)
    picked = [e for e in events if e["type"] == "permission_response"]
    assert picked[0]["decision"]["behavior"] == "allow"


def test_cancel_mid_stream(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/slow"})
        events_until(conn, lambda e: e["type"] == "output" and "Thinking about it" in e["data"])
        answer = conn.request("host.interrupt")
        assert answer["success"] and answer["payload"]["sent"] is True
        events = events_until(conn, is_result)
    assert events[-1]["result"]["stop_reason"] == "cancelled"
    assert events[-1]["result"]["interrupted"] is True
    assert chat(events) == [
        {**chat(events)[0], "content": "Thinking about it", "aborted": True},
        {**chat(events)[1], "content": "turn interrupted", "interrupted": True},
    ]
    host.wait_state("idle")
    # the session goes on
    assert chat(turn(host, "again"))[0]["content"] == "You said: again"


def test_cancel_answers_every_open_question(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home, script="gemini")
    with attached(host) as conn:
        conn.request("host.send", {"input": "/storm 3"})
        wait_for(lambda: host.agent()["pending_requests"] == 3, what="three questions")
        assert conn.request("host.interrupt")["success"]
        # withdrawn with the interrupt itself, not when the agent next prints
        assert conn.request("host.pending")["payload"]["requests"] == []
        events = events_until(conn, is_result)
    decided = [e["decision"]["behavior"] for e in events if e["type"] == "permission_response"]
    assert decided == ["cancelled"] * 3
    said = [e["content"] for e in chat(events)]
    assert "answers: cancelled,cancelled,cancelled" in said  # gemini got every answer
    assert events[-1]["result"]["stop_reason"] == "cancelled"
    agent = host.wait_state("idle")
    assert agent["pending_requests"] == 0


def test_a_permission_storm(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    count = 60
    with attached(host) as conn:
        conn.request("host.send", {"input": f"/storm {count}"})
        wait_for(lambda: host.agent()["pending_requests"] == count, what="every question")
        pending = conn.request("host.pending")["payload"]["requests"]
        assert len({p["request_id"] for p in pending}) == count
        for n, request in enumerate(pending):
            behavior = "allow" if n % 2 == 0 else "deny"
            answer = {"request_id": request["request_id"], "behavior": behavior}
            assert conn.request("host.respond", answer)["success"]
        events = events_until(conn, is_result)
    (said,) = [e["content"] for e in chat(events) if e["content"].startswith("answers: ")]
    assert said == "answers: " + ",".join(
        "allow-once" if n % 2 == 0 else "reject-once" for n in range(count)
    )
    assert host.wait_state("idle")["pending_requests"] == 0


@pytest.mark.parametrize("script", ["default", "gemini", "claude"])
def test_resume_after_a_host_restart(home: Path, host_factory: HostFactory, script: str) -> None:
    host = acp_host(host_factory, home, script=script)
    sid = host.agent()["session_id"]
    turn(host, "first")
    with host.client() as client:
        client.stop()
    host.wait_exit()
    again = acp_host(host_factory, home, "acp", "--resume", sid, script=script)
    assert again.agent()["session_id"] == sid
    assert not [e for e in history(again) if e.get("is_error")]
    turn(again, "second")
    said = [e["content"] for e in history(again) if e["role"] == "assistant"]
    assert said == ["You said: first", "You said: second"]  # the replay is not recorded
    assert [e["content"] for e in history(again) if e["role"] == "user"] == ["first", "second"]
    assert [e for e in history(again) if e["role"] == "tool"] == []  # nor its tool call


def test_resume_of_an_unknown_session_starts_a_new_one(
    home: Path, host_factory: HostFactory
) -> None:
    host = acp_host(host_factory, home, "acp", "--resume", "sess-gone")
    agent = host.agent()
    assert agent["session_id"] != "sess-gone" and agent["session_id"].startswith("sess-")
    assert "a new session starts" in agent["last_error"]
    assert chat(turn(host, "hi"))[0]["content"] == "You said: hi"


def test_the_agent_dying_mid_turn(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/die"})
        events = events_until(conn, is_state("error"))
    assert [e for e in events if e["type"] == "error"]
    agent = host.agent()
    assert agent["state"] == "error" and agent["exit_code"] == 3
    assert host.alive()
    assert [e["content"] for e in history(host) if e["role"] == "user"] == ["/die"]


def test_malformed_output(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    events = turn(host, "/garbage")
    errors = [e["error"] for e in events if e["type"] == "error"]
    expected = [
        "not JSON: this is not json",
        "not a JSON object",
        "did not make (id 99999)",
        "method is not a string",
        "params is not an object",
        "another session (someone-else)",
        "without a toolCallId",
        "without an update object",
        "x/unknown_method, which agenthost does not implement",
    ]
    for needle, error in zip(expected, errors, strict=True):
        assert needle in error
    said = [e["content"] for e in chat(events)]
    assert said == ["unknown method answered -32601"]
    assert events[-1]["result"]["stop_reason"] == "end_turn"
    assert host.wait_state("idle")["pid"] > 0


def test_an_api_error_and_a_refusal(home: Path, host_factory: HostFactory) -> None:
    host = acp_host(host_factory, home)
    events = turn(host, "/error")
    assert "API Error: 500" in [e for e in events if e["type"] == "error"][0]["error"]
    entries = chat(events)
    assert entries[0]["content"] == "Partial"
    assert entries[-1]["is_error"] is True and "API Error: 500" in entries[-1]["content"]
    assert events[-1]["result"]["is_error"] is True
    host.wait_state("idle")
    events = turn(host, "/refuse")
    assert events[-1]["result"]["stop_reason"] == "refusal"
    assert "refused" in chat(events)[-1]["content"]
    assert host.wait_state("idle")["turns"] == 2


def test_messages_sent_during_a_turn_get_their_own_turns(
    home: Path, host_factory: HostFactory
) -> None:
    host = acp_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/slow"})
        conn.request("host.send", {"input": "queued one"})
        conn.request("host.send", {"input": "queued two"})
        events_until(conn, lambda e: e["type"] == "output" and "Thinking about it" in e["data"])
        conn.request("host.interrupt")
        events = events_until(conn, is_result)
        events += events_until(conn, is_result)
        events += events_until(conn, is_result)
    results = [e["result"]["stop_reason"] for e in events if is_result(e)]
    assert results == ["cancelled", "end_turn", "end_turn"]
    said = [e["content"] for e in chat(events) if not e.get("interrupted")]
    assert said[1:] == ["You said: queued one", "You said: queued two"]
    host.wait_state("idle")


def test_authentication(home: Path, host_factory: HostFactory) -> None:
    worktree = home / "wt"
    worktree.mkdir()
    command = [PY, "-u", str(ACP_AGENT), "--auth", "key", "--state", str(home / "s")]
    args = ("--agent", "acp", "--cwd", str(worktree))
    host = host_factory("noauth", *args, command=command)
    agent = host.wait_state("idle")
    assert "auth=METHOD" in agent["last_error"] and "key" in agent["last_error"]
    host = host_factory("auth", *args, "--agent-opt", "auth=key", command=command)
    host.wait_state("idle")
    assert host.agent()["session_id"].startswith("sess-")


# --- an agent built on the official ACP SDK: our messages checked by its models ---------


def sdk_host(host_factory: HostFactory, home: Path, *args: str) -> tuple[HostProc, Path]:
    worktree = home / "wt"
    worktree.mkdir()
    command = [PY, "-u", str(SDK_AGENT)]
    host = host_factory("sdk", "--agent", "acp", "--cwd", str(worktree), *args, command=command)
    host.wait_state("idle")
    return host, worktree


def test_an_sdk_agent_text_turn_mode_and_file_read(home: Path, host_factory: HostFactory) -> None:
    host, worktree = sdk_host(host_factory, home, "--agent-opt", "mode=ask")
    agent = host.agent()
    assert (agent["session_id"], agent["agent_name"]) == ("sdk-session", "sdk-agent")
    assert agent["modes"] == {"current": "ask", "available": ["default", "ask"]}
    events = turn(host, "hello")
    (said,) = [e["content"] for e in chat(events)]
    assert said == "caps: fs.read=True fs.write=True terminal=True" + "echo: hello"
    assert events[-1]["result"]["usage"] == {
        "input_tokens": 3,
        "output_tokens": 4,
        "thought_tokens": 1,
        "total_tokens": 7,
    }
    (worktree / "f.txt").write_text("from the worktree")
    assert chat(turn(host, f"/read {worktree}/f.txt"))[0]["content"] == "read: from the worktree"
    assert not [e for e in history(host) if e.get("is_error")]


@pytest.mark.parametrize(
    ("behavior", "option", "picked", "result"),
    [
        ("allow", None, "ok", ("{wt}/notes.txt: +1 -0", False)),
        ("allow", "ok-all", "ok-all", ("{wt}/notes.txt: +1 -0", False)),
        ("deny", None, "no", ("the user said no", True)),
    ],
)
def test_an_sdk_agent_permission_round_trip(
    home: Path,
    host_factory: HostFactory,
    behavior: str,
    option: str | None,
    picked: str,
    result: tuple[str, bool],
) -> None:
    host, worktree = sdk_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/ask"})
        events = events_until(conn, lambda e: e["type"] == "permission_request")
        request = events[-1]["request"]
        assert (request["tool_name"], request["tool_use_id"]) == ("Edit notes.txt", "edit-1")
        assert request["tool_input"] == f"{worktree}/notes.txt"
        answer: dict[str, Any] = {"request_id": request["request_id"], "behavior": behavior}
        if option:
            answer["option_id"] = option
        assert conn.request("host.respond", answer)["success"]
        events = events_until(conn, is_result)
    tool_results = [(e["tool_result"], e["is_error"]) for e in chat(events) if "tool_result" in e]
    assert tool_results == [(result[0].format(wt=worktree), result[1])]
    assert chat(events)[-1]["content"] == f"outcome: {picked}"


def test_an_sdk_agent_cancelled(home: Path, host_factory: HostFactory) -> None:
    host, _ = sdk_host(host_factory, home)
    with attached(host) as conn:
        conn.request("host.send", {"input": "/slow"})
        events_until(conn, lambda e: e["type"] == "output" and "waiting" in e["data"])
        conn.request("host.interrupt")
        events = events_until(conn, is_result)
    assert events[-1]["result"]["stop_reason"] == "cancelled"
    assert [e.get("aborted") for e in chat(events)][:1] == [True]
    assert host.wait_state("idle")["pid"] > 0
