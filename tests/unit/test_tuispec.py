"""The spec of a structured agent's own TUI, and back (agenthost/daemon/tuispec.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agenthost.daemon.protocol import RestartPolicy, SpawnSpec
from agenthost.daemon.tuispec import (
    check_kind,
    check_switchable,
    program_for,
    to_structured,
    to_tui,
)
from agenthost.errors import ConfigError

SESSION = "0b7c2a52-6a4e-4a0e-9d3c-1f2e3d4c5b6a"


def spec(agent: str = "claude", command: list[str] | None = None, **fields: Any) -> SpawnSpec:
    return SpawnSpec(
        agent_id="a1",
        agent=agent,
        command=command or [],
        cwd="/work/x",
        env={"ANTHROPIC_API_KEY": "k", "A": "b"},
        project="p",
        sandbox="strict",
        budget_usd=2.5,
        restart=RestartPolicy(policy="on-failure", max_restarts=3),
        **fields,
    )


def test_claude_resumes_in_its_tui_with_everything_else_kept() -> None:
    original = spec(command=["--model", "claude-sonnet-4-5", "--add-dir", "/data"])
    tui = to_tui(original, SESSION, "/opt/bin/claude")
    assert tui.agent == "pty"
    assert tui.command == [
        "/opt/bin/claude",
        "--resume",
        SESSION,
        "--model",
        "claude-sonnet-4-5",
        "--add-dir",
        "/data",
    ]
    assert tui.agent_opts == {"hooks": "claude"}  # whatever the program's name
    assert tui.restart == RestartPolicy()  # never: the daemon returns instead
    assert tui.resume is None
    same = ("agent_id", "cwd", "env", "project", "sandbox", "budget_usd", "task", "linger")
    assert all(getattr(tui, f) == getattr(original, f) for f in same)


@pytest.mark.parametrize(
    "command",
    [
        ["--resume", "other", "--model", "m"],
        ["--resume=other", "--model", "m"],
        ["-r", "other", "--model", "m"],
        ["--continue", "--model", "m"],
        ["-c", "--model", "m"],
        ["--session-id", "x", "--model", "m"],
        ["-p", "--output-format", "json", "--verbose", "--model", "m"],
        ["--permission-prompt-tool", "stdio", "--replay-user-messages", "--model", "m"],
        ["--model", "m", "--resume"],  # a lone --resume at the end (the picker)
        ["--fork-session", "--model", "m", "--input-format=stream-json"],
    ],
)
def test_a_claude_command_keeps_no_session_or_structured_flag(command: list[str]) -> None:
    tui = to_tui(spec(command=command), SESSION)
    assert tui.command == ["claude", "--resume", SESSION, "--model", "m"]


def test_codex_resumes_with_its_options_as_tui_flags() -> None:
    original = spec(
        "codex",
        command=["-c", 'model="o3"', "--config=x=1", "--listen", "stdio://", "--enable", "f"],
        agent_opts={"approval_policy": "untrusted", "model": "gpt-5", "effort": 'hi"gh'},
    )
    tui = to_tui(original, SESSION, "/opt/codex")
    assert tui.command == [
        "/opt/codex",
        "resume",
        "-a",
        "untrusted",
        "-s",
        "workspace-write",  # the adapter's default, not the user's config.toml
        "-m",
        "gpt-5",
        "-c",
        'model_reasoning_effort="hi\\"gh"',  # a TOML string, quotes escaped
        "-c",
        'model="o3"',
        "--config=x=1",
        "--enable",
        "f",
        SESSION,
    ]
    assert tui.agent_opts == {"hooks": "codex"}


def test_back_to_structured_resumes_the_newest_session() -> None:
    original = spec(command=["--model", "m"], setup="npm ci", worktree="")
    back = to_structured(original, "newer")
    assert back.resume == "newer" and back.agent == "claude"
    assert back.command == ["--model", "m"] and back.restart == original.restart
    assert back.setup is None  # the worktree's setup ran once, at its making
    assert to_structured(original.model_copy(update={"resume": "old"}), None).resume == "old"


@pytest.mark.parametrize(
    ("agent", "session", "words"),
    [
        ("demo", SESSION, "a demo agent has no TUI"),
        ("lines", SESSION, "a lines agent has no TUI"),
        ("acp", SESSION, "a acp agent has no TUI"),
        ("pty", SESSION, "a pty agent has no TUI"),
        ("claude", None, "has no session yet"),
        ("claude", "", "has no session yet"),
        ("codex", "--help", "unusable session id"),  # never an option of the CLI
        ("claude", "a\nb", "unusable session id"),
        ("claude", "x" * 201, "unusable session id"),
    ],
)
def test_what_cannot_switch_says_why(agent: str, session: str | None, words: str) -> None:
    original = spec(agent, command=["x"] if agent in ("lines", "pty") else None)
    with pytest.raises(ConfigError, match=words) as caught:
        to_tui(original, session)
    assert caught.value.hint


def test_no_spec_is_no_switch() -> None:
    with pytest.raises(ConfigError, match="no spawn spec"):
        check_kind(None)
    with pytest.raises(ConfigError, match="no spawn spec"):
        check_switchable(None, SESSION)


def test_the_program_is_found_as_the_adapter_finds_it() -> None:
    assert program_for("claude", {}, {}) == "claude"
    assert program_for("claude", {}, {"AGENTHOST_CLAUDE_BIN": "/d/claude"}) == "/d/claude"
    agent_env = {"AGENTHOST_CLAUDE_BIN": "/a/claude"}
    assert program_for("claude", agent_env, {"AGENTHOST_CLAUDE_BIN": "/d/claude"}) == "/a/claude"
    assert program_for("codex", {}, {"AGENTHOST_CLAUDE_BIN": "/d/claude"}) == "codex"
