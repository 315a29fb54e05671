"""The approval policy answers the real permission requests of the real Claude Code and
Codex CLIs (hosted by real hosts, against the fake model APIs) without a person: an
allow rule lets the tool run (its file is there), a deny rule refuses it, no rule (or
an allow rule the command's chaining escapes) leaves it to a person.

Set up as tests/e2e/test_claude_host.py and test_codex_host.py (the CLIs installed from
npm; skipped without them unless ``AGENTHOST_E2E_REQUIRED=1``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.openai import FakeOpenAI, shell
from fakes.openai import text as openai_text

import hosttools
from conftest import HostFactory
from hosttools import Event, HostProc, events_until, history, states

WRITE_COMMAND = "touch marker.txt && echo hello"  # not read-only: Claude Code asks first
APPROVAL_COMMAND = "echo hello | tee approved.txt"
ASKING = ("--agent-opt", "approval_policy=untrusted")  # Codex asks before every command
TIMEOUT = 30.0

attached = functools.partial(hosttools.attached, timeout=TIMEOUT)


def rules(home: Path, *lines: str) -> None:
    (home / "config.toml").write_text("[[policy.rule]]\n" + "\n".join(lines) + "\n")


def turn(conn: hosttools.RawConn, text_in: str) -> list[Event]:
    """Send ``text_in``; the events until the agent is idle again or waits."""
    assert conn.request("host.send", {"input": text_in})["success"]
    return events_until(conn, lambda e: e["type"] == "state" and e["state"] in ("idle", "waiting"))


def decided(events: list[Event]) -> list[dict[str, str]]:
    return [e["decision"] for e in events if e["type"] == "permission_response"]


def audit(host: HostProc) -> list[str]:
    return [e["content"] for e in history(host) if e["role"] == "permission"]


# ---- Claude Code -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return require_cli("claude")


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def dirs() -> Iterator[ClaudeDirs]:
    with temp_dirs() as created:
        yield created


@pytest.fixture
def claude(
    claude_bin: Path, dirs: ClaudeDirs, anthropic: FakeAnthropic, host_factory: HostFactory
) -> Callable[[], HostProc]:
    def factory() -> HostProc:
        env = claude_env(anthropic.url, dirs, extra={**FAST_RETRY_ENV})
        env["AGENTHOST_CLAUDE_BIN"] = str(claude_bin)
        return host_factory(
            "c1",
            "--agent",
            "claude",
            "--cwd",
            str(dirs.worktree),
            command=["--model", DEFAULT_MODEL],
            env=env,
        )

    return factory


def test_an_allow_rule_answers_claude_code_and_the_tool_runs(
    claude: Callable[[], HostProc], anthropic: FakeAnthropic, dirs: ClaudeDirs, home: Path
) -> None:
    # the pattern names "&&" itself: without it the chained command would not match
    rules(home, 'tool = "Bash"', 'command = "touch * && echo *"', 'decision = "allow"')
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = claude()
    with attached(host) as conn:
        events = turn(conn, "Make a marker file")
    assert states(events)[-1] == "idle" and "waiting" not in states(events)
    (decision,) = decided(events)
    assert decision["actor"] == "policy" and decision["behavior"] == "allow"
    assert (dirs.worktree / "marker.txt").exists()  # the real CLI ran it
    assert audit(host) == ['allowed by policy: rule 1 (tool Bash, command "touch * && echo *")']


def test_a_deny_rule_keeps_claude_code_from_running_the_tool(
    claude: Callable[[], HostProc], anthropic: FakeAnthropic, dirs: ClaudeDirs, home: Path
) -> None:
    rules(home, 'tool = "Bash"', 'command = "touch *"', 'decision = "deny"', 'reason = "no marks"')
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("OK, I will not."))
    host = claude()
    with attached(host) as conn:
        events = turn(conn, "Make a marker file")
    assert states(events)[-1] == "idle" and "waiting" not in states(events)
    assert decided(events)[0]["behavior"] == "deny"
    assert not (dirs.worktree / "marker.txt").exists()
    assert audit(host) == ['denied by policy: rule 1 (tool Bash, command "touch *"): no marks']
    # what the model was told: the tool result carries the policy's reason
    assert "denied by the approval policy" in str(anthropic.turn_requests()[-1].messages)


def test_a_chained_command_escapes_an_allow_rule_and_waits_for_a_person(
    claude: Callable[[], HostProc], anthropic: FakeAnthropic, dirs: ClaudeDirs, home: Path
) -> None:
    rules(home, 'tool = "Bash"', 'command = "touch *"', 'decision = "allow"')
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = claude()
    with attached(host) as conn:
        events = turn(conn, "Make a marker file")
        assert states(events)[-1] == "waiting" and decided(events) == []
        assert host.agent()["pending_requests"] == 1
    assert not (dirs.worktree / "marker.txt").exists()


# ---- Codex -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return require_cli("codex")


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def codex(openai: FakeOpenAI) -> Iterator[CodexEnv]:
    env = CodexEnv.create(openai.url, request_max_retries=1, stream_max_retries=1)
    try:
        yield env
    finally:
        env.cleanup()


def start_codex(host_factory: HostFactory, codex: CodexEnv, codex_bin: Path) -> HostProc:
    env = {**codex.env, "AGENTHOST_CODEX_BIN": str(codex_bin)}
    host = host_factory("cx1", "--agent", "codex", "--cwd", str(codex.workdir), *ASKING, env=env)
    host.wait_state("idle", timeout=TIMEOUT)
    return host


def test_an_allow_rule_answers_codex_and_the_command_runs(
    codex_bin: Path, codex: CodexEnv, openai: FakeOpenAI, host_factory: HostFactory, home: Path
) -> None:
    # Codex asks about `/bin/bash -lc '...'`: the rule sees the command inside
    rules(home, 'tool = "shell"', 'command = "echo * | tee *"', 'decision = "allow"')
    openai.enqueue(shell(APPROVAL_COMMAND), openai_text("Written."))
    host = start_codex(host_factory, codex, codex_bin)
    with attached(host) as conn:
        events = turn(conn, "Write approved.txt.")
    assert states(events)[-1] == "idle" and "waiting" not in states(events)
    assert (codex.workdir / "approved.txt").read_text() == "hello\n"
    assert audit(host) == ['allowed by policy: rule 1 (tool shell, command "echo * | tee *")']


def test_a_deny_rule_refuses_codex(
    codex_bin: Path, codex: CodexEnv, openai: FakeOpenAI, host_factory: HostFactory, home: Path
) -> None:
    rules(home, 'tool = "shell"', 'decision = "deny"')
    openai.enqueue(shell(APPROVAL_COMMAND), openai_text("Not written."))
    host = start_codex(host_factory, codex, codex_bin)
    with attached(host) as conn:
        events = turn(conn, "Write approved.txt.")
    assert "waiting" not in states(events)
    assert not (codex.workdir / "approved.txt").exists()
    assert audit(host) == ["denied by policy: rule 1 (tool shell)"]


def test_without_a_rule_codex_waits_for_a_person(
    codex_bin: Path, codex: CodexEnv, openai: FakeOpenAI, host_factory: HostFactory, home: Path
) -> None:
    rules(home, 'tool = "apply_patch"', 'decision = "allow"')
    openai.enqueue(shell(APPROVAL_COMMAND), openai_text("Written."))
    host = start_codex(host_factory, codex, codex_bin)
    with attached(host) as conn:
        events = turn(conn, "Write approved.txt.")
        assert states(events)[-1] == "waiting" and decided(events) == []
    assert not (codex.workdir / "approved.txt").exists()


def test_allow_for_this_session_covers_the_same_command_only(
    claude: Callable[[], HostProc], anthropic: FakeAnthropic, dirs: ClaudeDirs
) -> None:
    other = "touch other.txt && echo hello"
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Made again."))
    anthropic.add(tool_use("Bash", {"command": other}), text("Other made."))
    host = claude()
    with attached(host) as conn:
        events = turn(conn, "Make a marker file")
        (request,) = [e["request"] for e in events if e["type"] == "permission_request"]
        answer = {"request_id": request["request_id"], "behavior": "allow"}
        answer |= {"remember": "session", "actor": "terminal"}
        assert conn.request("host.respond", answer)["success"]
        events_until(conn, lambda e: e["type"] == "state" and e["state"] == "idle")
        (dirs.worktree / "marker.txt").unlink()
        again = turn(conn, "Again")
        assert states(again)[-1] == "idle" and "waiting" not in states(again)
        assert (dirs.worktree / "marker.txt").exists()
        different = turn(conn, "Another file")
        assert states(different)[-1] == "waiting"
    assert not (dirs.worktree / "other.txt").exists()
    assert audit(host) == [
        "allowed by terminal (and for the rest of the session)",
        "allowed by policy: allowed for this session by terminal",
    ]
