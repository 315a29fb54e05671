"""The real Codex CLI (``codex app-server``) hosted by a real agenthost host.

Each test starts ``agenthost serve --agent codex`` with the real CLI (installed from
npm) in a private HOME/CODEX_HOME/worktree (:mod:`codex_env`), its model provider
played by :class:`fakes.openai.FakeOpenAI` on 127.0.0.1, and talks to the host over its
socket like any client. Skipped when the CLI cannot be installed, unless
``AGENTHOST_E2E_REQUIRED=1`` (CI), where that is a failure. Nothing sleeps: every read
has a deadline.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from clis import require_cli
from codex_env import MODEL, CodexEnv
from fakes.openai import FakeOpenAI, error, shell, slow_text, text

import hosttools
from conftest import HostFactory
from hosttools import (
    Event,
    HostProc,
    entries,
    events_until,
    history,
    is_state,
    pid_gone,
    results,
    settle,
    settled_turn,
    states,
    wait_for,
)

TIMEOUT = 20.0
APPROVAL_COMMAND = "echo hello | tee approved.txt"  # tee: the file proves it ran
ASKING = ("--agent-opt", "approval_policy=untrusted")  # asks before every command


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    """The real CLI, installed from npm on first use; skip (or fail in CI) without it."""
    return require_cli("codex")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def codex(server: FakeOpenAI) -> Iterator[CodexEnv]:
    """CODEX_HOME with a provider pointing at ``server``; one quick retry of each kind,
    so a failing model API fails a turn in well under a second."""
    env = CodexEnv.create(server.url, request_max_retries=1, stream_max_retries=1)
    try:
        yield env
    finally:
        env.cleanup()


Start = Callable[..., HostProc]


@pytest.fixture
def start(codex_bin: Path, codex: CodexEnv, host_factory: HostFactory) -> Start:
    """Start a host running the real CLI in ``codex``'s worktree; wait until idle."""

    def factory(*args: str, agent_id: str = "cx1") -> HostProc:
        env = {**codex.env, "AGENTHOST_CODEX_BIN": str(codex_bin)}
        cwd = str(codex.workdir)
        host = host_factory(agent_id, "--agent", "codex", "--cwd", cwd, *args, env=env)
        host.wait_state("idle", timeout=TIMEOUT)
        return host

    return factory


# Codex's tests read every event from the journal's start, and wait longer than for a
# fixture.
attached = functools.partial(hosttools.attached, offset=0, timeout=TIMEOUT)


def is_type(name: str) -> Callable[[Event], bool]:
    return lambda e: e["type"] == name


def test_text_turn_and_status(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(text("Hello from the fake model."))
    host = start()
    with attached(host) as conn:
        before = events_until(conn, is_state("idle"))
        assert states(before) == ["running", "idle"]  # the handshake, then ready
        events = settled_turn(conn, "Say hello.")
    assert states(events) == ["running", "idle"]
    user, assistant = entries(events)
    assert (user["role"], user["content"]) == ("user", "Say hello.")
    assert (assistant["role"], assistant["content"]) == ("assistant", "Hello from the fake model.")
    (result,) = results(events)
    assert result["subtype"] == "completed" and result["is_error"] is False
    assert result["usage"]["output_tokens"] == 10 and result["duration_ms"] >= 0
    agent = host.agent()
    assert agent["backend"] == "codex" and agent["state"] == "idle" and agent["model"] == MODEL
    assert agent["session_id"] == result["session_id"] and agent["turns"] == 1
    assert agent["usage"]["input_tokens"] == 100 and agent["usage"]["output_tokens"] == 10
    assert [(e["role"], e["content"]) for e in history(host)] == [
        ("user", "Say hello."),
        ("assistant", "Hello from the fake model."),
    ]
    (request,) = server.responses_requests()
    assert request.user_texts()[-1] == "Say hello."


def test_command_turn(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(shell("echo hello"), text("It printed hello."))
    host = start()
    with attached(host) as conn:
        events = settled_turn(conn, "Run echo hello.")
    user, call, done, answer = entries(events)
    assert (call["role"], call["tool_name"], call["tool_input"]) == ("tool", "shell", "echo hello")
    assert "echo hello" in call["input"]["command"]
    assert done["tool_result"] == "hello" and done["is_error"] is False
    assert done["exit_code"] == 0 and done["tool_use_id"] == call["tool_use_id"]
    assert answer["content"] == "It printed hello."
    assert results(events)[0]["subtype"] == "completed"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the worktree and outside every temporary directory (Codex's
    ``workspace-write`` lets commands write ``/tmp`` and ``$TMPDIR`` too)."""
    path = Path(tempfile.mkdtemp(prefix="agenthost-codex-outside-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_codex_sandbox_confines_its_commands_to_the_worktree(
    start: Start, server: FakeOpenAI, codex: CodexEnv, outside: Path
) -> None:
    # The default sandbox (workspace-write) is Codex's own, on bubblewrap when the
    # machine has it: a command writes in the worktree, and cannot write elsewhere.
    escape = outside / "escaped.txt"
    command = f"echo inside > inside.txt && touch {escape}"
    server.enqueue(shell(command), text("The second write failed."))
    host = start()
    with attached(host) as conn:
        events = settled_turn(conn, "Write two files.")
    assert (codex.workdir / "inside.txt").read_text() == "inside\n"
    assert not escape.exists()
    (output,) = server.responses_requests()[-1].function_outputs()
    assert "Process exited with code 1" in output["output"]
    assert f"cannot touch '{escape}': Read-only file system" in output["output"]
    # Codex 0.169 reports a command its sandbox stopped to the model only: no item, so
    # no tool entry (docs/sandbox.md); and it does not ask to run it unconfined.
    assert not [e for e in events if e["type"] == "permission_request"]
    assert results(events)[0]["subtype"] == "completed"


def test_two_messages_in_one_process(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(text("First answer."), text("Second answer."))
    host = start()
    pid = host.agent()["pid"]
    with attached(host) as conn:
        first = settled_turn(conn, "First message.")
        second = settled_turn(conn, "Second message.")
    assert [e["content"] for e in entries(first + second)] == [
        "First message.",
        "First answer.",
        "Second message.",
        "Second answer.",
    ]
    assert host.agent()["pid"] == pid and host.agent()["turns"] == 2
    # one conversation: the model saw the first exchange with the second message
    last = server.responses_requests()[-1]
    assert last.user_texts()[-2:] == ["First message.", "Second message."]


def test_message_during_a_turn_is_held_for_its_own_turn(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(slow_text("word " * 10, chunks=10, delay=0.1), text("Second answer."))
    host = start()
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "First message."})["success"]
        events_until(conn, lambda e: e["type"] == "output" and "agentMessage/delta" in e["data"])
        assert conn.request("host.send", {"input": "Second message."})["success"]
        events = settle(conn, 2)
    first, second = results(events)
    assert first["subtype"] == second["subtype"] == "completed"
    assert states(events) == ["idle"]  # running throughout, idle after the second turn
    answers = [e["content"] for e in entries(events) if e["role"] == "assistant"]
    assert answers == ["word " * 10, "Second answer."]
    one, two = server.responses_requests()
    assert not one.disconnected  # the first answer was not cut by a steer
    assert one.user_texts()[-1] == "First message."
    assert two.user_texts()[-2:] == ["First message.", "Second message."]


def test_interrupt(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(slow_text("word " * 50, chunks=50, delay=0.2), text("Back again."))
    host = start()
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "Talk slowly."})["success"]
        events_until(conn, lambda e: e["type"] == "output" and "agentMessage/delta" in e["data"])
        response = conn.request("host.interrupt")
        assert response["payload"] == {"sent": True, "method": "control"}
        events = settle(conn)
        (result,) = results(events)
        assert result["subtype"] == "interrupted" and result["is_error"] is True
        assert result["interrupted"] is True  # shown as interrupted, not as failed
        assert not [e for e in events if e["type"] == "error"]
        cut = [e for e in entries(events) if e["role"] == "assistant"]
        assert cut and cut[0]["aborted"] is True and cut[0]["content"].startswith("word")
        assert cut[-1] == {**cut[-1], "content": "turn interrupted", "interrupted": True}
        assert server.wait_for_disconnect(TIMEOUT).disconnected
        agent = host.agent()
        assert agent["state"] == "idle" and agent["pid"] > 0
        with host.raw() as other:  # nothing runs now: nothing to interrupt
            assert other.request("host.interrupt")["payload"]["sent"] is False
        after = settled_turn(conn, "Still there?")
    assert results(after)[0]["subtype"] == "completed"
    assert entries(after)[-1]["content"] == "Back again."


def test_approval_allowed_then_denied(start: Start, server: FakeOpenAI, codex: CodexEnv) -> None:
    server.enqueue(
        shell(APPROVAL_COMMAND),
        text("Written."),
        shell("echo no | tee denied.txt"),
        text("Understood."),
    )
    host = start(*ASKING)
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "Write approved.txt."})["success"]
        asked = events_until(conn, is_state("waiting"))
        (request,) = [e["request"] for e in asked if e["type"] == "permission_request"]
        (call,) = [e for e in entries(asked) if e["role"] == "tool"]
        assert request["tool_name"] == "shell" and request["tool_input"] == APPROVAL_COMMAND
        assert request["tool_use_id"] == call["tool_use_id"]
        assert host.agent()["pending_requests"] == 1
        answer = {"request_id": request["request_id"], "behavior": "allow"}
        assert conn.request("host.respond", answer)["success"]
        events = settle(conn)
        assert [
            e["decision"]["behavior"] for e in events if e["type"] == "permission_response"
        ] == ["allow"]
        assert states(events) == ["running", "idle"]
        done = [e for e in entries(events) if "tool_result" in e]
        assert done[0]["tool_result"] == "hello" and done[0]["is_error"] is False
        assert (codex.workdir / "approved.txt").read_text() == "hello\n"

        assert conn.request("host.send", {"input": "Write denied.txt."})["success"]
        asked = events_until(conn, is_state("waiting"))
        (request,) = [e["request"] for e in asked if e["type"] == "permission_request"]
        answer = {"request_id": request["request_id"], "behavior": "deny", "message": "No."}
        assert conn.request("host.respond", answer)["success"]
        events = settle(conn)
    done = [e for e in entries(events) if "tool_result" in e]
    assert done[0]["is_error"] is True and done[0]["tool_result"] == "declined"
    assert not (codex.workdir / "denied.txt").exists()
    assert results(events)[0]["subtype"] == "completed"  # the model was told, and went on
    output = server.responses_requests()[-1].function_outputs()[-1]  # the denied call's
    assert "rejected by user" in output["output"]


def test_approval_answered_by_a_client_that_attached_later(
    start: Start, server: FakeOpenAI, codex: CodexEnv
) -> None:
    server.enqueue(shell(APPROVAL_COMMAND), text("Written."))
    host = start(*ASKING)
    with attached(host) as first:
        assert first.request("host.send", {"input": "Write approved.txt."})["success"]
        asked = events_until(first, is_state("waiting"))
        (request,) = [e["request"] for e in asked if e["type"] == "permission_request"]
        last_seen = asked[-1]["offset"]
        assert first.request("host.detach")["success"]
    with host.raw(timeout=TIMEOUT) as later:
        attach = later.request("host.attach", {"offset": last_seen})["payload"]
        (pending,) = attach["pending"]
        assert pending["request_id"] == request["request_id"]
        assert pending["tool_input"] == APPROVAL_COMMAND
        answer = {"request_id": pending["request_id"], "behavior": "allow"}
        changed = {**answer, "updated_input": {"command": "rm -rf /"}}
        refused = later.request("host.respond", changed)  # Codex cannot run another command
        assert refused["success"] is False and refused["code"] == "invalid_payload"
        assert host.agent()["pending_requests"] == 1  # still open: answer it properly
        assert later.request("host.respond", answer)["success"]
        events = settle(later)
    assert results(events)[0]["subtype"] == "completed"
    assert (codex.workdir / "approved.txt").exists()
    assert host.agent()["pending_requests"] == 0


def test_model_api_failure(start: Start, server: FakeOpenAI) -> None:
    # 1 request retry x 1 stream retry: four 500s fail the turn (in about 0.7 s)
    server.enqueue(*[error(500) for _ in range(4)], text("Recovered."))
    host = start()
    pid = host.agent()["pid"]
    with attached(host) as conn:
        events = settled_turn(conn, "This will fail.")
        errors = [e["error"] for e in events if e["type"] == "error"]
        assert len(errors) >= 2 and all(
            m.startswith("codex error (will retry)") for m in errors[:-1]
        )
        (result,) = results(events)
        assert result["subtype"] == "failed" and result["is_error"] is True
        # the turn's failure: an error event with Codex's message, as for every agent...
        assert errors[-1] == result["error"]
        # ...and the same text in history, as a failed assistant entry
        failed = [c for c in entries(events) if c.get("is_error") and c["role"] == "assistant"]
        assert [c["content"] for c in failed] == [result["error"]]
        agent = host.agent()
        assert agent["state"] == "idle" and agent["pid"] == pid
        assert agent["last_error"] == result["error"]
        again = settled_turn(conn, "Try again.")
    assert results(again)[0]["subtype"] == "completed"
    assert entries(again)[-1]["content"] == "Recovered."


def test_stop_ends_codex_and_its_commands(start: Start, server: FakeOpenAI) -> None:
    server.enqueue(shell("sleep 300"))
    host = start()
    codex_pid = host.agent()["pid"]
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "Sleep."})["success"]
        events_until(
            conn, lambda e: e["type"] == "chat_entry" and e["chat_entry"]["role"] == "tool"
        )

    def sleeper() -> list[psutil.Process]:
        try:
            tree = psutil.Process(codex_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [p for p in tree if _cmdline(p)[:2] == ["sleep", "300"]]

    (sleep,) = wait_for(sleeper, TIMEOUT, "the model's sleep command")
    codex_tree = [psutil.Process(codex_pid), *psutil.Process(codex_pid).children(recursive=True)]
    with host.raw(timeout=TIMEOUT) as conn:
        stop = conn.request("host.stop", {"timeout": 10})["payload"]
    # Codex exits 0 on SIGTERM and ends its commands, although they run in sessions of
    # their own (a group kill would not reach them)
    assert stop["exit_code"] == 0 and stop["graceful"] is True and stop["final_state"] == "done"
    pids = [p.pid for p in codex_tree]
    wait_for(lambda: all(map(pid_gone, pids)), TIMEOUT, f"codex processes {pids} to end")
    assert pid_gone(sleep.pid)
    assert host.wait_exit(TIMEOUT) == 0


def test_resume_continues_the_thread(
    start: Start, server: FakeOpenAI, host_factory: HostFactory
) -> None:
    server.enqueue(text("I will remember banana."), text("The word was banana."))
    first = start(agent_id="cx-a")
    with attached(first) as conn:
        settled_turn(conn, "Remember the word banana.")
    session = first.agent()["session_id"]
    with first.raw(timeout=TIMEOUT) as conn:
        assert conn.request("host.stop", {"timeout": 10})["payload"]["exit_code"] == 0
    second = start("--resume", session, agent_id="cx-b")
    assert second.agent()["session_id"] == session
    with attached(second) as conn:
        events = settled_turn(conn, "What was the word?")
    assert entries(events)[-1]["content"] == "The word was banana."
    assert server.responses_requests()[-1].user_texts()[-2:] == [
        "Remember the word banana.",
        "What was the word?",
    ]


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []
