"""``agenthost fork`` of real ACP agents: Claude's and Codex's ACP adapters offer
``session/fork`` (unstable in the ACP schema) and are forked with it; Gemini CLI does
not, and is refused before anything starts. Against the fake model APIs; skipped when
an agent cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_env import KITS, AgentDirs, AgentKit, agent_command, agent_dirs, require_agent

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for

TIMEOUT = 60.0


@pytest.fixture
def dirs() -> Iterator[AgentDirs]:
    with agent_dirs() as made:
        yield made


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.start_daemon("--scan-interval", "0")
        yield started


def kit(name: str) -> AgentKit:
    require_agent(name)
    return KITS[name]


def info(world: DaemonWorld, agent_id: str) -> dict[str, Any]:
    path = world.home / "hosts" / f"{agent_id}.sock"
    if not path.exists():
        return {}
    with RawConn(path) as conn:
        answer = conn.request("host.status")
    return answer["payload"]["agent"] if answer["success"] else {}


def spawn(world: DaemonWorld, agent_id: str, api: Any, dirs: AgentDirs, name: str) -> None:
    argv, env = agent_command(name, api.url, dirs)
    world.request(
        "daemon.spawn",
        {"agent_id": agent_id, "agent": "acp", "cwd": str(dirs.work), "command": argv, "env": env},
    )
    wait_for(lambda: info(world, agent_id).get("state") == "idle", TIMEOUT, "the agent idle")


def turn(world: DaemonWorld, agent_id: str, message: str) -> None:
    wait_for(lambda: info(world, agent_id).get("state") == "idle", TIMEOUT, "idle")
    with RawConn(world.home / "hosts" / f"{agent_id}.sock", timeout=TIMEOUT) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        conn.read_until(lambda f: f.get("type") == "result")


def fork(world: DaemonWorld, *args: str) -> tuple[int, dict[str, Any]]:
    done = world.cli("fork", *args, "--json", "--home", str(world.home), timeout=120)
    body: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, body


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_an_acp_agent_that_offers_session_fork_is_forked(
    world: DaemonWorld, dirs: AgentDirs, name: str
) -> None:
    agent = kit(name)
    with agent.fake(default=agent.text("Noted.")) as api:
        spawn(world, "p", api, dirs, name)
        assert info(world, "p")["session_fork"] is True
        turn(world, "p", "one: red")
        parent_session = info(world, "p")["session_id"]
        code, body = fork(world, "p", "f")
        assert code == 0, body
        wait_for(lambda: info(world, "f").get("state") == "idle", TIMEOUT, "the fork idle")
        assert info(world, "f")["session_id"] not in (None, parent_session)
        turn(world, "f", "two: green")
        bodies = [str(r.body) for r in api.requests]
        assert any("one: red" in b and "two: green" in b for b in bodies)
        turn(world, "p", "three: black")
        bodies = [str(r.body) for r in api.requests]
        assert not any("two: green" in b and "three: black" in b for b in bodies)
        code, body = fork(world, "p", "g", "--at", "3")
        assert code == 2 and "copies the whole session" in body["error"]


def test_an_acp_agent_without_session_fork_is_refused(world: DaemonWorld, dirs: AgentDirs) -> None:
    agent = kit("gemini")
    with agent.fake(default=agent.text("Noted.")) as api:
        spawn(world, "p", api, dirs, "gemini")
        turn(world, "p", "one: red")
        code, body = fork(world, "p", "f")
    assert code == 2
    assert "does not offer session/fork" in body["error"]
    assert "f" not in world.agents()
