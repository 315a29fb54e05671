"""``daemon.switch`` (``agenthost tui``): a structured agent's own TUI on its session,
and back, with a stand-in for the ``claude`` CLI (tests/fixtures/fake_claude.py: the
demo agent in ``-p`` mode, a line-reading "TUI" that reports a new session through its
SessionStart hook otherwise). The real Claude Code does the same in
tests/e2e/test_tui_switch.py.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemontools import DaemonWorld, agent_status, daemon_world, use_fake_claude
from hosttools import RawConn, wait_for


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        use_fake_claude(started)
        yield started


def sock(world: DaemonWorld, agent_id: str) -> Path:
    return world.home / "hosts" / f"{agent_id}.sock"


def spawn(world: DaemonWorld, agent_id: str = "c1", agent: str = "claude") -> None:
    world.request(
        "daemon.spawn",
        {
            "agent_id": agent_id,
            "agent": agent,
            "cwd": str(world.home),
            "command": ["--model", "m1"] if agent == "claude" else [],
            "env": {"SECRET_TOKEN": "s3"},
            "restart": {"policy": "on-failure", "backoff": 0.1},
        },
    )
    wait_for(lambda: status(world, agent_id)["state"] == "idle", what="the agent idle")


def status(world: DaemonWorld, agent_id: str = "c1") -> dict[str, Any]:
    return agent_status(world, agent_id)


def turn(world: DaemonWorld, message: str, agent_id: str = "c1") -> dict[str, Any]:
    with RawConn(sock(world, agent_id), timeout=30) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        result: dict[str, Any] = conn.read_until(lambda f: f.get("type") == "result")["result"]
        return result


def screen(world: DaemonWorld, agent_id: str = "c1") -> str:
    try:
        with RawConn(sock(world, agent_id)) as conn:
            answer = conn.request("host.screen")
    except OSError:
        return ""
    return "\n".join(answer["payload"]["lines"]) if answer["success"] else ""


def type_keys(world: DaemonWorld, keys: str, agent_id: str = "c1") -> None:
    with RawConn(sock(world, agent_id)) as conn:
        assert conn.request("host.input", {"data": keys})["success"]


def switch(world: DaemonWorld, to: str, agent_id: str = "c1") -> dict[str, Any]:
    return world.call("daemon.switch", {"agent_id": agent_id, "to": to})


def in_tui(world: DaemonWorld, session: str) -> str:
    """Wait for the TUI on ``session``; the new session its hook reported."""
    wait_for(lambda: f"fake TUI resumed {session}" in screen(world), what="the TUI")
    new: str = wait_for(
        lambda: (s := status(world).get("session_id")) and s != session and s,
        what="the TUI's session",
    )
    return new


def structured_again(world: DaemonWorld, session: str) -> dict[str, Any]:
    """Wait until the structured agent runs again, resuming ``session``."""
    agent = wait_for(
        lambda: (
            (a := world.agents()["c1"])["status"] == "running"
            and a["spec"]["agent"] == "claude"
            and "--resume" in (info := status(world)).get("command", [])
            and info["state"] == "idle"
            and a
        ),
        what="the structured agent again",
    )
    command = status(world)["command"]
    assert command[command.index("--resume") + 1] == session
    return agent


def stream(world: DaemonWorld, agent_id: str = "c1") -> list[dict[str, Any]]:
    """Every event of the agent's stream, from its journal, through its host."""
    with RawConn(sock(world, agent_id)) as conn:
        head = conn.request("host.attach", {"offset": 0})["payload"]["stream_offset"]
        events: list[dict[str, Any]] = []
        while not events or events[-1]["offset"] < head:
            frame = conn.read_until(lambda f: f.get("kind") == "event")
            events.append(frame)
    return events


def test_a_tui_on_the_same_session_and_back_when_the_person_quits(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    spawn(world)
    first = turn(world, "hello there")["session_id"]
    wait_for(lambda: world.agents()["c1"].get("session_id") == first, what="session recorded")

    answer = switch(world, "tui")
    assert answer["success"], (answer["error"], answer.get("code"))
    switched = answer["payload"]
    assert switched["to"] == "tui" and switched["switched"] and switched["session_id"] == first
    assert switched["command"][1:4] == ["--resume", first, "--model"]
    agent = world.agents()["c1"]
    assert agent["tui"] and agent["spec"]["agent"] == "pty"
    assert agent["structured_spec"]["agent"] == "claude"
    assert agent["structured_spec"]["env"] == {"SECRET_TOKEN": "<redacted>"}
    assert agent["spec"]["env"] == {"SECRET_TOKEN": "<redacted>"}
    (kept,) = world.registry("SELECT structured_spec FROM agents WHERE agent_id = 'c1'")
    assert json.loads(kept[0])["env"] == {"SECRET_TOKEN": "s3"}  # for the way back
    assert switch(world, "tui")["payload"]["switched"] is False  # there already

    newer = in_tui(world, first)
    type_keys(world, "typed in the TUI\r")
    wait_for(lambda: "heard: typed in the TUI" in screen(world), what="the TUI's answer")
    type_keys(world, "q\r")  # the person quits: back to the structured agent

    agent = structured_again(world, newer)
    assert not agent.get("tui") and agent.get("structured_spec") is None
    assert turn(world, "and again")["session_id"] == newer
    events = stream(world)
    assert [e["offset"] for e in events] == list(range(1, len(events) + 1))  # one stream
    switches = [e["governance"] for e in events if e["type"] == "governance"]
    assert [(g["action"], g["actor"], g["to"]) for g in switches] == [
        ("switched", "cli", "tui"),
        ("switched", "daemon", "structured"),
    ]
    kinds = [e["type"] for e in events]
    tui_at = kinds.index("governance")
    back_at = len(kinds) - 1 - kinds[::-1].index("governance")
    assert "result" in kinds[:tui_at] and "result" in kinds[back_at:]
    assert "terminal" in kinds[tui_at:back_at] and "terminal" not in kinds[:tui_at]
    entries = [
        e["chat_entry"]["content"]
        for e in events
        if e["type"] == "chat_entry" and e["chat_entry"]["role"] == "governance"
    ]
    assert entries[0].startswith(f"switched by cli: opened the Claude Code TUI on session {first}")
    assert newer in entries[1]


def test_back_leaves_the_tui_without_waiting_for_it(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    spawn(world)
    first = turn(world, "hello")["session_id"]
    assert switch(world, "tui")["success"]
    newer = in_tui(world, first)
    tui_host = world.host_pids()["c1"]

    answer = switch(world, "structured")
    assert answer["success"], answer
    assert answer["payload"]["to"] == "structured" and answer["payload"]["session_id"] == newer
    assert world.host_pids()["c1"] != tui_host
    structured_again(world, newer)
    assert switch(world, "structured")["payload"]["switched"] is False
    outcomes = world.registry("SELECT outcome, reason FROM exits WHERE agent_id = 'c1'")
    assert [o for o, _ in outcomes] == ["stopped", "stopped"]
    assert "agenthost tui --back" in outcomes[-1][1]


def test_what_cannot_switch_is_refused_and_nothing_stops(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    spawn(world)  # no turn yet: no session
    answer = switch(world, "tui")
    assert answer["code"] == "invalid_payload" and "no session yet" in answer["error"]
    host = world.host_pids()["c1"]

    turn(world, "hello")
    with RawConn(sock(world, "c1")) as conn:  # a turn runs
        assert conn.request("host.send", {"input": "/sleep 60"})["success"]
    wait_for(lambda: status(world)["state"] == "running", what="the long turn")
    answer = switch(world, "tui")
    assert answer["code"] == "busy" and "a turn runs" in answer["error"], answer
    with RawConn(sock(world, "c1")) as conn:
        assert conn.request("host.interrupt")["success"]
    wait_for(lambda: status(world)["state"] == "idle", what="the interrupt")

    with RawConn(sock(world, "c1")) as conn:  # a permission request waits
        assert conn.request("host.send", {"input": "/ask"})["success"]
    wait_for(lambda: status(world)["state"] == "waiting", what="the question")
    answer = switch(world, "tui")
    assert answer["code"] == "busy" and "permission request" in answer["error"], answer
    assert world.host_pids()["c1"] == host and world.agents()["c1"]["spec"]["agent"] == "claude"

    spawn(world, "d1", "demo")
    turn(world, "hello", "d1")
    answer = switch(world, "tui", "d1")
    assert answer["code"] == "invalid_payload" and "a demo agent has no TUI" in answer["error"]
    answer = switch(world, "tui", "ghost")
    assert answer["code"] == "agent_not_running", answer
    for garbage in ({"agent_id": "c1"}, {"agent_id": "c1", "to": "web"}, {"to": "tui"}):
        answer = world.call("daemon.switch", garbage)
        assert answer["code"] == "invalid_payload", (garbage, answer)
    answer = world.call("daemon.switch", {"agent_id": "../x", "to": "tui"})
    assert answer["code"] == "invalid_payload", answer


def test_a_daemon_killed_between_switches_still_knows(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    spawn(world)
    first = turn(world, "hello")["session_id"]
    assert switch(world, "tui")["success"]
    newer = in_tui(world, first)

    # killed while the TUI runs: the next daemon follows it, switched
    world.daemons[-1].signal(signal.SIGKILL)
    world.daemons[-1].wait_exit()
    world.start_daemon("--scan-interval", "0")
    assert world.agents()["c1"]["tui"] is True
    type_keys(world, "q\r")
    structured_again(world, newer)
    session = turn(world, "once more")["session_id"]
    wait_for(lambda: world.agents()["c1"].get("session_id") == session, what="session recorded")

    # killed, and the TUI quits while no daemon runs: the next one returns
    assert switch(world, "tui")["success"]
    newest = in_tui(world, session)
    world.daemons[-1].signal(signal.SIGKILL)
    world.daemons[-1].wait_exit()
    type_keys(world, "q\r")
    wait_for(lambda: status(world).get("state") == "done", what="the TUI's end")
    world.start_daemon("--scan-interval", "0")
    structured_again(world, newest)


def test_the_tui_command_switches_and_says_how_to_attach(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    spawn(world)
    refused = world.cli("tui", "c1")
    assert refused.returncode == 2 and "no session yet" in refused.stderr, refused
    assert "hint: send it a message first" in refused.stderr
    first = turn(world, "hello")["session_id"]

    done = world.cli("tui", "c1")  # no terminal here: it switches, and says how to attach
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"c1 runs its TUI on session {first} (agenthost tui c1 --back returns)",
        "attach to it: agenthost attach c1",
    ]
    newer = in_tui(world, first)
    again = world.cli("tui", "c1", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["switched"] is False

    back = world.cli("tui", "c1", "--back")
    assert back.returncode == 0, back.stderr
    assert back.stdout == f"c1 runs as a structured agent again on session {newer}\n"
    structured_again(world, newer)
    with RawConn(sock(world, "c1")) as conn:
        assert conn.request("host.send", {"input": "/sleep 60"})["success"]
    wait_for(lambda: status(world)["state"] == "running", what="the long turn")
    busy = world.cli("tui", "c1")
    assert busy.returncode == 6 and "agenthost interrupt c1" in busy.stderr, busy
    ghost = world.cli("tui", "ghost")
    assert ghost.returncode == 3, ghost
