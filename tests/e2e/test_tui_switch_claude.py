"""``agenthost tui`` with the real Claude Code: one session, both ways (docs/terminal.md).

The daemon spawns ``--agent claude`` (the real CLI from npm, against
:class:`fakes.anthropic.FakeAnthropic`); one structured turn makes the session; the
daemon switches the agent to the CLI's own TUI (``claude --resume SESSION`` in a
terminal agent), driven here through the host protocol (``host.send``, ``host.input``,
``host.screen``); a turn typed in the TUI sends the earlier conversation to the model;
quitting the TUI brings the structured agent back on the session, and its ``send`` turn
sees the whole conversation. Skipped without the CLI unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from fakes.anthropic import FakeAnthropic, text
from test_hooks_tui import first_run_done

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def claude_bin() -> Path:
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
        started.env["AGENTHOST_CLAUDE_BIN"] = str(claude_bin)  # the daemon's and its hosts'
        yield started


def sock(world: DaemonWorld) -> Path:
    return world.home / "hosts" / "cl.sock"


def request(world: DaemonWorld, mtype: str, payload: Any = None) -> dict[str, Any]:
    try:
        with RawConn(sock(world), timeout=30) as conn:
            answer = conn.request(mtype, payload)
    except OSError:
        return {}
    return answer.get("payload") or {} if answer["success"] else {}


def screen(world: DaemonWorld) -> str:
    return "\n".join(request(world, "host.screen").get("lines", []))


def turn(world: DaemonWorld, message: str) -> dict[str, Any]:
    with RawConn(sock(world), timeout=TIMEOUT) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        result: dict[str, Any] = conn.read_until(lambda f: f.get("type") == "result")["result"]
        return result


def test_a_structured_claude_opens_its_tui_on_the_session_and_comes_back(
    world: DaemonWorld, dirs: ClaudeDirs, server: FakeAnthropic
) -> None:
    server.add(text("Noted: blue."), text("Noted: a cat."), text("Blue, and a cat."))
    env = claude_env(server.url, dirs, extra=FAST_RETRY_ENV)
    first_run_done(dirs, env["ANTHROPIC_API_KEY"])  # the TUI opens at its prompt
    world.start_daemon("--scan-interval", "0")
    world.request(
        "daemon.spawn",
        {
            "agent_id": "cl",
            "agent": "claude",
            "cwd": str(dirs.worktree),
            "command": ["--model", DEFAULT_MODEL],
            "env": env,
        },
    )
    session = turn(world, "My colour is blue")["session_id"]
    wait_for(lambda: world.agents()["cl"].get("session_id") == session, what="session recorded")

    switched = world.request("daemon.switch", {"agent_id": "cl", "to": "tui"}, timeout=TIMEOUT)
    assert switched["command"][1:3] == ["--resume", session]
    wait_for(lambda: "for shortcuts" in screen(world), TIMEOUT, "the TUI's prompt")
    wait_for(lambda: "Noted: blue." in screen(world), TIMEOUT, "the conversation so far")
    wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT, "idle")
    assert request(world, "host.send", {"input": "My pet is a cat"})
    wait_for(lambda: "Noted: a cat." in screen(world), TIMEOUT, "the TUI's answer")
    tui_call = server.turn_requests()[-1]
    assert "My colour is blue" in "\n".join(server.user_texts(tui_call))  # the same session
    wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT, "idle")
    newest = request(world, "host.status")["agent"]["session_id"]

    assert request(world, "host.input", {"data": "/exit"}) is not None
    wait_for(lambda: "/exit" in screen(world), TIMEOUT, "/exit typed")
    request(world, "host.input", {"data": "\r"})  # the person quits the TUI

    def structured() -> bool:
        agent = world.agents()["cl"]
        info = request(world, "host.status").get("agent", {})
        return (
            agent["status"] == "running"
            and not agent.get("tui")
            and "--resume" in info.get("command", [])
            and info.get("state") == "idle"
        )

    wait_for(structured, TIMEOUT, "the structured agent again")
    command = request(world, "host.status")["agent"]["command"]
    assert command[command.index("--resume") + 1] == newest
    turn(world, "What are my colour and my pet?")
    said = "\n".join(server.user_texts())
    assert "My colour is blue" in said and "My pet is a cat" in said, said

    with RawConn(sock(world)) as conn:
        entries = conn.request("host.history")["payload"]["entries"]
    roles = [(e["role"], e.get("content", "")) for e in entries]
    switches = [c for r, c in roles if r == "governance" and c.startswith("switched")]
    assert len(switches) == 2, roles
    assert roles[0] == ("user", "My colour is blue")
    assert ("user", "My pet is a cat") in roles  # the TUI's turn, typed by host.send
    assert roles[-1][0] == "assistant" and "Blue, and a cat." in roles[-1][1]
