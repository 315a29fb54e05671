"""Hook payloads -> adapter events (agenthost/terminal/hookevents.py), and the setup that
makes the CLIs send them (agenthost/terminal/hooksetup.py). Payloads recorded from the
real CLIs (tests/fixtures/hooks/, CLAUDE_FINDINGS.md "Hooks in the TUI")."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from agenthost.agents.base import (
    InfoUpdate,
    PermissionAsk,
    PermissionDecided,
    StateChange,
)
from agenthost.errors import ConfigError, ProtocolError
from agenthost.names import AgentState
from agenthost.terminal.hookevents import HookMapper, decision_json
from agenthost.terminal.hooksetup import (
    SOCKET_ENV,
    TOKEN_ENV,
    claude_settings,
    detect_program,
    hook_setup,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hooks"


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def claude() -> dict[str, dict[str, Any]]:
    return {r["kind"]: r["payload"] for r in records("claude_tool_turn.jsonl")}


def states(events: list[Any]) -> list[AgentState]:
    return [e.state for e in events if isinstance(e, StateChange)]


def test_a_recorded_tool_turn() -> None:
    hooks = claude()
    mapper = HookMapper()
    start = mapper.events("SessionStart", hooks["SessionStart"])
    assert InfoUpdate({"model": "claude-sonnet-4-5"}) in start
    assert InfoUpdate({"session_id": hooks["SessionStart"]["session_id"]}) in start
    assert states(start) == [AgentState.IDLE]
    assert states(mapper.events("UserPromptSubmit", hooks["UserPromptSubmit"])) == [
        AgentState.RUNNING
    ]
    mapper.events("PreToolUse", hooks["PreToolUse"])
    asked = mapper.events("PermissionRequest", hooks["PermissionRequest"], "hook-1")
    ask = next(e for e in asked if isinstance(e, PermissionAsk))
    assert ask.request_id == "hook-1"
    assert ask.tool_name == "Bash"
    assert ask.input["command"] == "touch marker.txt && echo hello"
    assert ask.tool_input == "touch marker.txt && echo hello"
    # PermissionRequest carries no tool_use_id: it comes from the PreToolUse before it
    assert ask.tool_use_id == hooks["PreToolUse"]["tool_use_id"]
    assert mapper.open_requests == ["hook-1"]
    assert mapper.events("Notification", hooks["Notification"]) == [
        InfoUpdate({"session_id": hooks["Notification"]["session_id"]})
    ]
    # the hook answered: PostToolUse closes nothing more
    mapper.answered("hook-1")
    done = mapper.events("PostToolUse", hooks["PostToolUse"])
    assert not [e for e in done if isinstance(e, PermissionDecided)]
    assert states(mapper.events("Stop", hooks["Stop"])) == [AgentState.IDLE]


def test_yes_in_the_terminal_closes_the_ask() -> None:
    hooks = claude()
    mapper = HookMapper()
    mapper.events("PreToolUse", hooks["PreToolUse"])
    mapper.events("PermissionRequest", hooks["PermissionRequest"], "hook-1")
    done = mapper.events("PostToolUse", hooks["PostToolUse"])
    decided = [e for e in done if isinstance(e, PermissionDecided)]
    assert decided == [
        PermissionDecided("hook-1", "allow", actor="terminal", reason="answered in the terminal")
    ]
    assert mapper.open_requests == []


def test_no_in_the_terminal_withdraws_the_ask() -> None:
    hooks = claude()
    mapper = HookMapper()
    mapper.events("PermissionRequest", hooks["PermissionRequest"], "hook-1")
    events = mapper.withdrawn("hook-1")
    assert events[0] == PermissionDecided(
        "hook-1", "cancelled", actor="terminal", reason="the request was withdrawn in the terminal"
    )
    assert states(events) == [AgentState.IDLE]  # Claude Code sends no Stop then
    assert mapper.withdrawn("hook-1") == []  # once


def test_a_new_prompt_or_stop_closes_what_is_open() -> None:
    hooks = claude()
    for closing in ("UserPromptSubmit", "Stop"):
        mapper = HookMapper()
        mapper.events("PermissionRequest", hooks["PermissionRequest"], "hook-1")
        events = mapper.events(closing, hooks[closing])
        assert [e.behavior for e in events if isinstance(e, PermissionDecided)] == ["cancelled"]


def test_status_line_reports_the_cost() -> None:
    payload = {
        "session_id": "s",
        "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
        "cost": {"total_cost_usd": 0.0123, "total_duration_ms": 706},
    }
    assert HookMapper().events("StatusLine", payload)[1] == InfoUpdate(
        {"cost_usd": 0.0123, "model": "claude-sonnet-4-5"}
    )
    assert HookMapper().events("StatusLine", {"cost": {"total_cost_usd": True}}) == []


def test_codex_notify() -> None:
    main, title = records("codex_notify.jsonl")
    mapper = HookMapper()
    payload = json.loads(main["argv"][-1])
    events = mapper.events("notify", payload)
    assert events == [
        InfoUpdate({"session_id": payload["thread-id"]}),
        StateChange(AgentState.IDLE),
    ]
    assert mapper.events("notify", payload) == [StateChange(AgentState.IDLE)]
    # the thread Codex starts to name the task notifies too: not the user's turn
    assert mapper.events("notify", json.loads(title["argv"][-1])) == []
    assert mapper.events("notify", {"type": "something-new"}) == []


def test_decision_json() -> None:
    ask = PermissionAsk("r", "Bash", "x", native={"hook": "PermissionRequest"})
    assert decision_json(ask, True) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }
    deny = decision_json(ask, False, "no files")["hookSpecificOutput"]["decision"]
    assert deny == {"behavior": "deny", "message": "no files"}
    assert decision_json(ask, False)["hookSpecificOutput"]["decision"]["message"]
    with pytest.raises(ProtocolError):
        decision_json(PermissionAsk("r", "Bash", "x"), True)


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("Stop", None),
        ("Stop", []),
        ("Stop", "text"),
        ("NoSuchHook", {}),
        ("", {}),
        ("Stop", {"session_id": 5}),
        ("PreToolUse", {}),
        ("PreToolUse", {"tool_name": ["Bash"]}),
        ("PermissionRequest", {"tool_name": "Bash"}),
        ("PermissionRequest", {"tool_name": "Bash", "tool_input": "ls"}),
        ("PostToolUse", {"tool_input": {}}),
        ("notify", {}),
        ("notify", {"type": 7}),
        ("notify", {"type": "agent-turn-complete", "thread-id": {}}),
    ],
)
def test_garbage_is_a_protocol_error(kind: str, payload: Any) -> None:
    with pytest.raises(ProtocolError):
        HookMapper().events(kind, payload, "r")


def test_a_permission_request_needs_an_id() -> None:
    with pytest.raises(ProtocolError):
        HookMapper().events("PermissionRequest", claude()["PermissionRequest"])


def test_unknown_fields_and_odd_values_are_ignored() -> None:
    mapper = HookMapper()
    assert states(mapper.events("Stop", {"whatever": [1, 2], "stop_hook_active": "?"})) == [
        AgentState.IDLE
    ]
    assert mapper.events("Notification", {"message": "x", "notification_type": None}) == []
    assert mapper.events("SessionEnd", {"reason": "other"}) == []


# --- the setup ---------------------------------------------------------------------------


def test_detect_program() -> None:
    assert detect_program(["/usr/local/bin/claude", "-c"]) == "claude"
    assert detect_program(["codex"]) == "codex"
    assert detect_program(["vim"]) == "none"
    assert detect_program([]) == "none"
    assert detect_program(["vim"], "claude") == "claude"
    assert detect_program(["claude"], "none") == "none"
    with pytest.raises(ConfigError):
        detect_program(["claude"], "gemini")


PY = ["/opt/agenthost venv/bin/python"]


def test_claude_setup() -> None:
    argv, env = hook_setup("claude", ["claude", "--model", "x"], {"A": "1"}, "/s", "tok", PY)
    assert argv[0] == "claude" and argv[1] == "--settings" and argv[3:] == ["--model", "x"]
    settings = json.loads(argv[2])
    assert set(settings["hooks"]) >= {"PermissionRequest", "Stop", "UserPromptSubmit"}
    assert "statusLine" not in settings  # it would replace the user's own
    command = settings["hooks"]["PermissionRequest"][0]["hooks"][0]
    assert shlex.split(command["command"]) == [
        *PY,
        "-P",
        "-m",
        "agenthost.terminal.hook",
        "PermissionRequest",
    ]
    assert command["timeout"] >= 3600  # a person may take their time
    assert env == {"A": "1", SOCKET_ENV: "/s", TOKEN_ENV: "tok"}
    assert "statusLine" in claude_settings(PY, statusline=True)


def test_codex_setup() -> None:
    argv, env = hook_setup("codex", ["codex", "--yolo"], {}, "/s", "tok", ['/p"y\\'])
    assert argv[1] == "-c" and argv[3:] == ["--yolo"]
    key, _, value = argv[2].partition("=")
    assert key == "notify"
    assert json.loads(value) == ['/p"y\\', "-P", "-m", "agenthost.terminal.hook", "notify"]
    assert env[TOKEN_ENV] == "tok"


def test_none_changes_nothing() -> None:
    assert hook_setup("none", ["vim"], {"A": "1"}, "/s", "t", PY) == (["vim"], {"A": "1"})
    with pytest.raises(ConfigError):
        hook_setup("claude", ["claude"], {}, "/s", "", PY)
    with pytest.raises(ConfigError):
        hook_setup("gemini", ["gemini"], {}, "/s", "t", PY)
