"""The real Claude Code CLI hosted by a real agenthost host, against a fake model API.

Each test starts ``agenthost serve --agent claude`` (the real CLI, installed from npm)
in a private HOME/worktree/TMPDIR, with the model API played by
:class:`fakes.anthropic.FakeAnthropic` on 127.0.0.1, and talks to the host over its
socket like any client. Skipped when the CLI cannot be installed, unless
``AGENTHOST_E2E_REQUIRED=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from fakes.anthropic import FakeAnthropic, error, slow_text, text, tool_use

import hosttools
from conftest import HostFactory
from hosttools import (
    Event,
    HostProc,
    RawConn,
    entries,
    events_until,
    history,
    is_state,
    results,
    settled_turn,
)

WRITE_COMMAND = "touch marker.txt && echo hello"  # not read-only: the CLI asks first


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    """The real CLI, installed from npm on first use; skip (or fail in CI) without it."""
    return require_cli("claude")


@pytest.fixture
def dirs() -> Iterator[ClaudeDirs]:
    with temp_dirs() as created:
        yield created


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


Start = Callable[..., HostProc]


@pytest.fixture
def start(
    claude_bin: Path, dirs: ClaudeDirs, server: FakeAnthropic, host_factory: HostFactory
) -> Start:
    """Start a host running the real CLI against ``server`` in ``dirs``."""

    def factory(*args: str, agent_id: str = "c1", cli_args: tuple[str, ...] = ()) -> HostProc:
        env = claude_env(server.url, dirs, extra={**FAST_RETRY_ENV})
        env["AGENTHOST_CLAUDE_BIN"] = str(claude_bin)
        return host_factory(
            agent_id,
            "--agent",
            "claude",
            "--cwd",
            str(dirs.worktree),
            *args,
            command=["--model", DEFAULT_MODEL, *cli_args],
            env=env,
        )

    return factory


# A connection for live events only; reads wait longer than for a fixture.
attached = functools.partial(hosttools.attached, timeout=30)


def test_text_turns_and_status(start: Start, server: FakeAnthropic) -> None:
    server.add(text("Hello from the fake API."), text("Second answer."))
    host = start()
    assert host.agent()["state"] == "idle"
    with attached(host) as conn:
        first = settled_turn(conn, "Say hello")
        second = settled_turn(conn, "And again")
    assert [e["role"] for e in entries(first)] == ["user", "assistant"]
    assert entries(first)[1]["content"] == "Hello from the fake API."
    assert entries(second)[1]["content"] == "Second answer."
    assert [e["state"] for e in first if e["type"] == "state"] == ["running", "idle"]
    (result,) = results(first)
    assert result["subtype"] == "success" and result["is_error"] is False
    agent = host.agent()
    assert agent["backend"] == "claude" and agent["model"] == DEFAULT_MODEL
    assert agent["turns"] == 2 and agent["cost_usd"] > 0 and agent["usage"]["output_tokens"] > 0
    assert agent["session_id"] == result["session_id"]
    # the model saw both messages in one conversation
    texts = server.user_texts()  # the CLI adds system reminders around them
    assert len(texts) == 2 and "Say hello" in texts[0] and texts[1].endswith("And again")
    assert [e["role"] for e in history(host)] == ["user", "assistant"] * 2


def test_tool_turn(start: Start, server: FakeAnthropic) -> None:
    server.add(tool_use("Bash", {"command": "echo hello"}), text("It printed hello."))
    host = start()
    with attached(host) as conn:
        events = settled_turn(conn, "Run echo hello")
    chats = entries(events)
    call = next(c for c in chats if c.get("tool_name") == "Bash" and "tool_result" not in c)
    done = next(c for c in chats if "tool_result" in c)
    assert call["tool_input"] == "echo hello" and call["input"]["command"] == "echo hello"
    assert done["tool_result"] == "hello" and done["is_error"] is False
    assert done["tool_use_id"] == call["tool_use_id"] and done["tool_name"] == "Bash"
    assert chats[-1]["content"] == "It printed hello."


def test_message_sent_during_a_turn_runs_as_its_own_turn(
    start: Start, server: FakeAnthropic
) -> None:
    server.add(slow_text("A slow first answer that takes a while.", delay=0.1), text("Second."))
    host = start()
    with attached(host) as conn:
        conn.send("host.send", {"input": "First"})
        events = events_until(conn, is_state("running"))
        server.wait_for_deltas(1)  # the first answer is streaming
        conn.send("host.send", {"input": "Second"})
        events += events_until(conn, is_state("idle"))
    assert len(results(events)) == 2
    answers = [c["content"] for c in entries(events) if c["role"] == "assistant"]
    assert answers[-1] == "Second."
    # one "running" for both turns: the first result did not make it idle
    assert [e["state"] for e in events if e["type"] == "state"] == ["running", "idle"]


def test_message_sent_while_a_tool_runs_is_folded_and_the_host_gets_idle(
    start: Start, server: FakeAnthropic
) -> None:
    # Claude Code folds it into the running turn: one result answers both sends
    server.add(
        tool_use("Bash", {"command": "sleep 3", "description": "Wait"}),
        text("Slept, and read your second message."),
    )
    host = start(cli_args=("--allowedTools", "Bash"))
    with attached(host) as conn:
        conn.send("host.send", {"input": "Sleep for three seconds"})
        events = events_until(
            conn, lambda e: e["type"] == "chat_entry" and "input" in e["chat_entry"]
        )
        conn.send("host.send", {"input": "Also say hi"})  # while `sleep 3` runs
        events += events_until(conn, is_state("idle"))
    assert len(results(events)) == 1
    assert host.agent()["state"] == "idle"
    # the model saw the second message inside the first turn
    assert "Also say hi" in str(server.turn_requests()[-1].messages)
    # each send once in history, although the CLI echoed both
    users = [e["content"] for e in history(host) if e["role"] == "user"]
    assert users == ["Sleep for three seconds", "Also say hi"]


def test_message_sent_while_a_permission_is_open_is_folded_and_the_host_gets_idle(
    start: Start, server: FakeAnthropic, dirs: ClaudeDirs
) -> None:
    server.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Made it, and said hi."))
    host = start()
    with attached(host) as conn:
        request = permission_turn(conn)
        conn.send("host.send", {"input": "Also say hi"})  # the question is still open
        events_until(
            conn, lambda e: e["type"] == "chat_entry" and e["chat_entry"]["role"] == "user"
        )
        conn.request("host.respond", {"request_id": request["request_id"], "behavior": "allow"})
        events = events_until(conn, is_state("idle"))
    assert len(results(events)) == 1 and (dirs.worktree / "marker.txt").exists()
    assert host.agent()["state"] == "idle"
    assert [e["content"] for e in history(host) if e["role"] == "user"] == [
        "Make a marker file",
        "Also say hi",
    ]


def test_interrupt_a_streaming_turn(start: Start, server: FakeAnthropic) -> None:
    server.add(slow_text("x " * 400, delay=0.05), text("After the interrupt."))
    host = start()
    with attached(host) as conn:
        conn.send("host.send", {"input": "Talk for a long time"})
        events_until(conn, is_state("running"))
        # it is streaming now, and the CLI has had some text (a delta sent is not yet one
        # the CLI read: interrupted before it did, the CLI has no partial answer to mark)
        server.wait_for_deltas(4)
        assert conn.request("host.interrupt")["payload"] == {"sent": True, "method": "control"}
        events = events_until(conn, is_state("idle"))
        (result,) = results(events)
        assert result["subtype"] == "error_during_execution" and result["is_error"] is True
        assert result["terminal_reason"] == "aborted_streaming"
        aborted = [c for c in entries(events) if c.get("aborted")]
        assert aborted and aborted[0]["role"] == "assistant"
        # the agent is alive and takes the next message
        after = settled_turn(conn, "Go on")
    assert entries(after)[-1]["content"] == "After the interrupt."


def permission_turn(conn: RawConn) -> Event:
    conn.send("host.send", {"input": "Make a marker file"})
    events = events_until(conn, is_state("waiting"))
    (request,) = [e["request"] for e in events if e["type"] == "permission_request"]
    return request  # type: ignore[no-any-return]


def test_permission_allowed(start: Start, server: FakeAnthropic, dirs: ClaudeDirs) -> None:
    server.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = start()
    with attached(host) as conn:
        request = permission_turn(conn)
        assert request["tool_name"] == "Bash" and request["tool_input"] == WRITE_COMMAND
        assert host.agent()["pending_requests"] == 1
        resp = conn.request(
            "host.respond", {"request_id": request["request_id"], "behavior": "allow"}
        )
        assert resp["success"]
        events = events_until(conn, is_state("idle"))
    assert (dirs.worktree / "marker.txt").exists()  # the real CLI ran it
    assert [e["decision"]["behavior"] for e in events if e["type"] == "permission_response"] == [
        "allow"
    ]
    tool_result = next(c for c in entries(events) if "tool_result" in c)
    assert tool_result["tool_result"] == "hello" and tool_result["is_error"] is False


def test_permission_denied(start: Start, server: FakeAnthropic, dirs: ClaudeDirs) -> None:
    server.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("OK, I will not."))
    host = start()
    with attached(host) as conn:
        request = permission_turn(conn)
        conn.request(
            "host.respond",
            {"request_id": request["request_id"], "behavior": "deny", "message": "not now"},
        )
        events = events_until(conn, is_state("idle"))
    assert not (dirs.worktree / "marker.txt").exists()
    tool_result = next(c for c in entries(events) if "tool_result" in c)
    assert tool_result["is_error"] is True and "not now" in tool_result["tool_result"]
    # the model was told why
    assert any("not now" in str(r) for r in server.tool_results())


def test_permission_answered_by_a_client_that_attached_later(
    start: Start, server: FakeAnthropic, dirs: ClaudeDirs
) -> None:
    server.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Done."))
    host = start()
    with attached(host) as first:
        request = permission_turn(first)
        first.request("host.detach")
    # nobody attached: the question stays open
    assert host.agent()["state"] == "waiting"
    with host.raw(timeout=30) as later:
        attach = later.request("host.attach", {"offset": 10**9})["payload"]
        assert [r["request_id"] for r in attach["pending"]] == [request["request_id"]]
        later.request("host.respond", {"request_id": request["request_id"], "behavior": "allow"})
        events_until(later, is_state("idle"))
    assert (dirs.worktree / "marker.txt").exists()


def test_api_error_is_reported_and_the_agent_survives(start: Start, server: FakeAnthropic) -> None:
    server.add(error(500), error(500), text("Back again."))
    host = start()
    with attached(host) as conn:
        failed = settled_turn(conn, "Hello?")
        (result,) = results(failed)
        assert result["is_error"] is True and result["terminal_reason"] == "api_error"
        assert "API Error" in host.agent()["last_error"]
        recovered = settled_turn(conn, "Hello again")
    assert entries(recovered)[-1]["content"] == "Back again."
    assert host.agent()["state"] == "idle"


@pytest.mark.parametrize("status", [500, 429])
def test_api_error_is_an_error_event_and_in_history(
    start: Start, server: FakeAnthropic, status: int
) -> None:
    server.add(error(status), error(status))  # the call and its one retry
    host = start()
    with attached(host) as conn:
        events = settled_turn(conn, "Hello?")
    (failure,) = [e for e in events if e["type"] == "error"]
    # e.g. "API Error: 500 Internal server error. …", "API Error: Request rejected (429) · …"
    assert failure["error"].startswith("API Error") and str(status) in failure["error"]
    assert failure["http_status"] == status
    assert host.agent()["last_error"] == failure["error"]
    (result,) = results(events)
    assert result["is_error"] is True and "interrupted" not in result
    last = history(host)[-1]
    assert (last["role"], last["is_error"], last["http_status"]) == ("assistant", True, status)
    assert last["content"] == failure["error"]


def test_interrupted_turn_is_not_a_failure(start: Start, server: FakeAnthropic) -> None:
    server.add(slow_text("x " * 400, delay=0.05))
    host = start()
    with attached(host) as conn:
        conn.send("host.send", {"input": "Talk for a long time"})
        events_until(conn, is_state("running"))
        server.wait_for_deltas(1)
        conn.request("host.interrupt")
        events = events_until(conn, is_state("idle"))
    assert not [e for e in events if e["type"] == "error"]
    (result,) = results(events)
    assert result["interrupted"] is True
    assert history(host)[-1] == {**history(host)[-1], "content": "turn interrupted"}


def test_stop_ends_the_cli(start: Start, server: FakeAnthropic) -> None:
    server.add(text("hi"))
    host = start()
    pid = host.agent()["pid"]
    with host.raw(timeout=30) as conn:
        stop = conn.request("host.stop", {"timeout": 10})["payload"]
    assert stop["stopped"] and stop["graceful"] is True
    # node exits 128+15 once its handlers are set up; right after start, SIGTERM kills it
    assert stop["exit_code"] in (143, -15)
    assert host.wait_exit() == 0
    from hosttools import pid_gone

    assert pid_gone(pid)


def test_resume_continues_the_session(
    start: Start, server: FakeAnthropic, host_factory: HostFactory
) -> None:
    server.add(text("Remember: blue."), text("You said blue."))
    first = start(agent_id="r1")
    with attached(first) as conn:
        session = results(settled_turn(conn, "My colour is blue"))[0]["session_id"]
        conn.request("host.stop", {"timeout": 10})
    first.wait_exit()
    second = start("--resume", session, agent_id="r1")
    with attached(second) as conn:
        settled_turn(conn, "What is my colour?")
    assert second.agent()["session_id"] == session
    # the resumed CLI sent the earlier conversation to the model
    assert "My colour is blue" in server.user_texts()[0]
