"""The Claude Code adapter, fed the stdout of real CLI runs (tests/fixtures/claude).

The fixtures are transcripts recorded from the real ``claude`` CLI against the fake
model API (tests/e2e/record_claude.py). Replaying their stdout lines through the
adapter checks the parser against what the CLI really prints, without the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenthost.agents import make_adapter
from agenthost.agents.base import (
    AdapterEvent,
    AdapterOptions,
    Chat,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    Write,
)
from agenthost.agents.claude import ClaudeAdapter
from agenthost.errors import ConfigError
from agenthost.protocol import AgentState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"


def transcript(name: str) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]
    return [(r["dir"], r["line"]) for r in rows]


def replay(name: str, adapter: ClaudeAdapter | None = None) -> list[AdapterEvent]:
    """Feed a transcript's stdout lines, and its user messages as sends."""
    adapter = adapter or ClaudeAdapter()
    events: list[AdapterEvent] = []
    for direction, line in transcript(name):
        if direction == "out":
            parsed = adapter.parse_line(line)
            assert parsed and parsed[0] == Output(line)  # the raw line always comes first
            events += parsed
        elif json.loads(line).get("type") == "user":
            events += adapter.on_send("(replayed)")
    return events


def chats(events: list[AdapterEvent]) -> list[dict[str, Any]]:
    return [e.entry for e in events if isinstance(e, Chat)]


def states(events: list[AdapterEvent]) -> list[AgentState]:
    """State changes, repeats folded (the host publishes a state only when it changes)."""
    out: list[AgentState] = []
    for e in events:
        if isinstance(e, StateChange) and (not out or out[-1] is not e.state):
            out.append(e.state)
    return out


def turn_results(events: list[AdapterEvent]) -> list[dict[str, Any]]:
    return [e.result for e in events if isinstance(e, TurnResult)]


def test_every_fixture_parses_without_errors_for_json_lines() -> None:
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for direction, line in transcript(path.stem):
            if direction != "out":
                continue
            events = ClaudeAdapter().parse_line(line)
            notes = [e for e in events if isinstance(e, ErrorNote)]
            assert not notes, (path.name, line[:200], notes)


def test_text_turn() -> None:
    events = replay("text_turn")
    assert chats(events) == [{"role": "assistant", "content": "Hello from the fake API."}]
    assert states(events) == [AgentState.RUNNING, AgentState.IDLE]
    (result,) = [e.result for e in events if isinstance(e, TurnResult)]
    assert result["subtype"] == "success" and result["terminal_reason"] == "completed"
    info = {k: v for e in events if isinstance(e, InfoUpdate) for k, v in e.fields.items()}
    assert info["model"] == "claude-sonnet-4-5" and info["cost_usd"] > 0
    assert info["session_id"] == result["session_id"] and info["turns"] == 1


def test_tool_turn_links_call_and_result() -> None:
    entries = chats(replay("tool_turn"))
    call = next(e for e in entries if e.get("tool_name") == "Bash" and "tool_result" not in e)
    done = next(e for e in entries if "tool_result" in e)
    assert call["tool_input"] == "echo hello"
    assert done["tool_use_id"] == call["tool_use_id"] and done["tool_name"] == "Bash"
    assert done["tool_result"] == "hello" and done["is_error"] is False


def test_failing_tool_is_an_error_result() -> None:
    done = next(e for e in chats(replay("tool_error")) if "tool_result" in e)
    assert done["is_error"] is True and done["tool_result"].startswith("Exit code 3")


def test_permission_request_becomes_an_ask() -> None:
    events = replay("permission_allow")
    (ask,) = [e for e in events if isinstance(e, PermissionAsk)]
    assert ask.tool_name == "Bash" and ask.tool_input == "touch marker.txt && echo hello"
    assert ask.input["command"] == "touch marker.txt && echo hello"
    assert ask.tool_use_id and ask.tool_use_id.startswith("toolu_")
    # the answer the adapter writes is what the CLI accepted in the recording
    adapter = ClaudeAdapter()
    answer = json.loads(adapter.encode_permission_response(ask, True, None, None))
    assert answer == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": ask.request_id,
            "response": {"behavior": "allow", "updatedInput": ask.input},
        },
    }
    denied = json.loads(adapter.encode_permission_response(ask, False, "not now", None))
    assert denied["response"]["response"] == {"behavior": "deny", "message": "not now"}


def test_interrupt_during_permission_withdraws_the_question() -> None:
    events = replay("interrupt_during_permission")
    (ask,) = [e for e in events if isinstance(e, PermissionAsk)]
    (gone,) = [e for e in events if isinstance(e, PermissionDecided)]
    assert gone.request_id == ask.request_id and gone.behavior == "cancelled"


def test_interrupted_turn() -> None:
    events = replay("interrupt")
    aborted = [e for e in chats(events) if e.get("aborted")]
    assert aborted and aborted[0]["role"] == "assistant"
    interrupted, after = turn_results(events)  # the recording goes on with a new message
    assert interrupted["is_error"] is True
    assert interrupted["terminal_reason"] == "aborted_streaming"
    assert after["subtype"] == "success" and after["is_error"] is False
    assert states(events) == [
        AgentState.RUNNING,
        AgentState.IDLE,
        AgentState.RUNNING,
        AgentState.IDLE,
    ]
    adapter = ClaudeAdapter()
    request = json.loads(adapter.encode_interrupt())
    assert request["type"] == "control_request"
    assert request["request"] == {"subtype": "interrupt"} and request["request_id"]


def test_api_error_sets_last_error() -> None:
    events = replay("api_error")
    failures = turn_results(events)  # two questions: a 500, then a 529 (overloaded)
    assert [r["api_error_status"] for r in failures] == [500, 529]
    for result in failures:
        assert result["is_error"] is True and result["subtype"] == "success"
        assert result["terminal_reason"] == "api_error"
    info = {k: v for e in events if isinstance(e, InfoUpdate) for k, v in e.fields.items()}
    assert info["last_error"].startswith("API Error: 529")  # the latest one


def test_message_during_turn_stays_running_until_the_last_result() -> None:
    events = replay("message_during_turn")
    assert len(turn_results(events)) == 2
    # the first result does not make it idle: a second message is still queued
    assert states(events) == [AgentState.RUNNING, AgentState.IDLE]
    idles = [i for i, e in enumerate(events) if e == StateChange(AgentState.IDLE)]
    last_result = max(i for i, e in enumerate(events) if isinstance(e, TurnResult))
    assert idles == [last_result + 2]  # result, info update, idle


def test_partial_messages_are_raw_output_only() -> None:
    adapter = ClaudeAdapter()
    for direction, line in transcript("partial_messages"):
        if direction == "out" and json.loads(line).get("type") == "stream_event":
            assert adapter.parse_line(line) == [Output(line)]


def test_send_writes_one_json_user_message_line() -> None:
    adapter = ClaudeAdapter()
    (write, running) = adapter.send('two\nlines "and" quotes')
    assert isinstance(write, Write) and running == StateChange(AgentState.RUNNING)
    assert write.data.endswith(b"\n") and write.data.count(b"\n") == 1
    message = json.loads(write.data)
    assert message["type"] == "user" and message["message"]["role"] == "user"
    assert message["message"]["content"] == [{"type": "text", "text": 'two\nlines "and" quotes'}]


STDIO = ("--permission-prompt-tool", "stdio")
BYPASS = ("--permission-mode", "bypassPermissions")


@pytest.mark.parametrize(
    ("params", "resume", "user", "expected_tail"),
    [
        ({}, None, [], [*STDIO]),
        ({}, "abc", ["--model", "m"], ["--resume", "abc", *STDIO, "--model", "m"]),
        ({"permission_prompt": "off"}, None, [], []),
        ({}, None, ["--permission-prompt-tool", "mcp__x"], ["--permission-prompt-tool", "mcp__x"]),
        ({}, None, ["--dangerously-skip-permissions"], ["--dangerously-skip-permissions"]),
        ({}, None, [*BYPASS], [*BYPASS]),
        ({}, None, ["--permission-mode", "plan"], [*STDIO, "--permission-mode", "plan"]),
    ],
)
def test_command_line(
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, str],
    resume: str | None,
    user: list[str],
    expected_tail: list[str],
) -> None:
    monkeypatch.setenv("AGENTHOST_CLAUDE_BIN", "/opt/claude")
    adapter = make_adapter("claude", AdapterOptions(resume=resume, params=params))
    argv = adapter.build_command(user)
    head = ["/opt/claude", "-p", "--input-format", "stream-json"]
    assert argv[:7] == [*head, "--output-format", "stream-json", "--verbose"]
    assert argv[7:] == expected_tail


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(ConfigError, match="permission_prompt"):
        ClaudeAdapter(AdapterOptions(params={"permission_prompt": "maybe"})).build_command([])
    with pytest.raises(ConfigError, match="unknown option"):
        ClaudeAdapter(AdapterOptions(params={"colour": "blue"}))
