"""The ``agenthost`` command line, run as a user runs it: a subprocess per command."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.lockfile import is_lock_held, read_lock_info
from agenthost.protocol import PROTOCOL_VERSION

from hosttools import PY, wait_for


def run(
    home: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTHOST_HOME": str(home), "AGENTHOST_DEMO_PACE": "0", "NO_COLOR": "1"}
    return subprocess.run(
        [PY, "-m", "agenthost", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=timeout,
    )


def run_json(home: Path, *args: str, code: int = 0) -> Any:
    argv = list(args)
    cut = argv.index("--") if "--" in argv else len(argv)  # options go before "--"
    result = run(home, *argv[:cut], "--json", *argv[cut:])
    assert result.returncode == code, (result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture
def detached(home: Path) -> Iterator[Callable[..., dict[str, Any]]]:
    """Start hosts with ``serve --detach``. At teardown every host that holds a lock in
    ``home`` is killed, however the test ended (their watchdogs then end the agents)."""

    def start(agent_id: str, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = run_json(home, "serve", "--agent-id", agent_id, "--detach", *args)
        return out

    yield start
    for lock in (home / "hosts").glob("*.lock"):
        pid = (read_lock_info(lock) or {}).get("pid")
        if isinstance(pid, int) and is_lock_held(lock):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_serve_detach_then_every_verb(home: Path, detached: Callable[..., dict[str, Any]]) -> None:
    started = detached("w1", "--project", "site", "--task", "T-9")
    assert started["ok"] and Path(started["socket_path"]).exists()
    assert Path(started["log_path"]).exists()

    listed = run_json(home, "list")
    assert [h["agent_id"] for h in listed] == ["w1"]
    assert listed[0]["agent"]["project"] == "site" and listed[0]["reachable"] is True

    status = run_json(home, "status", "w1")
    assert status["agent"]["task"] == "T-9" and status["host"]["pid"] == started["pid"]

    ping = run_json(home, "ping", "w1")
    assert ping["protocol_version"] == PROTOCOL_VERSION

    sent = run_json(home, "send", "w1", "hello", "there")
    assert sent["ok"] and sent["offset"] >= 2

    # the demo's turn finishes: wait for idle through status
    wait_for(lambda: run_json(home, "history", "w1")["total"] >= 5, what="demo turn done")
    history = run_json(home, "history", "w1", "--limit", "2")
    assert len(history["entries"]) == 2 and history["total"] >= 5
    assert history["entries"][-1]["content"] == 'You said "hello there". That is 2 words.'

    attach = run(home, "attach", "w1", "--no-follow", "--json")
    assert attach.returncode == 0
    events = [json.loads(line) for line in attach.stdout.splitlines()]
    assert [e["offset"] for e in events] == list(range(1, len(events) + 1))
    assert {"state", "chat_entry", "output", "result"} <= {e["type"] for e in events}

    human = run(home, "attach", "w1", "--no-follow")
    assert "› hello there" in human.stdout and "● Bash(wc -w)" in human.stdout
    assert "✓ turn done" in human.stdout and "\x1b[" not in human.stdout  # NO_COLOR
    assert "replaying" in human.stderr

    # --no-follow from the head, or beyond it, or --last 0: nothing to show, and done
    # (it used to wait forever: a script asking "anything new since N?" hung)
    head = events[-1]["offset"]
    for args in (("--offset", str(head)), ("--offset", str(head + 50)), ("--last", "0")):
        at_head = run(home, "attach", "w1", "--no-follow", "--json", *args, timeout=20)
        assert at_head.returncode == 0 and at_head.stdout == "", (args, at_head.stderr)
    one = run(home, "attach", "w1", "--no-follow", "--json", "--offset", str(head - 1))
    assert [json.loads(line)["offset"] for line in one.stdout.splitlines()] == [head]

    stopped = run_json(home, "stop", "w1", "--timeout", "5")
    assert stopped["stopped"] and stopped["final_state"] == "done"
    assert not Path(started["socket_path"]).exists()
    assert run_json(home, "list") == []


def test_attach_follows_until_the_host_exits(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    detached("f1", "--agent", "lines", "--linger", "0", "--", "sh", "-c", "read x; echo got $x")
    follower = subprocess.Popen(
        [PY, "-m", "agenthost", "attach", "f1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTHOST_HOME": str(home)},
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())  # attached: the first event arrived
        assert first["offset"] == 1
        assert run(home, "send", "f1", "ping").returncode == 0
        out, _ = follower.communicate(timeout=60)  # the agent exits, linger 0: stream ends
    finally:
        if follower.poll() is None:
            follower.kill()
    events = [first] + [json.loads(line) for line in out.splitlines()]
    assert [e["offset"] for e in events] == list(range(1, len(events) + 1))
    assert any(e.get("data") == "got ping" for e in events)
    assert events[-1]["type"] == "state" and events[-1]["state"] == "done"
    assert follower.returncode == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["status", "ghost"], 3, "no host is running"),
        (["send", "ghost", "hi"], 3, "no host is running"),
        (["stop", "ghost"], 3, "no host is running"),
        (["attach", "ghost"], 3, "no host is running"),
        (["status", "../etc"], 2, "invalid agent id"),
        (["serve"], 2, "Missing option '--agent-id'"),
        (["serve", "--agent-id", "x", "--agent", "nope"], 2, "Invalid value for '--agent'"),
        (["serve", "--agent-id", "x", "--agent", "lines"], 2, "needs a command"),
        (["run", "--agent-id", "x", "--agent", "lines"], 2, "-- bash (with serve or run)"),
        (["serve", "--agent-id", "x", "--env", "NOEQUALS"], 2, "is not KEY=VALUE"),
        (["serve", "--agent-id", "x", "--agent-opt", "nope=1"], 2, "unknown option(s)"),
        (["serve", "--agent-id", "x", "--resume", "abc"], 2, "cannot resume"),
        (["serve", "--agent-id", "x", "--cwd", "/nonexistent"], 2, "does not exist"),
        (["history", "x", "--limit", "-1"], 2, "Invalid value"),
        (["stop", "x", "--timeout", "abc"], 2, "Invalid value"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_bad_arguments_and_unknown_agents(
    home: Path, args: list[str], code: int, message: str
) -> None:
    result = run(home, *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert message in result.stderr


def test_json_errors_are_machine_readable(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    detached("real1")
    body = run_json(home, "status", "reel1", code=3)
    assert body == {
        "ok": False,
        "error": body["error"],
        "reason": "no_host",
        "exit_code": 3,
        "hint": "did you mean 'real1'?",
    }
    detached("done1", "--agent", "lines", "--", "true")
    wait_for(lambda: run_json(home, "status", "done1")["agent"]["state"] == "done", what="exit")
    body = run_json(home, "send", "done1", "hi", code=4)
    assert body["reason"] == "agent_not_running" and body["code"] == "agent_not_running"


def test_second_serve_detach_is_refused(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    first = detached("one")
    result = run(home, "serve", "--agent-id", "one", "--detach")
    assert result.returncode == 6 and "already running" in result.stderr
    assert str(first["pid"]) in result.stderr


def test_send_reads_stdin_with_dash(home: Path, detached: Callable[..., dict[str, Any]]) -> None:
    detached("s1", "--agent", "lines", "--", "cat")
    assert run(home, "send", "s1", "-", stdin="line one\nline two\n").returncode == 0
    history = run_json(home, "history", "s1")
    assert history["entries"][0]["content"] == "line one\nline two"


def test_send_with_key_is_idempotent(home: Path, detached: Callable[..., dict[str, Any]]) -> None:
    detached("k1", "--agent", "lines", "--", "cat")
    first = run_json(home, "send", "k1", "x", "--key", "abc")
    again = run_json(home, "send", "k1", "x", "--key", "abc")
    assert again["offset"] == first["offset"] and again["duplicate"] is True


def test_list_shows_stale_and_filters_by_project(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    a = detached("pa", "--project", "alpha")
    detached("pb", "--project", "beta")
    os.kill(a["pid"], 9)
    wait_for(lambda: run_json(home, "list")[0].get("reachable") is False, what="pa dead")
    table = run(home, "list")
    lines = {line.split()[0]: line.split()[1] for line in table.stdout.splitlines()[1:]}
    assert lines == {"pa": "stale", "pb": "idle"}
    assert [h["agent_id"] for h in run_json(home, "list", "--project", "beta")] == ["pb"]
    status = run(home, "status", "pa")
    assert status.returncode == 3 and "is gone" in status.stderr


def test_demo_command_starts_a_demo_host(home: Path) -> None:
    result = run(home, "demo", "--no-attach")
    try:
        assert result.returncode == 0, result.stderr
        assert "started demo host" in result.stderr
        # a first message was sent for the user
        history = run_json(home, "history", "demo")
        assert history["entries"][0]["content"] == "Hello! What can you do?"
        again = run(home, "demo", "--no-attach")
        assert again.returncode == 0 and "already running" in again.stderr
    finally:
        run(home, "stop", "demo", "--force")


def test_version_and_help() -> None:
    out = subprocess.run([PY, "-m", "agenthost", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for verb in ("serve", "attach", "list", "status", "ping", "history", "send", "stop"):
        assert verb in out.stdout


def test_wait_for_states(home: Path, detached: Callable[..., dict[str, Any]]) -> None:
    detached("w1")  # demo: idle at once
    assert run(home, "wait", "w1", "--state", "idle").returncode == 0  # already there
    assert run(home, "send", "w1", "/sleep 1").returncode == 0
    result = run_json(home, "wait", "w1", "--state", "idle", "--timeout", "30")
    assert result == {"ok": True, "agent_id": "w1", "state": "idle"}
    slow = run(home, "send", "w1", "/sleep 30")
    assert slow.returncode == 0
    timed_out = run(home, "wait", "w1", "--state", "done", "--timeout", "0.5")
    assert timed_out.returncode == 8 and timed_out.stdout.strip() == "w1: running"
    run(home, "stop", "w1", "--force")
    detached("w2", "--agent", "lines", "--", "sh", "-c", "read x; exit 4")
    run(home, "send", "w2", "bye")
    ended = run(home, "wait", "w2", "--state", "idle")  # it can never be idle now
    assert ended.returncode == 10 and ended.stdout.strip() == "w2: error"
    assert run(home, "wait", "w2", "--state", "error").returncode == 0
    assert run(home, "wait", "nobody", "--state", "idle").returncode == 3
    assert run(home, "wait", "w2", "--state", "sleeping").returncode == 2


def test_shell_completion_of_agent_ids(home: Path, detached: Callable[..., dict[str, Any]]) -> None:
    detached("alpha1")
    detached("alpha2", "--agent", "lines", "--", "cat")
    env = {
        **os.environ,
        "AGENTHOST_HOME": str(home),
        "_AGENTHOST_COMPLETE": "bash_complete",
        "COMP_WORDS": "agenthost status al",
        "COMP_CWORD": "2",
    }
    out = subprocess.run(
        [PY, "-m", "agenthost"], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.stdout.split() == ["plain,alpha1", "plain,alpha2"]


SECRET = "sk-test-5ecret-value"


def _agent_sees_secret() -> list[str]:
    # the agent proves it got the variable without printing it (nor having it in its
    # own command line): it prints the value's digest
    return ["sh", "-c", 'printf %s "$API_TOKEN" | sha256sum; exec sleep 60']


def test_env_secrets_stay_off_command_lines_status_and_logs(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    started = detached("sec", "--agent", "lines", "--env", f"API_TOKEN={SECRET}",
                       "--", *_agent_sees_secret())  # fmt: skip

    def journal() -> str:
        return "".join(p.read_text() for p in (home / "journal").rglob("*.jsonl"))

    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    wait_for(lambda: digest in journal(), what="the agent's output")
    # anyone on the machine can read a command line; the host's must not hold the value
    cmdline = Path(f"/proc/{started['pid']}/cmdline").read_bytes()
    assert SECRET.encode() not in cmdline and b"--env" not in cmdline
    for verb in ("status", "list"):
        shown = run(home, verb, *(["sec"] if verb == "status" else []), "--json")
        assert shown.returncode == 0 and SECRET not in shown.stdout
    assert SECRET not in Path(started["log_path"]).read_text()
    assert SECRET not in journal()


def test_garbage_in_the_private_env_variable_is_refused(home: Path) -> None:
    env = {**os.environ, "AGENTHOST_HOME": str(home), "AGENTHOST_AGENT_ENV": '{"K": 5}'}
    result = subprocess.run(
        [PY, "-m", "agenthost", "serve", "--agent-id", "g", "--agent", "lines", "--", "true"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "AGENTHOST_AGENT_ENV must be a JSON object" in result.stderr
    assert not (home / "hosts" / "g.sock").exists()


@pytest.mark.parametrize(
    ("typo", "guess"),
    [
        ("atach", "'attach'"),
        ("stauts", "'status'"),
        ("histroy", "'history'"),
        ("frget", "'forget'"),
    ],
)
def test_a_mistyped_command_gets_a_did_you_mean(home: Path, typo: str, guess: str) -> None:
    result = run(home, typo, "x1")
    assert result.returncode == 2 and result.stdout == ""
    assert f"Error: No such command '{typo}'. Did you mean {guess}?" in result.stderr


@pytest.mark.parametrize("garbage", ["zzzzzz", "", "-", "\x00x", "é" * 300])
def test_a_command_that_is_nothing_like_any_gets_no_guess(home: Path, garbage: str) -> None:
    if "\x00" in garbage:
        garbage = garbage.replace("\x00", "")  # argv cannot carry NUL
    result = run(home, garbage)
    assert result.returncode == 2 and "Did you mean" not in result.stderr
    assert "Traceback" not in result.stderr


def test_interrupt_says_when_there_is_nothing_to_interrupt(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    detached("i1")  # the demo: idle until a message comes
    wait_for(lambda: run_json(home, "status", "i1")["agent"]["state"] == "idle", what="idle")
    idle = run(home, "interrupt", "i1")
    assert idle.returncode == 0 and idle.stdout == ""
    assert idle.stderr == "nothing to interrupt: i1 is not in a turn\n"
    body = run_json(home, "interrupt", "i1")
    assert body == {"sent": False, "method": None, "reason": "nothing to interrupt"}
    assert not any(e["role"] == "user" for e in run_json(home, "history", "i1")["entries"])

    detached("i2", "--agent", "lines", "--", "sh", "-c", "while read x; do echo $x; done")
    wait_for(lambda: run_json(home, "status", "i2")["agent"]["state"] == "running", what="run")
    busy = run(home, "interrupt", "i2")  # a plain program is always in its "turn"
    assert busy.returncode == 0, busy.stderr
    assert busy.stdout == "interrupted i2 (SIGINT to its process group)\n"

    for garbage in ([], ["../x"], ["i1", "extra"], ["--json=1", "i1"]):
        bad = run(home, "interrupt", *garbage)
        assert bad.returncode == 2, (garbage, bad.stderr)
        assert "Traceback" not in bad.stderr


def test_an_ended_host_points_at_export(
    home: Path, detached: Callable[..., dict[str, Any]]
) -> None:
    detached("e1")
    run_json(home, "send", "e1", "hello")
    wait_for(lambda: run_json(home, "history", "e1")["total"] >= 2, what="the turn")
    run_json(home, "stop", "e1")
    hint = "hint: the host for 'e1' has ended; its journal is still there: "
    hint += "`agenthost export e1` prints its conversation"
    for verb in (["send", "e1", "again"], ["attach", "e1"], ["history", "e1"]):
        ended = run(home, *verb, stdin="")
        assert ended.returncode == 3, (verb, ended.stderr)
        assert "no host is running for agent 'e1'" in ended.stderr and hint in ended.stderr
    body = run_json(home, "history", "e1", code=3)
    assert body["reason"] == "no_host" and "agenthost export e1" in body["hint"]
    exported = run(home, "export", "e1")
    assert exported.returncode == 0 and '"content": "hello"' in exported.stdout

    # no journal (never ran, or purged): no such pointer
    run(home, "forget", "--purge", "e1")
    gone = run(home, "history", "e1")
    assert gone.returncode == 3 and "export" not in gone.stderr
