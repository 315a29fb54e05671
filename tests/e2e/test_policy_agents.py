"""The approval policy answers the real permission requests of the real Claude Code and
Codex CLIs (hosted by real hosts, against the fake model APIs) without a person: an
allow rule lets the tool run (its file is there), a deny rule refuses it, no rule (or
a line with a command no rule allows) leaves it to a person.

Set up as tests/e2e/test_claude_host.py and test_codex_host.py (the CLIs installed from
npm; skipped without them unless ``AGENTHOST_E2E_REQUIRED=1``).
"""

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from asking import (  # noqa: F401 (fixtures)
    APPROVAL_COMMAND,
    WRITE_COMMAND,
    anthropic,
    attached,
    claude,
    claude_bin,
    codex,
    codex_bin,
    decisions,
    dirs,
    openai,
    start_codex,
)
from claude_env import ClaudeDirs
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.openai import FakeOpenAI, shell
from fakes.openai import text as openai_text

import hosttools
from conftest import HostFactory
from hosttools import Event, HostProc, events_until, states


def rules(home: Path, *lines: str) -> None:
    """config.toml with rules: ``lines`` of one rule, a ``---`` line between rules."""
    text = "\n".join(lines).replace("---", "[[policy.rule]]")
    (home / "config.toml").write_text("[[policy.rule]]\n" + text + "\n")


def turn(conn: hosttools.RawConn, text_in: str) -> list[Event]:
    """Send ``text_in``; the events until the agent is idle again or waits."""
    assert conn.request("host.send", {"input": text_in})["success"]
    return events_until(conn, lambda e: e["type"] == "state" and e["state"] in ("idle", "waiting"))


def decided(events: list[Event]) -> list[dict[str, str]]:
    return [e["decision"] for e in events if e["type"] == "permission_response"]


# ---- Claude Code -----------------------------------------------------------------------


def test_an_allow_rule_answers_claude_code_and_the_tool_runs(
    claude: Callable[[], HostProc], anthropic: FakeAnthropic, dirs: ClaudeDirs, home: Path
) -> None:
    # `touch marker.txt && echo hello`: each command of the line must be allowed
    rules(
        home,
        'tool = "Bash"',
        'command = "touch *"',
        'decision = "allow"',
        "---",
        'tool = "Bash"',
        'command = "echo *"',
        'decision = "allow"',
    )
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = claude()
    with attached(host) as conn:
        events = turn(conn, "Make a marker file")
    assert states(events)[-1] == "idle" and "waiting" not in states(events)
    (decision,) = decided(events)
    assert decision["actor"] == "policy" and decision["behavior"] == "allow"
    assert (dirs.worktree / "marker.txt").exists()  # the real CLI ran it
    assert decisions(host) == [
        'allowed by policy: rule 1 (tool Bash, command "touch *") for "touch marker.txt"; '
        'rule 2 (tool Bash, command "echo *") for "echo hello"'
    ]


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
    assert decisions(host) == [
        'denied by policy: rule 1 (tool Bash, command "touch *") for "touch marker.txt": no marks'
    ]
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


def test_an_allow_rule_answers_codex_and_the_command_runs(
    codex_bin: Path, codex: CodexEnv, openai: FakeOpenAI, host_factory: HostFactory, home: Path
) -> None:
    # Codex asks about `/bin/bash -lc '...'`: the rules see the commands inside
    rules(
        home,
        'tool = "shell"',
        'command = "echo *"',
        'decision = "allow"',
        "---",
        'tool = "shell"',
        'command = "tee approved.txt"',
        'decision = "allow"',
    )
    openai.enqueue(shell(APPROVAL_COMMAND), openai_text("Written."))
    host = start_codex(host_factory, codex, codex_bin)
    with attached(host) as conn:
        events = turn(conn, "Write approved.txt.")
    assert states(events)[-1] == "idle" and "waiting" not in states(events)
    assert (codex.workdir / "approved.txt").read_text() == "hello\n"
    assert decisions(host) == [
        'allowed by policy: rule 1 (tool shell, command "echo *") for "echo hello"; '
        'rule 2 (tool shell, command "tee approved.txt") for "tee approved.txt"'
    ]


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
    assert decisions(host) == ["denied by policy: rule 1 (tool shell)"]


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
    assert decisions(host) == [
        "allowed by terminal (and for the rest of the session)",
        "allowed by policy: allowed for this session by terminal",
    ]
