"""``agenthost tui`` with the real Codex: a structured ``codex app-server`` agent opens
``codex resume THREAD`` in a terminal agent, a turn typed there continues the thread,
and quitting the TUI brings the structured agent back on it (docs/terminal.md).
Skipped without the CLI unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clis import require_cli
from codex_env import CodexEnv
from fakes.openai import FakeOpenAI, text

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return require_cli("codex")


@pytest.fixture
def world(home: Path, codex_bin: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.env["AGENTHOST_CODEX_BIN"] = str(codex_bin)  # the daemon's and its hosts'
        yield started


def sock(world: DaemonWorld) -> Path:
    return world.home / "hosts" / "cx.sock"


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


def said_last(api: FakeOpenAI) -> str:
    """What the user said in the newest request of the conversation (Codex also asks
    the model for a title of a new thread, at a time of its own: not that one)."""
    for call in reversed(api.responses_requests()):
        said = "\n".join(call.user_texts())
        if "single-line task title" not in said:
            return said
    raise AssertionError("no request of the conversation")


def test_a_structured_codex_opens_its_tui_on_the_thread_and_comes_back(
    world: DaemonWorld,
) -> None:
    with FakeOpenAI([text("Noted: blue."), text("Noted: a cat."), text("Blue, a cat.")]) as api:
        env = CodexEnv.create(api.url)
        try:
            with env.config_path.open("a") as config:  # the folder's trust screen
                config.write(f'\n[projects."{env.workdir}"]\ntrust_level = "trusted"\n')
            world.start_daemon("--scan-interval", "0")
            world.request(
                "daemon.spawn",
                {"agent_id": "cx", "agent": "codex", "cwd": str(env.workdir), "env": env.env},
            )
            wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT)
            thread = turn(world, "My colour is blue")["session_id"]
            wait_for(lambda: world.agents()["cx"].get("session_id") == thread, what="session")

            switched = world.request("daemon.switch", {"agent_id": "cx", "to": "tui"}, TIMEOUT)
            assert switched["command"][1] == "resume" and switched["command"][-1] == thread
            wait_for(lambda: "Noted: blue." in screen(world), TIMEOUT, "the thread so far")
            wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT)
            assert request(world, "host.send", {"input": "My pet is a cat"}) is not None
            wait_for(lambda: "Noted: a cat." in screen(world), TIMEOUT, "the TUI's answer")
            said = said_last(api)
            assert "My colour is blue" in said, said  # the same thread
            wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT)

            request(world, "host.input", {"data": "/quit"})
            wait_for(lambda: "/quit" in screen(world), TIMEOUT, "/quit typed")
            request(world, "host.input", {"data": "\r"})  # the person quits the TUI

            def structured() -> bool:
                agent = world.agents()["cx"]
                info = request(world, "host.status").get("agent", {})
                return (
                    agent["status"] == "running"
                    and not agent.get("tui")
                    and agent["spec"]["agent"] == "codex"
                    and info.get("state") == "idle"
                )

            wait_for(structured, TIMEOUT, "the structured agent again")
            assert world.agents()["cx"]["spec"]["resume"] == thread
            turn(world, "What are my colour and my pet?")
            said = said_last(api)
            assert "My colour is blue" in said and "My pet is a cat" in said, said
        finally:
            env.cleanup()
