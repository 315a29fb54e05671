"""``agenthost fork`` with the real Claude Code CLI against the fake Anthropic API.

A parent agent has two turns; ``fork P F1`` continues the whole conversation and
``fork P F2 --at OFFSET`` (the end of the first turn) only its first turn: the first
model request of each fork (as the fake API records it) carries the parent's messages
up to the point, and the parent's next request carries none of the forks'. Skipped
when the CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asking import anthropic, claude_bin, dirs  # noqa: F401 (fixtures)
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env
from fakes.anthropic import FakeAnthropic, text

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for


@pytest.fixture
def world(home: Path, claude_bin: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.env["AGENTHOST_CLAUDE_BIN"] = str(claude_bin)
        yield started


def turn(sock: Path, message: str) -> dict[str, Any]:
    """Send a message; the ``result`` event that ends its turn (with its offset)."""
    with RawConn(sock, timeout=60) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        return conn.read_until(lambda f: f.get("type") == "result")


def fork(world: DaemonWorld, *args: str) -> dict[str, Any]:
    done = world.cli("fork", *args, "--json", "--home", str(world.home), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def said(anthropic: FakeAnthropic, last: str) -> list[str]:
    """The user texts of the model request whose last user message has ``last``: the
    first request of the turn that sent it."""
    for request in anthropic.turn_requests():
        texts = anthropic.user_texts(request)
        if texts and last in texts[-1]:
            return texts
    raise AssertionError(f"no model request ends with {last!r}")


def first_events(sock: Path, count: int) -> list[dict[str, Any]]:
    with RawConn(sock, timeout=60) as conn:
        conn.request("host.attach", {"offset": 0})
        return conn.events(count)


def test_fork_continues_the_parents_conversation_up_to_the_point(
    world: DaemonWorld, dirs: ClaudeDirs, anthropic: FakeAnthropic
) -> None:
    anthropic.add(text("A-one."), text("A-two."), text("F1-three."), text("F2-four."))
    anthropic.add(text("P-five."))
    world.start_daemon("--scan-interval", "0")
    world.request(
        "daemon.spawn",
        {
            "agent_id": "p",
            "agent": "claude",
            "cwd": str(dirs.worktree),
            "command": ["--model", DEFAULT_MODEL],
            "env": claude_env(anthropic.url, dirs, extra=FAST_RETRY_ENV),
            "budget_usd": 5.0,
        },
    )
    hosts = world.home / "hosts"
    first = turn(hosts / "p.sock", "one: red")
    session = first["result"]["session_id"]
    turn(hosts / "p.sock", "two: blue")
    wait_for(lambda: world.agents()["p"].get("session_id") == session, what="session recorded")

    whole = fork(world, "p", "f1")
    assert whole["forked_from"] == "p" and whole["fork"]["session_id"] == session
    turn(hosts / "f1.sock", "three: green")
    texts = said(anthropic, "three: green")
    assert any("one: red" in t for t in texts) and any("two: blue" in t for t in texts)

    cut = fork(world, "p", "f2", "--at", str(first["offset"]))
    assert cut["fork"]["offset"] == first["offset"] and cut["fork"]["point"]
    turn(hosts / "f2.sock", "four: white")
    f2_texts = said(anthropic, "four: white")
    assert any("one: red" in t for t in f2_texts)
    assert not any("two: blue" in t for t in f2_texts)  # cut after the first turn

    turn(hosts / "p.sock", "five: black")
    p_texts = said(anthropic, "five: black")
    assert any("two: blue" in t for t in p_texts)
    assert not any(w in t for t in p_texts for w in ("three", "four"))  # untouched

    # the forks' own sessions, their record, and what list and status say
    agents = world.agents()
    assert agents["f1"]["forked_from"] == "p" and agents["f2"]["forked_from"] == "p"
    assert agents["f1"]["session_id"] not in (None, session)
    assert agents["f1"]["spec"]["budget_usd"] == 5.0
    assert agents["f1"]["spec"]["env"]["ANTHROPIC_BASE_URL"] == "<redacted>"
    note = first_events(hosts / "f2.sock", 1)[0]
    assert note["type"] == "governance"
    assert note["governance"]["action"] == "forked"
    assert note["governance"]["from_agent"] == "p"
    assert note["governance"]["from_offset"] == first["offset"]
    assert note["governance"]["session_id"] == session
    with RawConn(hosts / "f1.sock") as conn:
        info = conn.request("host.status")["payload"]["agent"]
    assert info["forked_from"] == "p"
    assert "--fork-session" in info["command"] and session in info["command"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def test_a_fork_in_a_worktree_of_its_own_continues_the_conversation(
    world: DaemonWorld, dirs: ClaudeDirs, anthropic: FakeAnthropic
) -> None:
    """Claude Code keeps a session under its project's directory: the fork runs in
    another worktree, and still finds its parent's session."""
    anthropic.add(text("A-one."), text("F-two."))
    repo = dirs.worktree
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.invalid"),
        ("config", "user.name", "t"),
        ("commit", "-q", "--allow-empty", "-m", "first"),
    ):
        git(repo, *args)
    world.start_daemon("--scan-interval", "0")
    world.request(
        "daemon.spawn",
        {
            "agent_id": "p",
            "agent": "claude",
            "worktree": "",
            "repo": str(repo),
            "command": ["--model", DEFAULT_MODEL],
            "env": claude_env(anthropic.url, dirs, extra=FAST_RETRY_ENV),
        },
    )
    hosts = world.home / "hosts"
    turn(hosts / "p.sock", "one: red")
    wait_for(lambda: world.agents()["p"].get("session_id"), what="session recorded")
    fork(world, "p", "f")
    assert world.agents()["f"]["worktree"] == str(world.home / "worktrees" / "f")
    result = turn(hosts / "f.sock", "two: green")
    assert result["result"].get("is_error") is not True, result
    texts = said(anthropic, "two: green")
    assert any("one: red" in t for t in texts)
