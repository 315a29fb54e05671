"""Smoke tests: the real Codex CLI (``codex app-server``) runs real turns against a fake API.

No agenthost here: these prove the e2e infrastructure (the fake Responses API, the
hermetic CODEX_HOME, the JSON-RPC driver) and pin the app-server behaviours an adapter
relies on. Skipped when the CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1``
(CI), where that is a failure. Nothing sleeps: every read has a deadline.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clis import require_cli
from codex_env import API_KEY, AppServer, CodexEnv, Message
from fakes.openai import FakeOpenAI, shell, slow_text, text

TIMEOUT = 15.0
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex"
#: Written through ``tee`` so the test can tell whether the command really ran.
APPROVAL_COMMAND = "echo hello | tee approved.txt"


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    """The real CLI, installed from npm on first use; skip (or fail in CI) without it."""
    return require_cli("codex")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A fake Responses API with an empty script; tests queue their turns."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def codex_env(server: FakeOpenAI) -> Iterator[CodexEnv]:
    """A private HOME, CODEX_HOME (config pointing at ``server``) and git worktree."""
    env = CodexEnv.create(server.url)
    try:
        yield env
    finally:
        env.cleanup()


@pytest.fixture
def app(codex_bin: Path, codex_env: CodexEnv) -> Iterator[AppServer]:
    """A running, initialized ``codex app-server``; stopped (tree-wide) at teardown."""
    with AppServer(codex_bin, codex_env) as running:
        result = running.initialize()
        assert result["codexHome"] == str(codex_env.codex_home)
        yield running


def items_completed(app: AppServer, item_type: str) -> list[dict[str, Any]]:
    """The ``item`` of every ``item/completed`` of this type read so far."""
    return [
        m["params"]["item"]
        for m in app.messages
        if m.get("method") == "item/completed" and m["params"]["item"]["type"] == item_type
    ]


def run_turn(app: AppServer, thread_id: str, prompt: str) -> Message:
    """Start a turn and return its ``turn/completed`` notification."""
    turn_id = app.start_turn(thread_id, prompt)["turn"]["id"]
    done = app.wait_method("turn/completed", TIMEOUT)
    assert done["params"]["turn"]["id"] == turn_id
    return done


def test_text_turn(app: AppServer, server: FakeOpenAI) -> None:
    """Deltas, the completed agent message, token usage, turn completed; EOF exits 0."""
    server.enqueue(text("Hello from the fake model.", chunks=3))
    thread = app.start_thread()["thread"]
    assert thread["modelProvider"] == "fake"
    done = run_turn(app, thread["id"], "Say hello.")

    assert done["params"]["turn"]["status"] == "completed"
    deltas = [
        m["params"]["delta"] for m in app.messages if m.get("method") == "item/agentMessage/delta"
    ]
    assert len(deltas) == 3
    assert "".join(deltas) == "Hello from the fake model."
    assert [i["text"] for i in items_completed(app, "agentMessage")] == [
        "Hello from the fake model."
    ]
    assert [i["content"][0]["text"] for i in items_completed(app, "userMessage")] == ["Say hello."]
    usage = [m for m in app.messages if m.get("method") == "thread/tokenUsage/updated"]
    assert usage[-1]["params"]["tokenUsage"]["last"]["inputTokens"] == 100
    assert usage[-1]["params"]["tokenUsage"]["last"]["outputTokens"] == 10

    (request,) = server.responses_requests()
    assert request.headers.get("authorization") == f"Bearer {API_KEY}"
    assert request.body["stream"] is True
    assert request.user_texts()[-1] == "Say hello."

    app.close_stdin()
    assert app.wait(TIMEOUT) == 0


def test_command_turn(app: AppServer, server: FakeOpenAI) -> None:
    """The model runs ``echo hello``; the output reaches the client and the model."""
    server.enqueue(shell("echo hello"), text("The command printed hello."))
    thread_id = app.start_thread()["thread"]["id"]
    done = run_turn(app, thread_id, "Run echo hello.")

    assert done["params"]["turn"]["status"] == "completed"
    started = [
        m["params"]["item"]
        for m in app.messages
        if m.get("method") == "item/started" and m["params"]["item"]["type"] == "commandExecution"
    ]
    assert len(started) == 1 and "echo hello" in started[0]["command"]
    (command,) = items_completed(app, "commandExecution")
    assert command["id"] == started[0]["id"]
    assert command["status"] == "completed"
    assert command["exitCode"] == 0
    assert command["aggregatedOutput"] == "hello\n"
    assert [i["text"] for i in items_completed(app, "agentMessage")] == [
        "The command printed hello."
    ]

    first, second = server.responses_requests()
    assert "exec_command" in first.tool_names
    (output,) = second.function_outputs()
    assert output["call_id"] == command["id"]
    assert "hello" in output["output"]


def start_asking_thread(app: AppServer) -> str:
    """A thread whose approval policy asks before running any command."""
    result = app.start_thread(approvalPolicy="untrusted", sandbox="danger-full-access")
    assert result["approvalPolicy"] == "untrusted"
    return str(result["thread"]["id"])


def approval_request(app: AppServer) -> Message:
    """Wait for Codex's command approval request (a server-to-client JSON-RPC request)."""
    ask = app.wait_method("item/commandExecution/requestApproval", TIMEOUT)
    assert "id" in ask
    assert "echo hello" in ask["params"]["command"]
    assert "accept" in ask["params"]["availableDecisions"]
    return ask


def test_approval_allow(app: AppServer, server: FakeOpenAI, codex_env: CodexEnv) -> None:
    """``{"decision": "accept"}`` runs the command."""
    server.enqueue(shell(APPROVAL_COMMAND), text("Written."))
    thread_id = start_asking_thread(app)
    app.start_turn(thread_id, "Write hello to approved.txt.")
    ask = approval_request(app)
    app.respond(ask["id"], {"decision": "accept"})

    resolved = app.wait_method("serverRequest/resolved", TIMEOUT)
    assert resolved["params"]["requestId"] == ask["id"]
    done = app.wait_method("turn/completed", TIMEOUT)
    assert done["params"]["turn"]["status"] == "completed"
    (command,) = items_completed(app, "commandExecution")
    assert command["id"] == ask["params"]["itemId"]
    assert command["status"] == "completed"
    assert command["aggregatedOutput"] == "hello\n"
    assert (codex_env.workdir / "approved.txt").read_text() == "hello\n"


def test_approval_deny(app: AppServer, server: FakeOpenAI, codex_env: CodexEnv) -> None:
    """``{"decision": "decline"}``: not run, the model is told, the turn goes on."""
    server.enqueue(shell(APPROVAL_COMMAND), text("Understood, I will not write it."))
    thread_id = start_asking_thread(app)
    app.start_turn(thread_id, "Write hello to approved.txt.")
    ask = approval_request(app)
    app.respond(ask["id"], {"decision": "decline"})

    done = app.wait_method("turn/completed", TIMEOUT)
    assert done["params"]["turn"]["status"] == "completed"
    (command,) = items_completed(app, "commandExecution")
    assert command["status"] == "declined"
    assert command["exitCode"] is None
    assert not (codex_env.workdir / "approved.txt").exists()
    (output,) = server.responses_requests()[-1].function_outputs()
    assert "rejected by user" in output["output"]
    assert [i["text"] for i in items_completed(app, "agentMessage")] == [
        "Understood, I will not write it."
    ]


def test_interrupt(app: AppServer, server: FakeOpenAI) -> None:
    """``turn/interrupt`` ends a streaming turn as ``interrupted`` and cuts the stream."""
    server.enqueue(slow_text("word " * 50, chunks=50, delay=0.2), text("Back again."))
    thread_id = app.start_thread()["thread"]["id"]
    turn_id = app.start_turn(thread_id, "Talk slowly.")["turn"]["id"]
    app.wait_method("item/agentMessage/delta", TIMEOUT)

    assert app.call("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
    done = app.wait_method("turn/completed", TIMEOUT)
    assert done["params"]["turn"]["status"] == "interrupted"
    assert server.wait_for_disconnect(TIMEOUT).disconnected
    assert items_completed(app, "agentMessage") == []  # the partial message never completes

    after = run_turn(app, thread_id, "Still there?")
    assert after["params"]["turn"]["status"] == "completed"


def test_config_passes_strict_check(codex_bin: Path, codex_env: CodexEnv) -> None:
    """Every key of the generated config.toml is known to this Codex version."""
    result = subprocess.run(
        [str(codex_bin), "app-server", "--strict-config", "--print-startup-config"],
        env=codex_env.env,
        cwd=codex_env.workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_fixtures_are_well_formed() -> None:
    """Every recorded transcript line is ``{"dir", "line"}`` with a JSON-RPC object."""
    paths = sorted(FIXTURES.glob("*.jsonl"))
    assert paths, f"no fixtures in {FIXTURES}"
    for path in paths:
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            entry = json.loads(raw)
            assert set(entry) == {"dir", "line"}, (path.name, number)
            assert entry["dir"] in ("in", "out"), (path.name, number)
            message = json.loads(entry["line"])
            assert isinstance(message, dict), (path.name, number)
            assert "method" in message or "id" in message, (path.name, number)
