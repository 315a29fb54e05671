"""Notices sent by a real daemon about real demo agents (``/ask`` makes a real
permission request), received by an HTTP sink on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from notifysink import Sink, closed_port, sink

from agenthost.attention.keys import link_key
from agenthost.attention.links import verify
from agenthost.paths import socket_path

from daemontools import DaemonWorld
from hosttools import RawConn, wait_for


@pytest.fixture
def server() -> Iterator[Sink]:
    with sink() as started:
        yield started


def configure(world: DaemonWorld, text: str) -> None:
    (world.home / "config.toml").write_text(text)


def hook(server: Sink, name: str = "hook", path: str = "/hook") -> str:
    return f'[notify.channels.{name}]\ntype = "webhook"\nurl = "{server.url}{path}"\n'


def spawn_demo(world: DaemonWorld, agent_id: str, project: str = "") -> None:
    world.request("daemon.spawn", {"agent_id": agent_id, "agent": "demo", "project": project})
    wait_for(lambda: world.agents()[agent_id]["state"] == "idle", what=f"{agent_id} idle")


def host(world: DaemonWorld, agent_id: str) -> RawConn:
    return RawConn(socket_path(world.home, agent_id))


def pending(world: DaemonWorld, agent_id: str) -> list[dict[str, Any]]:
    with host(world, agent_id) as conn:
        requests: list[dict[str, Any]] = conn.request("host.pending")["payload"]["requests"]
    return requests


def ask(world: DaemonWorld, agent_id: str) -> str:
    """Send ``/ask``; the id of the permission request it makes."""
    before = {r["request_id"] for r in pending(world, agent_id)}
    with host(world, agent_id) as conn:
        assert conn.request("host.send", {"input": "/ask"})["success"]
    new = wait_for(
        lambda: [r for r in pending(world, agent_id) if r["request_id"] not in before],
        what="a permission request",
    )
    request_id: str = new[0]["request_id"]
    return request_id


def answer(world: DaemonWorld, agent_id: str, request_id: str) -> None:
    with host(world, agent_id) as conn:
        reply = conn.request("host.respond", {"request_id": request_id, "behavior": "allow"})
        assert reply["success"], reply
    wait_for(lambda: world.agents()[agent_id]["state"] == "idle", what="idle again")


def waiting_of(server: Sink, path: str = "/hook") -> list[dict[str, Any]]:
    return [r.json() for r in server.of(path) if r.json()["kind"] == "waiting"]


def ledger(world: DaemonWorld) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{world.home}/attention/notices.db?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT agent, kind, channel, status, attempts, why FROM notices ORDER BY id"
        ).fetchall()
    finally:
        db.close()


def test_one_notice_per_waiting_episode_with_links(world: DaemonWorld, server: Sink) -> None:
    configure(
        world,
        '[web]\npublic_url = "https://box.example:8765"\n[notify]\ndelay = "1s"\n' + hook(server),
    )
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n1", "proj")
    first = ask(world, "n1")
    (got,) = server.wait(1, "/hook")
    notice = got.json()
    assert notice["kind"] == "waiting" and notice["agent_id"] == "n1"
    assert notice["project"] == "proj"
    assert notice["title"] == "n1 (proj) asks to use Bash: touch demo-was-here"
    assert [r["request_id"] for r in notice["requests"]] == [first]
    assert notice["url"] == "https://box.example:8765/#/agent/n1"
    key = link_key(world.home)
    allow = verify(notice["approve_url"].rsplit("/l/", 1)[1], key, now=0)
    deny = verify(notice["deny_url"].rsplit("/l/", 1)[1], key, now=0)
    assert (allow.agent_id, allow.request_id, allow.decision) == ("n1", first, "allow")
    assert deny.decision == "deny"
    (request,) = pending(world, "n1")
    assert allow.created_at == notice["requests"][0]["created_at"]
    assert request["request_id"] == first
    # the episode stays open: still one notice; then it ends, and a new one begins
    answer(world, "n1", first)
    second = ask(world, "n1")
    server.wait(2, "/hook")
    assert [n["requests"][0]["request_id"] for n in waiting_of(server)] == [first, second]
    rows = wait_for(
        lambda: (r := ledger(world)) and all(row[3] == "sent" for row in r) and r,
        what="both recorded sent",
    )
    assert rows == [
        ("n1", "waiting", "hook", "sent", 1, None),
        ("n1", "waiting", "hook", "sent", 1, None),
    ]
    log = world.cli("notify", "log", "n1")
    assert log.returncode == 0 and log.stdout.count("  n1  waiting  hook  sent  ") == 2


def test_answered_within_the_delay_notifies_nobody(world: DaemonWorld, server: Sink) -> None:
    configure(world, '[notify]\ndelay = "4s"\n' + hook(server))
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n2")
    quick = ask(world, "n2")
    answer(world, "n2", quick)  # at the terminal: within the delay
    slow = ask(world, "n2")  # nobody answers this one
    server.wait(1, "/hook")
    assert [n["requests"][0]["request_id"] for n in waiting_of(server)] == [slow]
    assert quick != slow


def test_daemon_restart_mid_episode_does_not_notify_again(world: DaemonWorld, server: Sink) -> None:
    configure(world, '[notify]\ndelay = "1s"\n' + hook(server))
    daemon = world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n3")
    first = ask(world, "n3")
    server.wait(1, "/hook")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    # a daemon without a registry replays the whole stream, the open episode included
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{world.db_path}{suffix}")
        if path.exists():
            os.unlink(path)
    again = world.start_daemon("--scan-interval", "0")
    wait_for(lambda: again.events("notify.already_sent"), what="the replayed episode seen")
    answer(world, "n3", first)
    second = ask(world, "n3")
    server.wait(2, "/hook")
    assert [n["requests"][0]["request_id"] for n in waiting_of(server)] == [first, second]


def test_failed_deliveries_are_retried_then_recorded(world: DaemonWorld, server: Sink) -> None:
    server.status = 500
    dead = f"http://127.0.0.1:{closed_port()}/gone"
    configure(
        world,
        '[notify]\ndelay = "0s"\nretries = 2\n'
        + hook(server)
        + f'[notify.channels.dead]\ntype = "ntfy"\nurl = "{dead}"\n',
    )
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n4")
    ask(world, "n4")
    server.wait(3, "/hook")  # the first attempt and two retries

    def all_failed() -> list[tuple[Any, ...]] | None:
        rows = ledger(world)
        return rows if len(rows) == 2 and all(row[3] == "failed" for row in rows) else None

    rows = wait_for(all_failed, what="both deliveries recorded failed")
    by_channel = {row[2]: row for row in rows}
    assert by_channel["hook"][3:] == (
        "failed",
        3,
        f"HTTP 500 from {server.url}/hook: sink says no",
    )
    assert by_channel["dead"][3:5] == ("failed", 3)
    assert by_channel["dead"][5].startswith(f"cannot reach {dead}")
    assert len(server.of("/hook")) == 3
    log = world.cli("notify", "log")
    assert "  n4  waiting  hook  failed after 3 attempts: HTTP 500 from" in log.stdout


def test_a_slow_endpoint_does_not_block_the_daemon(world: DaemonWorld, server: Sink) -> None:
    server.hang.set()
    configure(world, '[notify]\ndelay = "0s"\n' + hook(server) + 'timeout = "5m"\n')
    daemon = world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n5")
    ask(world, "n5")
    wait_for(lambda: server.hanging >= 1, what="the sink holding a delivery")
    assert world.ping()["agents"] == 1
    assert world.agents()["n5"]["state"] == "waiting"
    spawn_demo(world, "n6")  # following a new host goes on
    assert server.hanging >= 1 and world.agents()["n6"]["status"] == "running"
    assert ledger(world) == [("n5", "waiting", "hook", "sending", 0, None)]
    # shutdown gives the delivery its grace, then cancels it, and says so
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    assert ledger(world) == [
        ("n5", "waiting", "hook", "failed", 1, "the daemon stopped before it was sent")
    ]
    assert world.host_pids().keys() == {"n5", "n6"}  # the hosts live on


def test_overrides_mute_an_agent_and_route_a_project(world: DaemonWorld, server: Sink) -> None:
    configure(
        world,
        '[notify]\ndelay = "0s"\n'
        + hook(server, "main", "/main")
        + hook(server, "web", "/web")
        + '[[notify.override]]\nagent = "quiet*"\nmute = true\n'
        + '[[notify.override]]\nproject = "site"\nchannels = ["web"]\n',
    )
    world.start_daemon("--scan-interval", "0")
    for agent_id, project in (("quiet1", "site"), ("s1", "site"), ("o1", "other")):
        spawn_demo(world, agent_id, project)
    ask(world, "quiet1")
    ask(world, "s1")
    ask(world, "o1")
    server.wait(3)
    # quiet1 asked first: its notice, had there been one, would be in by now
    seen = [(r.path, r.json()["agent_id"], r.json()["kind"]) for r in server.of()]
    assert sorted(seen) == [
        ("/main", "o1", "waiting"),  # no override: every channel
        ("/web", "o1", "waiting"),
        ("/web", "s1", "waiting"),  # project site: its channel only
    ]


def test_garbage_config_in_the_daemon_keeps_the_last_good(world: DaemonWorld, server: Sink) -> None:
    configure(world, '[notify]\ndelay = "0s"\n' + hook(server))
    daemon = world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n7")
    first = ask(world, "n7")
    server.wait(1, "/hook")
    configure(world, '[notify]\ndelay = "whenever"\n')
    answer(world, "n7", first)
    ask(world, "n7")
    server.wait(2, "/hook")  # the last good configuration goes on
    (logged,) = wait_for(lambda: daemon.events("notify.config_invalid"), what="logged")
    assert "notify.delay: 'whenever' is not a duration" in logged["error"]
    assert len(daemon.events("notify.config_invalid")) == 1


def test_an_agent_that_dies_is_notified(world: DaemonWorld, server: Sink) -> None:
    configure(world, '[notify]\ndelay = "0s"\n' + hook(server))
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n8")
    agent_pid = world.agents()["n8"]["agent_pid"]
    os.kill(agent_pid, signal.SIGKILL)
    (got,) = server.wait(1, "/hook")
    notice = got.json()
    assert notice["kind"] == "died" and notice["agent_id"] == "n8"
    assert notice["title"] == "n8 died (signal SIGKILL)"
    rows = wait_for(lambda: [r for r in ledger(world) if r[3] == "sent"], what="recorded")
    assert rows == [("n8", "died", "hook", "sent", 1, None)]  # no failed turn: it was idle


def test_a_requested_stop_is_not_a_death(world: DaemonWorld, server: Sink) -> None:
    configure(world, '[notify]\ndelay = "0s"\n' + hook(server))
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n9")
    spawn_demo(world, "n10")
    world.request("daemon.stop", {"agent_id": "n9"})
    os.kill(world.agents()["n10"]["agent_pid"], signal.SIGKILL)
    (got,) = server.wait(1, "/hook")
    assert got.json()["agent_id"] == "n10"  # n9 stopped first, and said nothing
    assert {r.json()["agent_id"] for r in server.of()} == {"n10"}


def test_an_agent_killed_mid_turn_sends_one_notice(world: DaemonWorld, server: Sink) -> None:
    # issue 28: `failed` (the host's "agent exited" error, mid-turn), then `died`, for
    # one death; a failed turn is what the agent reports, the death is `died`
    configure(world, '[notify]\ndelay = "0s"\n' + hook(server))
    world.start_daemon("--scan-interval", "0")
    spawn_demo(world, "n11")
    with host(world, "n11") as conn:
        assert conn.request("host.send", {"input": "/sleep 120"})["success"]
    wait_for(lambda: world.agents()["n11"]["state"] == "running", what="a turn under way")
    os.kill(world.agents()["n11"]["agent_pid"], signal.SIGKILL)
    (got,) = server.wait(1, "/hook")
    assert (got.json()["kind"], got.json()["title"]) == ("died", "n11 died (signal SIGKILL)")
    rows = wait_for(lambda: [r for r in ledger(world) if r[3] == "sent"], what="recorded")
    assert [r[:2] for r in ledger(world)] == [("n11", "died")]
    assert rows == [("n11", "died", "hook", "sent", 1, None)]
