"""The real Claude Code and Codex TUIs in a real PTY, set up by hook_setup, reporting to a
HookServer: the host's view of a TUI (states, permission requests, answers) end to end,
without the host (tests/e2e/ptydrive.py drives the terminal).

Claude Code: a prompt typed, a tool that needs permission -> the PermissionRequest hook
-> the test allows or denies through the hook -> the tool runs or the model gets the
denial; Stop -> idle. Codex: a turn completes -> notify -> idle.
Skipped when a CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_env import ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.openai import FakeOpenAI
from fakes.openai import text as codex_text
from ptydrive import PtyProcess

from agenthost.agents.base import AdapterEvent, PermissionAsk, StateChange
from agenthost.host.hooks import HookServer
from agenthost.names import AgentState
from agenthost.terminal.hookevents import DECIDING_KINDS, HookMapper, decision_json
from agenthost.terminal.hooksetup import hook_setup

TIMEOUT = 60.0
WRITE_COMMAND = "touch marker.txt && echo hello"  # not read-only: the CLI asks


class HookHost:
    """A HookServer on an event loop of its own thread, doing what the host will do
    with hooks: map them to events (kept in :attr:`events`) and answer permission
    requests with :attr:`answer` (``"allow"``, ``"deny"``, or None: no answer)."""

    def __init__(self, directory: Path) -> None:
        self.token = secrets.token_urlsafe(24)
        self.path = directory / "hooks.sock"
        self.mapper = HookMapper()
        self.events: list[AdapterEvent] = []
        self.kinds: list[str] = []
        self.answer: str | None = None
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._server = HookServer(self.path, self.token, self._on_hook)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(10)

    async def _on_hook(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        request_id = secrets.token_hex(8) if kind in DECIDING_KINDS else None
        events = self.mapper.events(kind, payload, request_id)
        with self._cond:
            self.kinds.append(kind)
            self.events += events
            self._cond.notify_all()
        ask = next((e for e in events if isinstance(e, PermissionAsk)), None)
        if ask is None or self.answer is None:
            return None
        self.mapper.answered(ask.request_id)
        return decision_json(ask, self.answer == "allow", "the host refused: no files")

    def wait(self, what: str, predicate: Any, timeout: float = TIMEOUT) -> None:
        """Wait until ``predicate()`` holds (checked at every hook)."""
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise AssertionError(f"timed out waiting for {what}; hooks: {self.kinds}")

    def state(self) -> AgentState | None:
        """The last state the hooks reported."""
        states = [e.state for e in self.events if isinstance(e, StateChange)]
        return states[-1] if states else None

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def hooks() -> Iterator[HookHost]:
    directory = Path(tempfile.mkdtemp(prefix="hooks-", dir="/tmp"))  # short: a socket
    directory.chmod(0o700)
    host = HookHost(directory)
    try:
        yield host
    finally:
        host.close()
        directory.rmdir()


def first_run_done(dirs: ClaudeDirs, api_key: str) -> None:
    """The state Claude Code keeps after its first-run screens (onboarding, theme, the
    API key's approval, the folder's trust), so the TUI opens at its prompt."""
    (dirs.home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
                "projects": {str(dirs.worktree): {"hasTrustDialogAccepted": True}},
            }
        )
    )


def start_claude(claude: Path, dirs: ClaudeDirs, url: str, hooks: HookHost) -> PtyProcess:
    env = claude_env(url, dirs)
    first_run_done(dirs, env["ANTHROPIC_API_KEY"])
    argv, env = hook_setup(
        "claude",
        [str(claude), "--model", "claude-sonnet-4-5"],
        env,
        str(hooks.path),
        hooks.token,
        [sys.executable],
    )
    return PtyProcess(argv, env, dirs.worktree)


@pytest.mark.parametrize("answer", ["allow", "deny"])
def test_claude_tui_permission_through_the_hook(hooks: HookHost, answer: str) -> None:
    claude = require_cli("claude")
    hooks.answer = answer
    turns = [
        tool_use("Bash", {"command": WRITE_COMMAND, "description": "Make a marker"}),
        text("Done."),
    ]
    with temp_dirs() as dirs, FakeAnthropic(turns) as server:
        with start_claude(claude, dirs, server.url, hooks) as tui:
            hooks.wait("SessionStart", lambda: hooks.state() is AgentState.IDLE)
            tui.wait_for("for shortcuts", TIMEOUT)
            tui.type_line("Please make a marker file")
            hooks.wait("the permission request", lambda: "PermissionRequest" in hooks.kinds)
            ask = next(e for e in hooks.events if isinstance(e, PermissionAsk))
            assert ask.input["command"] == WRITE_COMMAND
            assert ask.tool_use_id and ask.tool_use_id.startswith("toolu_")
            hooks.wait("Stop", lambda: "Stop" in hooks.kinds)
            assert hooks.state() is AgentState.IDLE
            tui.wait_for("Done.", TIMEOUT)
        (call, follow_up) = server.turn_requests()[:2]
        result = follow_up.body["messages"][-1]["content"][0]
        assert result["type"] == "tool_result"
        marker = (dirs.worktree / "marker.txt").exists()
        if answer == "allow":
            assert marker and result["is_error"] is False
            assert "PostToolUse" in hooks.kinds
        else:
            assert not marker and result["is_error"] is True
            content = result["content"]
            content = content if isinstance(content, str) else content[0]["text"]
            assert content.startswith("the host refused: no files")


def test_claude_tui_no_answer_leaves_the_dialog_to_the_person(hooks: HookHost) -> None:
    """The hook has no answer: the TUI's own dialog decides; "No" there withdraws the
    request (the CLI kills the waiting hook) and the agent is idle."""
    claude = require_cli("claude")
    turns = [tool_use("Bash", {"command": WRITE_COMMAND, "description": "Make a marker"})]
    hooks.answer = None
    waiting: list[str] = []

    async def never(kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        events = hooks.mapper.events(kind, payload, kind)
        with hooks._cond:
            hooks.kinds.append(kind)
            hooks.events += events
            hooks._cond.notify_all()
        if kind in DECIDING_KINDS:
            waiting.append(kind)
            try:
                await asyncio.Event().wait()  # a person who never answers
            except asyncio.CancelledError:
                withdrawn = hooks.mapper.withdrawn(kind)
                with hooks._cond:
                    hooks.events += withdrawn
                    hooks.kinds.append("withdrawn")
                    hooks._cond.notify_all()
                raise
        return None

    hooks._server._on_hook = never
    with temp_dirs() as dirs, FakeAnthropic(turns) as server:
        with start_claude(claude, dirs, server.url, hooks) as tui:
            tui.wait_for("for shortcuts", TIMEOUT)
            tui.type_line("Please make a marker file")
            hooks.wait("the permission request", lambda: bool(waiting))
            tui.wait_for("Do you want to proceed", TIMEOUT)
            # "No" in the TUI's dialog, typed again until it took: the dialog may be
            # drawn a moment before it reads keys
            for _ in range(10):
                tui.write(b"3")
                try:
                    hooks.wait("the withdrawal", lambda: "withdrawn" in hooks.kinds, 3)
                    break
                except AssertionError:
                    continue
            hooks.wait("the withdrawal", lambda: "withdrawn" in hooks.kinds)
            assert hooks.state() is AgentState.IDLE
        assert not (dirs.worktree / "marker.txt").exists()


def test_codex_tui_notify_turn_complete(hooks: HookHost) -> None:
    codex = require_cli("codex")
    with FakeOpenAI([codex_text("Hello from the fake model.")]) as server:
        env = CodexEnv.create(server.url)
        try:
            with env.config_path.open("a") as config:  # the folder's trust screen
                config.write(f'\n[projects."{env.workdir}"]\ntrust_level = "trusted"\n')
            argv, child_env = hook_setup(
                "codex", [str(codex)], env.env, str(hooks.path), hooks.token, [sys.executable]
            )
            with PtyProcess(argv, child_env, env.workdir) as tui:
                tui.wait_for("for shortcuts", TIMEOUT)
                tui.type_line("Say hello")
                hooks.wait("notify", lambda: hooks.state() is AgentState.IDLE)
                tui.wait_for("Hello from the fake model.", TIMEOUT)
            infos = [e for e in hooks.events if type(e).__name__ == "InfoUpdate"]
            assert infos and infos[0].fields["session_id"]  # type: ignore[attr-defined]
        finally:
            env.cleanup()
