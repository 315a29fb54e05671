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
    """Feed a transcript's stdout lines, and its user messages as sends (under the
    uuid the recording gave them, as the adapter's own sends carry one)."""
    adapter = adapter or ClaudeAdapter()
    events: list[AdapterEvent] = []
    for direction, line in transcript(name):
        if direction == "out":
            parsed = adapter.parse_line(line)
            assert parsed and parsed[0] == Output(line)  # the raw line always comes first
            events += parsed
        elif (message := json.loads(line)).get("type") == "user":
            adapter.parser.expect(message.get("uuid"))
            events.append(StateChange(AgentState.RUNNING))
    return events


def failures(events: list[AdapterEvent]) -> list[tuple[str, int | None]]:
    """The failed turns: error notes, each checked against its history entry."""
    notes = [e for e in events if isinstance(e, ErrorNote)]
    entries = [c for c in chats(events) if c["role"] == "assistant" and c.get("is_error")]
    assert [(n.message, n.http_status) for n in notes] == [
        (c["content"], c.get("http_status")) for c in entries
    ]
    return [(n.message, n.http_status) for n in notes]


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
            # an error note only for a failed turn, which history records too
            assert len(failures(events)) <= 1, (path.name, line[:200])


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
    # shown as interrupted, not as failed
    assert interrupted["interrupted"] is True and "interrupted" not in after
    assert failures(events) == []
    marks = [c for c in chats(events) if c.get("interrupted")]
    assert marks == [{"role": "assistant", "content": "turn interrupted", "interrupted": True}]
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


def test_api_error_is_an_error_note_and_a_history_entry() -> None:
    events = replay("api_error")
    results = turn_results(events)  # two questions: a 500, then a 529 (overloaded)
    assert [r["api_error_status"] for r in results] == [500, 529]
    for result in results:
        assert result["is_error"] is True and result["subtype"] == "success"
        assert result["terminal_reason"] == "api_error" and "interrupted" not in result
    # each failure once (the CLI's message, not again for the result), with its status
    (first, status_1), (second, status_2) = failures(events)
    assert first.startswith("API Error: 500 Internal server error") and status_1 == 500
    assert second.startswith("API Error: 529 Overloaded") and status_2 == 529
    # the error comes before the result that ends its turn
    kinds = [type(e).__name__ for e in events if isinstance(e, ErrorNote | TurnResult)]
    assert kinds == ["ErrorNote", "TurnResult"] * 2
    assert states(events) == [AgentState.RUNNING, AgentState.IDLE] * 2


@pytest.mark.parametrize("name", ["interrupt_during_permission", "permission_deny_interrupt"])
def test_stopped_tool_turns_are_interrupted_not_failed(name: str) -> None:
    events = replay(name)
    (result,) = turn_results(events)[:1]
    assert result["terminal_reason"] == "aborted_tools" and result["interrupted"] is True
    assert failures(events) == []


@pytest.mark.parametrize("name", ["message_during_tool", "message_during_permission"])
def test_message_folded_into_the_running_turn_ends_it_idle(name: str) -> None:
    # the second message arrived while a tool ran (or a permission question was open):
    # Claude Code answered both with one result, whose user_message_uuids lists both
    events = replay(name)
    (result,) = turn_results(events)
    assert states(events)[-1] is AgentState.IDLE
    last_result = max(i for i, e in enumerate(events) if isinstance(e, TurnResult))
    assert events[last_result + 2] == StateChange(AgentState.IDLE)
    # the CLI's echoes of the two messages are not history: the host recorded the sends
    assert [c for c in chats(events) if c["role"] == "user"] == []
    assert chats(events)[-1]["content"].endswith("read your second message.")


def test_queued_message_survives_an_interrupt() -> None:
    # interrupted while a second message waited in the CLI's queue: that one still
    # runs, so the agent is idle only after its result
    events = replay("interrupt_with_queued_message")
    interrupted, second = turn_results(events)
    assert interrupted["interrupted"] is True and second["subtype"] == "success"
    assert states(events) == [AgentState.RUNNING, AgentState.IDLE]
    idles = [i for i, e in enumerate(events) if e == StateChange(AgentState.IDLE)]
    assert idles == [max(i for i, e in enumerate(events) if isinstance(e, TurnResult)) + 2]


def test_without_uuids_a_folded_message_cannot_be_seen() -> None:
    # an older CLI (or no --replay-user-messages): results name no message, so the
    # adapter counts one result per send and a folded message keeps it running. This
    # is why the adapter runs the CLI with --replay-user-messages.
    events = replay("message_during_tool_no_replay")
    assert len(turn_results(events)) == 1
    assert states(events) == [AgentState.RUNNING]


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
    # each message is named, for the results to say which they answered
    (again, _) = adapter.send("x")
    assert isinstance(again, Write)
    assert len({message["uuid"], json.loads(again.data)["uuid"]}) == 2


STDIO = ("--permission-prompt-tool", "stdio")
REPLAY = "--replay-user-messages"
BYPASS = ("--permission-mode", "bypassPermissions")


@pytest.mark.parametrize(
    ("params", "resume", "user", "expected_tail"),
    [
        ({}, None, [], [REPLAY, *STDIO]),
        ({}, "abc", ["--model", "m"], [REPLAY, "--resume", "abc", *STDIO, "--model", "m"]),
        ({"permission_prompt": "off"}, None, [], [REPLAY]),
        (
            {},
            None,
            ["--permission-prompt-tool", "mcp__x"],
            [REPLAY, "--permission-prompt-tool", "mcp__x"],
        ),
        ({}, None, ["--dangerously-skip-permissions"], [REPLAY, "--dangerously-skip-permissions"]),
        ({}, None, [*BYPASS], [REPLAY, *BYPASS]),
        ({}, None, ["--permission-mode", "plan"], [REPLAY, *STDIO, "--permission-mode", "plan"]),
        ({}, None, [REPLAY], [*STDIO, REPLAY]),  # given by the user: not twice
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


def test_inside_agenthosts_sandbox_its_own_is_off_for_the_run() -> None:
    import json

    params = ClaudeAdapter.inside_sandbox({"permission_prompt": "stdio"})
    assert params == {"permission_prompt": "stdio", "own_sandbox": "off"}
    argv = ClaudeAdapter(AdapterOptions(params=params)).build_command(["--model", "x"])
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert settings == {"sandbox": {"enabled": False}}
    assert argv[-2:] == ["--model", "x"]  # what the user gave comes last, unchanged
    assert "--permission-prompt-tool" in argv  # its permissions unchanged
    # outside agenthost's sandbox nothing is added; garbage is a usage error
    assert "--settings" not in ClaudeAdapter(AdapterOptions()).build_command([])
    for bad in ["on", "", "OFF ", "false"]:
        with pytest.raises(ConfigError, match="own_sandbox"):
            ClaudeAdapter(AdapterOptions(params={"own_sandbox": bad})).build_command([])
