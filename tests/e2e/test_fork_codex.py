"""``agenthost fork`` with the real Codex CLI (``codex app-server``) against the fake
Responses API: ``thread/fork`` of the parent's thread, whole and ``--at`` the end of
its first turn (``lastTurnId``). The first model request of each fork carries the
parent's conversation up to the point; the parent's next one none of the forks'.
Skipped when the CLI cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asking import codex, codex_bin, openai  # noqa: F401 (fixtures)
from codex_env import CodexEnv
from fakes.openai import FakeOpenAI

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for


@pytest.fixture
def world(home: Path, codex_bin: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.env["AGENTHOST_CODEX_BIN"] = str(codex_bin)
        yield started


def turn(sock: Path, message: str) -> dict[str, Any]:
    """Send a message once the agent is idle; the ``result`` event of its turn."""
    wait_for(lambda: _state(sock) == "idle", 60, "the agent idle")
    with RawConn(sock, timeout=60) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        return conn.read_until(lambda f: f.get("type") == "result")


def _state(sock: Path) -> str | None:
    if not sock.exists():
        return None
    with RawConn(sock) as conn:
        state: str = conn.request("host.status")["payload"]["agent"]["state"]
        return state


def said(openai: FakeOpenAI, last: str) -> list[str]:
    """The user texts of the conversation request whose last user text has ``last``."""
    for call in openai.responses_requests():
        texts = call.user_texts()
        if texts and last in texts[-1]:
            return texts
    raise AssertionError(f"no request ends with {last!r}")


def fork(world: DaemonWorld, *args: str) -> dict[str, Any]:
    done = world.cli("fork", *args, "--json", "--home", str(world.home), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_codex_fork_continues_the_thread_up_to_the_point(
    world: DaemonWorld, codex: CodexEnv, openai: FakeOpenAI
) -> None:
    world.start_daemon("--scan-interval", "0")
    world.request(
        "daemon.spawn",
        {"agent_id": "p", "agent": "codex", "cwd": str(codex.workdir), "env": codex.env},
    )
    hosts = world.home / "hosts"
    first = turn(hosts / "p.sock", "one: red")
    thread = first["result"]["session_id"]
    turn(hosts / "p.sock", "two: blue")
    wait_for(lambda: world.agents()["p"].get("session_id") == thread, what="thread recorded")

    whole = fork(world, "p", "f1")
    assert whole["fork"]["session_id"] == thread and "point" not in whole["fork"]
    turn(hosts / "f1.sock", "three: green")
    texts = said(openai, "three: green")
    assert any("one: red" in t for t in texts) and any("two: blue" in t for t in texts)

    cut = fork(world, "p", "f2", "--at", str(first["offset"]))
    assert cut["fork"]["point"]  # the first turn's id
    turn(hosts / "f2.sock", "four: white")
    texts = said(openai, "four: white")
    assert any("one: red" in t for t in texts)
    assert not any("two: blue" in t for t in texts)

    turn(hosts / "p.sock", "five: black")
    texts = said(openai, "five: black")
    assert any("two: blue" in t for t in texts)
    assert not any(w in t for t in texts for w in ("three", "four"))

    agents = world.agents()
    assert agents["f1"]["forked_from"] == "p"
    assert agents["f1"]["session_id"] not in (None, thread)
    assert agents["f2"]["session_id"] not in (None, thread, agents["f1"]["session_id"])
