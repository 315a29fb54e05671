"""Chaos tests of the daemon (issue 4): real processes, real signals, no mocks.

* 20 agents flooding; kill -9 the daemon; restart it: all 20 rediscovered and
  reattached from their recorded offsets; the merged stream has no gap and no
  duplicate.
* 10 daemon restarts in a row while agents work: no agent dies, no orphan, no zombie,
  no stale socket, a sound registry.
* kill -9 a host: its agent's whole process group ends; the daemon records it and
  applies the restart policy.
* a deleted socket file: the daemon finds the live host and SIGUSR1 brings it back.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from typing import Any

import psutil

from daemontools import (
    DaemonWorld,
    StreamCollector,
    cmdline_has,
    flood_command,
    zombies,
)
from hosttools import RawConn, pid_gone, wait_for

AGENTS = 20
LINES = 2000  # per agent; at RATE lines/s the flood outlasts the daemon's restart
RATE = 400
RING = LINES + 500  # every event of a flood stays in its host's ring: asserted below


def spawn_all(world: DaemonWorld, ids: list[str], command: list[str], **spec: Any) -> None:
    """``daemon.spawn`` them all at once (one connection each: spawns run in parallel)."""
    errors: list[BaseException] = []

    def one(agent_id: str) -> None:
        try:
            world.spawn(agent_id, command, **spec)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(a,)) for a in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def contiguous(offsets: list[int]) -> bool:
    return offsets == list(range(1, len(offsets) + 1))


def test_kill_9_the_daemon_mid_flood_then_restart(world: DaemonWorld) -> None:
    args = ("--scan-interval", "0", "--flush-interval", "0.1", "--watch-buffer", str(RING))
    daemon = world.start_daemon(*args)
    ids = [f"c{i:02d}" for i in range(AGENTS)]
    first = StreamCollector(world)
    command = flood_command("--wait", "--count", str(LINES), "--rate", str(RATE))
    spawn_all(world, ids, command, ring_size=RING)
    first.wait(lambda c: all(c.saw(a, "ready") for a in ids), what="every agent ready")

    # all flood at once; kill -9 the daemon in the middle
    for agent_id in ids:
        with RawConn(world.home / "hosts" / f"{agent_id}.sock") as host:
            assert host.request("host.send", {"input": "go"})["success"]
    first.wait(lambda c: all(c.count(a) >= 300 for a in ids), what="the floods under way")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    first.drain()
    recorded = {
        agent_id: (epoch, offset)
        for agent_id, epoch, offset in world.registry(
            "SELECT agent_id, epoch, last_offset FROM agents"
        )
    }
    assert sorted(recorded) == ids
    for agent_id in ids:
        assert recorded[agent_id][0] == first.epoch(agent_id) and recorded[agent_id][1] > 0
    # The recorded positions are batched, so they trail what the daemon had sent; and
    # what it had sent but the watcher had not read yet died with it. Either way the
    # new daemon restarts from the record, and a watcher resuming from an older
    # position is backfilled from the host's ring.

    world.start_daemon(*args)
    report = world.ping()["reconcile"]
    assert report["found"] == AGENTS and report["lost"] == [] and report["adopted"] == []
    assert report["reattached"] == {a: recorded[a][1] for a in ids}  # from the recorded offsets
    agents = world.agents()
    assert all(agents[a]["status"] == "running" and agents[a]["restarts"] == 0 for a in ids)

    # a watcher that resumes where the first one stopped misses nothing, repeats nothing
    since = {a: {"epoch": first.epoch(a), "offset": first.offsets(a)[-1]} for a in ids}
    second = StreamCollector(world, {"since": since})
    try:
        for agent_id in ids:
            start = second.start[agent_id]
            assert start["truncated"] is False
            assert start["from_offset"] == since[agent_id]["offset"]
        second.wait(lambda c: all(c.saw(a, f"line {LINES}") for a in ids), 60, "every flood's end")
    finally:
        second.close()
    produced_while_down = 0
    for agent_id in ids:
        merged = first.offsets(agent_id) + second.offsets(agent_id)
        assert contiguous(merged), f"{agent_id}: gap or duplicate"
        assert merged[-1] == LINES + 3  # state "running", "ready", the "go" sent, the lines
        produced_while_down += second.start[agent_id]["stream_offset"] - since[agent_id]["offset"]
    assert produced_while_down > 0  # the replay covered events made while no daemon ran

    # and every one of those events was still in its host's ring
    for agent_id in ids:
        with RawConn(world.home / "hosts" / f"{agent_id}.sock") as host:
            attach = host.request("host.attach", {"offset": 0})["payload"]
            assert attach["oldest_offset"] == 1 and attach["truncated"] is False


def test_ten_daemon_restarts_while_agents_work(world: DaemonWorld) -> None:
    args = ("--scan-interval", "0", "--flush-interval", "0.1")
    ids = [f"w{i}" for i in range(5)]
    daemon = world.start_daemon(*args)
    spawn_all(world, ids, flood_command("--count", "0", "--rate", "100"), ring_size=20_000)
    hosts = world.host_pids()
    agent_pids = wait_for(
        lambda: (
            all((a := world.agents())[i]["agent_pid"] for i in ids)
            and {i: a[i]["agent_pid"] for i in ids}
        ),
        what="agent pids",
    )
    watch = StreamCollector(world)
    seen: dict[str, list[int]] = {a: [] for a in ids}
    for round_ in range(10):
        target = {a: watch.count(a) + 20 for a in ids}
        watch.wait(lambda c, t=target: all(c.count(a) >= t[a] for a in ids), what="agents working")
        daemon.signal(signal.SIGKILL if round_ % 2 == 0 else signal.SIGTERM)
        assert daemon.wait_exit() in (0, -signal.SIGKILL)
        watch.drain()
        since = {}
        for agent_id in ids:
            seen[agent_id] += watch.offsets(agent_id)
            since[agent_id] = {"epoch": watch.epoch(agent_id), "offset": seen[agent_id][-1]}
        daemon = world.start_daemon(*args)
        report = world.ping()["reconcile"]
        assert sorted(report["reattached"]) == ids, report
        assert report["lost"] == [] and report["restarting"] == [] and report["woken"] == []
        watch = StreamCollector(world, {"since": since})
        assert not any(watch.start[a]["truncated"] for a in ids)
    watch.close()
    for agent_id in ids:
        seen[agent_id] += watch.offsets(agent_id)
        assert contiguous(seen[agent_id]), f"{agent_id}: gap or duplicate across restarts"

    # no agent died: same hosts, same agents, all running
    assert world.host_pids() == hosts
    assert all(psutil.pid_exists(p) and not pid_gone(p) for p in agent_pids.values())
    agents = world.agents()
    for agent_id in ids:
        assert agents[agent_id]["status"] == "running" and agents[agent_id]["restarts"] == 0
        assert agents[agent_id]["agent_pid"] == agent_pids[agent_id]
    # no zombie, no orphan: under the reaper only the daemon and its host factory, the
    # hosts (adopted from the dead daemons and factories) and, under each host, its
    # agent and its watchdog
    wait_for(lambda: not zombies(world.reaper), what="no zombie")
    host_set = set(hosts.values())
    for proc in world.reaper.tree():
        if proc.pid == daemon.pid or proc.pid in host_set:
            continue
        if proc.ppid() == daemon.pid:  # its factory (titled so once it has started)
            wait_for(lambda p=proc: cmdline_has(p, "host-factory"), what="the factory")
            continue
        assert proc.ppid() in host_set, f"orphan: {proc.pid} {proc.cmdline()}"
        assert cmdline_has(proc, "flood_agent") or cmdline_has(proc, "kill -TERM")
    # no stale socket, and a sound registry
    for sock in (world.home / "hosts").glob("*.sock"):
        assert sock.stem in hosts, f"stale socket {sock}"
    assert world.socket_path.exists()
    db = sqlite3.connect(f"file:{world.db_path}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


def test_kill_9_a_host_ends_its_agent_group_and_the_policy_applies(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    command = flood_command("--child", "--count", "0", "--rate", "20")
    world.spawn("k1", command, restart={"policy": "on-failure", "backoff": 0.1})
    world.spawn("k2", command, restart={"policy": "never"})
    groups = {}
    for agent_id in ("k1", "k2"):
        agent_pid = wait_for(lambda a=agent_id: world.agents()[a]["agent_pid"], what="agent")
        child = wait_for(lambda p=agent_pid: psutil.Process(p).children(), what="its child")
        groups[agent_id] = [agent_pid, child[0].pid]
        assert os.getpgid(child[0].pid) == os.getpgid(agent_pid)  # one process group
    old_hosts = world.host_pids()

    for agent_id in ("k1", "k2"):
        os.kill(old_hosts[agent_id], signal.SIGKILL)
    for pid in groups["k1"] + groups["k2"]:
        wait_for(lambda p=pid: pid_gone(p), what=f"pid {pid} of the killed host's group")

    k1 = wait_for(
        lambda: (a := world.agents()["k1"])["restarts"] == 1 and a["status"] == "running" and a,
        what="k1 restarted",
    )
    assert k1["host_pid"] not in (0, old_hosts["k1"])
    assert wait_for(lambda: world.agents()["k1"]["agent_pid"], what="k1's new agent")
    k2 = wait_for(lambda: (a := world.agents()["k2"])["status"] == "lost" and a, what="k2 lost")
    assert k2["restarts"] == 0 and k2["host_pid"] == 0
    outcomes = world.registry("SELECT agent_id, outcome FROM exits ORDER BY id")
    assert sorted(outcomes) == [("k1", "lost"), ("k2", "lost")]
    assert world.host_pids()["k1"] == k1["host_pid"] and "k2" not in world.host_pids()


def test_deleted_socket_is_recreated_through_sigusr1(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0.2")
    world.spawn("s1", flood_command("--count", "0", "--rate", "20"))
    sock = world.home / "hosts" / "s1.sock"
    host_pid = world.host_pids()["s1"]

    sock.unlink()  # a cleanup job
    wait_for(sock.exists, what="the socket re-created")
    assert [e["agent_id"] for e in daemon.events("host.woken")] == ["s1"]
    with RawConn(sock) as conn:
        assert conn.request("host.ping")["success"]

    # and when the daemon finds it so at start-up
    daemon.signal(signal.SIGTERM)
    daemon.wait_exit()
    sock.unlink()
    world.start_daemon("--scan-interval", "0")
    report = world.ping()["reconcile"]
    assert report["woken"] == ["s1"] and "s1" in report["reattached"]
    assert sock.exists() and world.host_pids()["s1"] == host_pid
    before = world.agents()["s1"]["last_offset"]
    wait_for(lambda: world.agents()["s1"]["last_offset"] > before, what="followed again")


def test_a_stopped_host_does_not_hold_up_the_restart(world: DaemonWorld) -> None:
    # a probe timeout far longer than the test: a restart that waited for the stopped
    # host's probe would not be ready in time
    args = ("--scan-interval", "0", "--flush-interval", "0.1", "--probe-timeout", "30")
    daemon = world.start_daemon(*args)
    ids = ["p0", "p1", "p2"]
    spawn_all(world, ids, flood_command("--count", "0", "--rate", "50"), ring_size=20_000)
    first = StreamCollector(world)
    first.wait(lambda c: all(c.count(a) >= 10 for a in ids), what="agents working")
    stopped = world.host_pids()["p0"]
    os.kill(stopped, signal.SIGSTOP)
    try:
        daemon.signal(signal.SIGKILL)
        daemon.wait_exit()
        first.drain()
        since = {a: {"epoch": first.epoch(a), "offset": first.offsets(a)[-1]} for a in ids[1:]}

        world.start_daemon(*args, timeout=15)
        report = world.ping()["reconcile"]
        assert report["unreachable"] == ["p0"] and sorted(report["reattached"]) == ids[1:]
        second = StreamCollector(world, {"since": since})
        second.wait(lambda c: all(c.count(a) >= 10 for a in ids[1:]), what="the others flowing")
        assert psutil.Process(stopped).status() == psutil.STATUS_STOPPED  # still
        for agent_id in ids[1:]:
            merged = first.offsets(agent_id) + second.offsets(agent_id)
            assert contiguous(merged), f"{agent_id}: gap or duplicate"
        assert world.agents()["p0"]["status"] == "unreachable"
    finally:
        os.kill(stopped, signal.SIGCONT)
    second.wait(lambda c: c.count("p0") > 0, what="the stopped host followed once continued")
    wait_for(lambda: world.agents()["p0"]["status"] == "running", what="p0 running again")
    second.close()
