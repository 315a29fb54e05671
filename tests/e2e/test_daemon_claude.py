"""The daemon restarts a crashed Claude Code agent with ``--resume`` (the real CLI).

The daemon spawns ``--agent claude`` (the real CLI from npm, against
:class:`fakes.anthropic.FakeAnthropic`) with the restart policy ``on-failure``; one turn
gives the session an id; the host is killed with SIGKILL; the daemon starts a new host
that resumes that session, and the resumed CLI sends the earlier conversation to the
model. Skipped when the CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from fakes.anthropic import FakeAnthropic, text

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for


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


@pytest.fixture
def world(home: Path, claude_bin: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.env["AGENTHOST_CLAUDE_BIN"] = str(claude_bin)  # read by the host's adapter
        yield started


def turn(sock: Path, message: str) -> dict[str, Any]:
    """Send a message; the ``result`` of its turn."""
    with RawConn(sock, timeout=60) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        result: dict[str, Any] = conn.read_until(lambda f: f.get("type") == "result")["result"]
        return result


def test_a_killed_claude_host_is_restarted_with_resume(
    world: DaemonWorld, dirs: ClaudeDirs, server: FakeAnthropic
) -> None:
    server.add(text("Remember: blue."), text("You said blue."))
    world.start_daemon("--scan-interval", "0")
    world.request(
        "daemon.spawn",
        {
            "agent_id": "cl",
            "agent": "claude",
            "cwd": str(dirs.worktree),
            "command": ["--model", DEFAULT_MODEL],
            "env": claude_env(server.url, dirs, extra=FAST_RETRY_ENV),
            "restart": {"policy": "on-failure", "backoff": 0.1},
        },
    )
    sock = world.home / "hosts" / "cl.sock"
    session = turn(sock, "My colour is blue")["session_id"]
    wait_for(lambda: world.agents()["cl"].get("session_id") == session, what="session recorded")

    old_host = world.host_pids()["cl"]
    os.kill(old_host, signal.SIGKILL)
    agent = wait_for(
        lambda: (a := world.agents()["cl"])["restarts"] == 1 and a["status"] == "running" and a,
        60,
        "the restart",
    )
    assert agent["host_pid"] != old_host
    with RawConn(sock) as conn:
        info = conn.request("host.status")["payload"]["agent"]
    assert "--resume" in info["command"] and session in info["command"]
    turn(sock, "What is my colour?")
    # the resumed CLI sent the earlier conversation to the model
    assert "My colour is blue" in server.user_texts()[0]
    assert world.registry("SELECT outcome FROM exits WHERE agent_id = 'cl'") == [("lost",)]
