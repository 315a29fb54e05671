"""Smoke tests: the real Claude Code CLI runs real turns against the fake Anthropic API.

No agenthost here: these prove the e2e infrastructure (the fake server, the hermetic
environment, the stdin/stdout driver) and pin the CLI behaviours the adapter relies on.
Skipped when the CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_env import (
    FAST_RETRY_ENV,
    ClaudeDirs,
    ClaudeProcess,
    allow_response,
    claude_args,
    claude_env,
    deny_response,
    interrupt_request,
    temp_dirs,
    user_message,
)
from clis import PACKAGES, require_cli
from fakes.anthropic import FakeAnthropic, error, slow_text, text, tool_use

JsonDict = dict[str, Any]
TIMEOUT = 15.0
#: Not read-only, so the CLI asks for permission (``echo hello`` alone is auto-allowed).
WRITE_COMMAND = "touch marker.txt && echo hello"


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    """The real CLI, installed from npm on first use; skip (or fail in CI) without it."""
    return require_cli("claude")


@pytest.fixture
def dirs() -> Iterator[ClaudeDirs]:
    """Private HOME, worktree and TMPDIR for one test."""
    with temp_dirs() as created:
        yield created


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    """A fake API with an empty script; tests queue their turns."""
    with FakeAnthropic() as fake:
        yield fake


Start = Callable[..., ClaudeProcess]


@pytest.fixture
def start(claude_bin: Path, dirs: ClaudeDirs, server: FakeAnthropic) -> Iterator[Start]:
    """Start CLI processes against ``server``; each is killed (group-wide) at teardown."""
    started: list[ClaudeProcess] = []

    def factory(env: dict[str, str] | None = None, **args: Any) -> ClaudeProcess:
        process = ClaudeProcess(
            claude_args(claude_bin, **args),
            claude_env(server.url, dirs, extra=env),
            dirs.worktree,
        )
        started.append(process)
        return process

    yield factory
    for process in started:
        process.kill()


def _blocks(message: JsonDict) -> list[JsonDict]:
    content = message["message"]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _of_type(messages: list[JsonDict], type_: str) -> list[JsonDict]:
    return [m for m in messages if m.get("type") == type_]


def _end(process: ClaudeProcess) -> int:
    """Close stdin, drain stdout, return the exit code."""
    process.close_stdin()
    process.read_to_eof(TIMEOUT)
    return process.wait(TIMEOUT)


def test_text_turn(start: Start, server: FakeAnthropic, dirs: ClaudeDirs) -> None:
    server.add(text("Hello from the fake API."))
    p = start()
    p.send(user_message("Say hello."))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    init = seen[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert init["cwd"] == str(dirs.worktree)
    assert init["model"] == "claude-sonnet-4-5"
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assistant = _of_type(seen, "assistant")
    assert [b["text"] for a in assistant for b in _blocks(a)] == ["Hello from the fake API."]
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "Hello from the fake API."
    assert result["session_id"] == init["session_id"]
    assert _end(p) == 0

    (call,) = server.turn_requests()
    assert call.body["stream"] is True
    assert "Say hello." in server.user_texts(call)[-1]
    assert all(r.path.startswith("/v1/messages") for r in server.requests)


def test_tool_turn(start: Start, server: FakeAnthropic) -> None:
    server.add(
        tool_use("Bash", {"command": "echo hello", "description": "Print hello"}),
        text("It printed hello."),
    )
    p = start(allowed_tools=["Bash"])
    p.send(user_message("Run echo hello."))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    (tool_call,) = [
        b for a in _of_type(seen, "assistant") for b in _blocks(a) if b["type"] == "tool_use"
    ]
    assert tool_call["name"] == "Bash"
    assert tool_call["input"]["command"] == "echo hello"
    (tool_result,) = [
        b for u in _of_type(seen, "user") for b in _blocks(u) if b["type"] == "tool_result"
    ]
    assert tool_result["tool_use_id"] == tool_call["id"]
    assert tool_result["content"] == "hello"
    assert tool_result["is_error"] is False
    assert result["subtype"] == "success"
    assert result["result"] == "It printed hello."
    assert result["num_turns"] == 2
    assert _end(p) == 0

    # The tool result went back to the model in the second call.
    assert len(server.turn_requests()) == 2
    (sent,) = server.tool_results()
    assert sent["tool_use_id"] == tool_call["id"]
    assert sent["content"].startswith("hello")


def _ask_permission(start: Start, server: FakeAnthropic) -> tuple[ClaudeProcess, JsonDict]:
    server.add(
        tool_use("Bash", {"command": WRITE_COMMAND, "description": "Create a marker"}),
        text("Done."),
    )
    p = start(permission_prompt_stdio=True)
    p.send(user_message("Create the marker file."))
    request, _ = p.read_type("control_request", timeout=TIMEOUT)
    body = request["request"]
    assert body["subtype"] == "can_use_tool"
    assert body["tool_name"] == "Bash"
    assert body["input"]["command"] == WRITE_COMMAND
    assert body["tool_use_id"].startswith("toolu_")
    assert isinstance(body["permission_suggestions"], list)
    assert isinstance(request["request_id"], str) and request["request_id"]
    return p, request


def test_permission_allow(start: Start, server: FakeAnthropic, dirs: ClaudeDirs) -> None:
    p, request = _ask_permission(start, server)
    p.send(allow_response(request["request_id"], request["request"]["input"]))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    (tool_result,) = [
        b for u in _of_type(seen, "user") for b in _blocks(u) if b["type"] == "tool_result"
    ]
    assert tool_result["tool_use_id"] == request["request"]["tool_use_id"]
    assert tool_result["is_error"] is False
    assert tool_result["content"] == "hello"
    assert (dirs.worktree / "marker.txt").exists()
    assert result["subtype"] == "success"
    assert result["permission_denials"] == []
    assert _end(p) == 0


def test_permission_deny(start: Start, server: FakeAnthropic, dirs: ClaudeDirs) -> None:
    p, request = _ask_permission(start, server)
    p.send(deny_response(request["request_id"], "The host refused."))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    (tool_result,) = [
        b for u in _of_type(seen, "user") for b in _blocks(u) if b["type"] == "tool_result"
    ]
    assert tool_result["is_error"] is True
    assert tool_result["content"] == "The host refused."
    assert not (dirs.worktree / "marker.txt").exists()
    # A plain deny lets the model go on: the turn still ends in success.
    assert result["subtype"] == "success"
    assert [d["tool_name"] for d in result["permission_denials"]] == ["Bash"]
    assert server.tool_results()[0]["is_error"] is True
    assert _end(p) == 0


def test_interrupt_mid_stream(start: Start, server: FakeAnthropic) -> None:
    server.add(slow_text("A story that never ends. " * 20, delay=0.2), text("Fresh start."))
    p = start()
    p.send(user_message("Tell me a long story."))
    server.wait_for_deltas(2, timeout=TIMEOUT)
    p.send(interrupt_request("int-1"))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    (ack,) = _of_type(seen, "control_response")
    assert ack["response"]["subtype"] == "success"
    assert ack["response"]["request_id"] == "int-1"
    assert result["subtype"] == "error_during_execution"
    assert result["is_error"] is True
    assert server.wait_for_disconnect(timeout=TIMEOUT, turn_index=0).disconnected

    # The process lives on and takes the next message.
    p.send(user_message("Say something short."))
    result, _ = p.read_type("result", timeout=TIMEOUT)
    assert (result["subtype"], result["result"]) == ("success", "Fresh start.")
    assert _end(p) == 0


def test_api_error_result(start: Start, server: FakeAnthropic) -> None:
    server.add(error(500), error(500))
    p = start(env=FAST_RETRY_ENV)
    p.send(user_message("Hello?"))
    result, seen = p.read_type("result", timeout=TIMEOUT)

    (retry,) = [m for m in seen if m.get("subtype") == "api_retry"]
    assert retry["error_status"] == 500
    assert result["is_error"] is True
    assert result["api_error_status"] == 500
    assert result["terminal_reason"] == "api_error"
    assert result["result"].startswith("API Error: 500")
    # The last result was an error: exit code 1 at stdin EOF.
    assert _end(p) == 1


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"


def test_fixtures_are_well_formed() -> None:
    """The recorded transcripts (no CLI needed): the shape parser tests rely on."""
    index = json.loads((FIXTURES / "index.json").read_text())
    assert index["cli_version"].startswith(PACKAGES["claude"].version)
    fixtures = {run["fixture"] for entry in index["scenarios"].values() for run in entry["runs"]}
    assert fixtures == {path.name for path in FIXTURES.glob("*.jsonl")}
    for name in fixtures:
        for raw in (FIXTURES / name).read_text().splitlines():
            record = json.loads(raw)
            assert set(record) == {"dir", "line"} and record["dir"] in ("in", "out"), name
            if record["dir"] == "out":
                message = json.loads(record["line"])
                assert isinstance(message["type"], str), name
    records = [json.loads(raw) for raw in (FIXTURES / "text_turn.jsonl").read_text().splitlines()]
    out = [json.loads(r["line"]) for r in records if r["dir"] == "out"]
    assert [m["type"] for m in out] == ["system", "assistant", "result"]
