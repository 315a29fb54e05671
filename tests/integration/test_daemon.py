"""The daemon with real processes: spawn, list, stop, watch, its socket, its CLI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from agenthost.cli.common import Exit

from daemontools import (
    DaemonWorld,
    StreamCollector,
    flood_command,
    read_stream,
)
from hosttools import PY, pid_gone, wait_for


def events_of(frames: list[dict[str, Any]], agent_id: str) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("kind") == "event" and f["agent_id"] == agent_id]


def saw_line(frames: list[dict[str, Any]], agent_id: str, line: str) -> bool:
    return any(f.get("data") == line for f in events_of(frames, agent_id))


def test_spawn_watch_list_stop(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    mode = stat.S_IMODE(os.stat(world.socket_path).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(world.home).st_mode) == 0o700

    watcher = world.conn()
    assert watcher.request("daemon.watch")["payload"] == {"agents": {}}
    spawned = world.spawn("a1", flood_command("--count", "5", "--rate", "0"), project="p")
    assert spawned["agent_id"] == "a1" and Path(spawned["socket_path"]).exists()
    assert world.host_pids()["a1"] == spawned["host_pid"]

    frames: list[dict[str, Any]] = []
    while not saw_line(frames, "a1", "line 5"):
        frames.append(watcher.frame())
    notices = [f["type"] for f in frames if f["kind"] == "notice"]
    assert notices[:2] == ["agent_spawned", "host_attached"]
    offsets = [f["offset"] for f in events_of(frames, "a1")]
    assert offsets == list(range(1, len(offsets) + 1))  # from the first event, in order

    agent = wait_for(lambda: (a := world.agents()["a1"])["last_offset"] >= offsets[-1] and a)
    assert agent["status"] == "running" and agent["managed"] is True
    assert agent["host_pid"] == spawned["host_pid"] and agent["spec"]["project"] == "p"
    agent_pid = agent["agent_pid"]

    stopped = world.request("daemon.stop", {"agent_id": "a1", "reason": "test"})
    assert stopped["agent_id"] == "a1" and stopped["stopped"] is True
    assert stopped["graceful"] is True and stopped["signal"] == "SIGTERM"
    # the daemon reaps the hosts it started: no zombie is left behind
    wait_for(lambda: not psutil.pid_exists(spawned["host_pid"]), what="the host reaped")
    wait_for(lambda: pid_gone(agent_pid), what="the agent ended")
    assert world.agents()["a1"]["status"] == "stopped"
    assert world.registry("SELECT outcome FROM exits WHERE agent_id = 'a1'") == [("stopped",)]
    watcher.close()


def test_requests_errors(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    with world.conn() as conn:
        bad = conn.request("daemon.nope")
        assert bad["code"] == "unknown_type" and bad["error"] == "unknown message type: daemon.nope"
        bad = conn.request("daemon.spawn", {"agent_id": "../x"})
        assert bad["code"] == "invalid_payload" and "agent_id" in bad["error"]
        bad = conn.request("daemon.spawn", {"agent_id": "x", "restart": {"policy": "always"}})
        assert bad["code"] == "invalid_payload"
        bad = conn.request("daemon.spawn", {"agent_id": "x", "agent": "nope"})
        assert bad["code"] == "invalid_payload" and "unknown agent kind" in bad["error"]
        bad = conn.request("daemon.spawn", {"agent_id": "x", "agent": "lines"})
        assert bad["code"] == "invalid_payload" and "needs a command" in bad["error"]
        bad = conn.request("daemon.stop", {"agent_id": "ghost"})
        assert bad["code"] == "agent_not_running"
        bad = conn.request("daemon.ping", protocol_version="2.0")
        assert bad["code"] == "version_unsupported"
        conn.send_raw(b"not json\n")
        assert conn.response()["code"] == "bad_request"
        ping = conn.request("daemon.ping")["payload"]  # the connection is still usable
        assert ping["protocol_version"] == "1.0" and ping["pid"] > 0
        assert ping["reconcile"]["found"] == 0 and ping["host_scope"] == "session"

    world.spawn("dup", flood_command("--count", "1"))
    busy = world.call("daemon.spawn", {"agent_id": "dup", "agent": "lines", "command": ["true"]})
    assert busy["code"] == "busy"
    forget = world.call("daemon.forget", {"agent_id": "dup"})
    assert forget["code"] == "busy"  # not while it runs
    with world.conn() as conn:
        conn.send_raw(b"x" * (1 << 20) + b"yy\n")
        assert conn.response()["code"] == "frame_too_large"
        assert conn.closed_by_peer()


def test_sigterm_leaves_hosts_and_records_positions(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "5")
    world.spawn("s1", flood_command("--count", "20", "--rate", "0"))
    host_pid = world.host_pids()["s1"]
    wait_for(lambda: world.agents()["s1"]["last_offset"] >= 21, what="all lines seen")
    # the batched flush is 5 s away: the shutdown must write the position itself
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    assert psutil.pid_exists(host_pid) and world.host_pids()["s1"] == host_pid
    assert not world.socket_path.exists()
    assert world.registry("SELECT last_offset FROM agents") == [(21,)]
    assert daemon.events("daemon.exited")


def test_second_daemon_is_refused(world: DaemonWorld) -> None:
    first = world.start_daemon("--scan-interval", "0")
    log = world.home / "second.log"
    pid = world.reaper.spawn(
        [PY, "-m", "agenthost", "daemon", "--home", str(world.home)], world.env, log
    )
    assert world.reaper.wait_exit(pid) == Exit.BUSY
    assert f"already running for this home (pid {first.pid})" in log.read_text()
    assert first.alive() and world.ping()["pid"] == first.pid


def test_run_starts_the_daemon_and_list_shows_what_it_knows(world: DaemonWorld) -> None:
    status, out = world.cli_bg(
        "run", "--agent-id", "r1", "--agent", "lines", "--project", "web", "--json",
        "--", *flood_command("--count", "3"),
    )  # fmt: skip
    assert status == 0, out
    started = json.loads(out[out.index("{") :])
    assert started["ok"] and started["agent_id"] == "r1" and started["daemon_started"] > 0
    assert world.host_pids()["r1"] == started["host_pid"]

    status, out = world.cli_bg("run", "--agent-id", "r1", "--agent", "lines", "--", "true")
    assert status == Exit.BUSY, out
    assert "already running under the daemon (status running)" in out
    assert "hint: stop it first: agenthost stop r1" in out

    listed = json.loads(world.cli("list", "--json").stdout)
    assert [item["agent_id"] for item in listed] == ["r1"]
    assert listed[0]["reachable"] and listed[0]["daemon"]["status"] == "running"
    assert listed[0]["daemon"]["spec"]["project"] == "web"
    table = world.cli("list").stdout
    assert "DAEMON" in table and "RESTARTS" in table and "running" in table

    # `agenthost stop` talks to the host: a SIGTERM is a deliberate stop, never a failure
    assert world.cli("stop", "r1").returncode == 0
    wait_for(lambda: world.agents()["r1"]["status"] in ("exited", "lost"), what="r1 ended")
    assert world.agents()["r1"]["restarts"] == 0

    # without a daemon, list reads the registry
    daemon_pid = started["daemon_started"]
    os.kill(daemon_pid, signal.SIGTERM)
    world.reaper.wait_exit(daemon_pid)
    listed = json.loads(world.cli("list", "--json").stdout)
    assert listed[0]["agent_id"] == "r1" and listed[0]["reachable"] is False
    assert listed[0]["daemon"]["status"] in ("exited", "lost")


def test_watch_since_resumes_and_slow_watchers_are_dropped(world: DaemonWorld) -> None:
    # tiny limits: a watcher lags after 64 KiB queued, the buffer keeps 2000 events
    buffer = 2000
    args = ("--scan-interval", "0", "--watch-queue", "65536", "--watch-buffer", str(buffer))
    world.start_daemon(*args)
    slow = world.conn()
    assert slow.request("daemon.watch", {"agents": ["f1"]})["success"]  # and never reads
    fast_frames: list[dict[str, Any]] = []
    fast = world.conn()
    fast.request("daemon.watch", {"agents": ["f1"]})
    stop = threading.Event()
    reader = threading.Thread(target=read_stream, args=(fast, fast_frames, stop))
    reader.start()
    # paced, so that a reader on a loaded machine keeps up; the slow one never reads
    world.spawn("f1", flood_command("--count", "6000", "--rate", "3000"), ring_size=7000)
    try:
        wait_for(lambda: saw_line(fast_frames, "f1", "line 6000"), what="the whole flood")
    finally:
        stop.set()
        reader.join()
    fast.close()
    assert slow.closed_by_peer()  # it fell out of the buffer: dropped, nobody waited
    slow.close()
    offsets = [f["offset"] for f in events_of(fast_frames, "f1")]
    assert offsets == list(range(1, len(offsets) + 1))  # a lagging reader lost nothing
    last = offsets[-1]

    # a watcher that comes back with its position gets exactly the rest
    epoch = next(f["epoch"] for f in fast_frames if f.get("type") == "host_attached")
    with world.conn() as again:
        since = {"f1": {"epoch": epoch, "offset": last - 500}}
        start = again.request("daemon.watch", {"since": since})["payload"]["agents"]["f1"]
        assert start == {
            "epoch": epoch,
            "stream_offset": last,
            "oldest_offset": last - buffer + 1,
            "from_offset": last - 500,
            "truncated": False,
        }
        assert [e["offset"] for e in again.events(last)] == list(range(last - 499, last + 1))
    with world.conn() as older:
        # older than the daemon's buffer: backfilled from the host, still exact
        since = {"f1": {"epoch": epoch, "offset": 10}}
        start = older.request("daemon.watch", {"since": since})["payload"]["agents"]["f1"]
        assert start["truncated"] is False and start["from_offset"] == 10
        assert start["oldest_offset"] == last - buffer + 1
        assert [e["offset"] for e in older.events(last)] == list(range(11, last + 1))
    with world.conn() as other_epoch:
        since = {"f1": {"epoch": "x", "offset": last}}
        start = other_epoch.request("daemon.watch", {"since": since})["payload"]["agents"]["f1"]
        assert start["from_offset"] == last - buffer  # another stream: from the oldest kept


def test_adopts_a_host_started_with_serve(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0.2")
    status, out = world.cli_bg(
        "serve", "--agent-id", "own", "--agent", "lines", "--detach", "--",
        *flood_command("--count", "1"),
    )  # fmt: skip
    assert status == 0, out
    agent = wait_for(lambda: world.agents().get("own"), what="adopted")
    assert agent["managed"] is False and agent["spec"]["agent"] == "lines"
    assert wait_for(lambda: world.agents()["own"]["last_offset"] >= 2, what="followed")


def test_reconcile_cleans_stale_files_and_marks_lost(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    world.spawn("gone", flood_command("--count", "2"), restart={"policy": "never"})
    wait_for(lambda: world.agents()["gone"]["last_offset"] >= 3, what="lines seen")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    host_pid = world.host_pids()["gone"]
    os.kill(host_pid, signal.SIGKILL)  # the host dies while no daemon runs
    world.reaper.wait_exit(host_pid)
    sock = world.home / "hosts" / "gone.sock"
    assert sock.exists()  # a dead host's leftover

    world.start_daemon("--scan-interval", "0")
    report = world.ping()["reconcile"]
    assert report["stale_removed"] == ["gone"] and report["lost"] == ["gone"]
    assert not sock.exists() and not (world.home / "hosts" / "gone.lock").exists()
    agent = world.agents()["gone"]
    assert agent["status"] == "lost" and agent["host_pid"] == 0
    forgotten = world.request("daemon.forget", {"agent_id": "gone"})
    assert forgotten == {
        "agent_id": "gone",
        "forgotten": True,
        "purged": False,
        "previous_status": "lost",  # (1.4)
    }
    assert "gone" not in world.agents()


def test_unwatch_ends_the_stream(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    world.spawn("u1", flood_command("--count", "0", "--rate", "50"))
    with world.conn() as conn:
        conn.request("daemon.watch")
        conn.read_until(lambda f: f.get("kind") == "event")
        rid = conn.send("daemon.unwatch")
        # events sent before the unwatch response may still come; none after it
        conn.read_until(lambda f: f.get("id") == rid)
        conn.send("daemon.ping")
        assert conn._read_frame()["type"] == "daemon.ping"


def test_a_watcher_older_than_the_buffer_is_backfilled_from_the_host(world: DaemonWorld) -> None:
    args = ("--scan-interval", "0", "--flush-interval", "0.05")
    daemon = world.start_daemon(*args)
    world.spawn("b1", flood_command("--count", "50", "--rate", "0"))
    last = 51  # state "running", then 50 lines
    wait_for(lambda: world.registry("SELECT last_offset FROM agents") == [(last,)], what="flush")
    epoch = world.agents()["b1"]["epoch"]
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    world.start_daemon(*args)  # its buffer for b1 starts after the recorded offset: empty
    assert world.ping()["reconcile"]["reattached"] == {"b1": last}
    with world.conn() as conn:
        start = conn.request("daemon.watch", {"since": {"b1": {"epoch": epoch, "offset": 10}}})
        assert start["payload"]["agents"]["b1"] == {
            "epoch": epoch,
            "stream_offset": last,
            "oldest_offset": last + 1,
            "from_offset": 10,
            "truncated": False,
        }
        events = conn.events(last)
        assert [e["offset"] for e in events] == list(range(11, last + 1))
        assert events[-1]["data"] == "line 50"


def test_on_failure_restarts_gives_up_and_a_new_spawn_replaces(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    failing = flood_command("--count", "1", "--rate", "0", "--exit", "3")
    policy = {"policy": "on-failure", "max_restarts": 2, "backoff": 0.05}
    world.spawn("c1", failing, restart=policy)
    world.spawn("ok", flood_command("--count", "1", "--exit", "0"), restart=policy)

    agent = wait_for(
        lambda: (a := world.agents()["c1"])["status"] == "failed" and a, what="gave up"
    )
    assert agent["restarts"] == 2 and agent["exit_code"] == 3
    assert agent["last_error"] == "restart limit reached (2 in a row)"
    ends = world.registry("SELECT outcome, exit_code FROM exits WHERE agent_id = 'c1'")
    assert ends == [("exited", 3), ("exited", 3)]  # the third host lingers: still running
    clean = wait_for(lambda: (a := world.agents()["ok"])["status"] == "exited" and a, what="ok")
    assert clean["exit_code"] == 0 and clean["restarts"] == 0  # a success is not restarted

    # spawning the failed agent again retires its lingering host and starts afresh
    lingering = world.host_pids()["c1"]
    world.spawn("c1", flood_command("--count", "1"))
    agent = world.agents()["c1"]
    assert agent["status"] == "running" and agent["restarts"] == 0
    assert agent["host_pid"] != lingering and not psutil.pid_exists(lingering)


def test_run_again_continues_the_stream_and_forget(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    watch = StreamCollector(world)
    run = ("run", "--agent-id", "x1", "--agent", "demo")
    first = world.cli(*run)
    assert first.returncode == 0, first.stderr
    before = wait_for(lambda: (a := world.agents()["x1"])["state"] == "idle" and a, what="x1 idle")
    assert world.cli("stop", "x1").returncode == 0  # through the host, not the daemon
    wait_for(lambda: world.agents()["x1"]["status"] == "exited", what="x1 exited")

    # the same id runs again: its new host continues the journal, so the daemon
    # follows one stream, same epoch, offsets growing from where the first run ended
    again = world.cli(*run)
    assert again.returncode == 0, again.stderr
    after = wait_for(
        lambda: (
            (a := world.agents()["x1"])["state"] == "idle"
            and a["last_offset"] > before["last_offset"] + 1
            and a
        ),
        what="x1 idle again",
    )
    assert after["status"] == "running" and after["epoch"] == before["epoch"]
    watch.wait(lambda w: w.count("x1") >= after["last_offset"], what="every event watched")
    offsets = watch.offsets("x1")
    assert offsets == list(range(1, len(offsets) + 1))  # one stream: no restart at 1
    assert watch.epoch("x1") == before["epoch"]
    watch.close()

    # a live id is refused, for run and forget alike, saying what to do
    busy = world.cli(*run)
    assert busy.returncode == Exit.BUSY, (busy.stdout, world.agents()["x1"], world.host_pids())
    assert "agent 'x1' is already running under the daemon (status running)" in busy.stderr
    assert "hint: stop it first: agenthost stop x1" in busy.stderr
    live = world.cli("forget", "x1")
    assert live.returncode == Exit.BUSY and "a live agent is not forgotten" in live.stderr
    assert "hint: stop it first: agenthost stop x1" in live.stderr

    # stopped, it is forgotten (right after the stop: no wait needed); its journal stays
    assert world.cli("stop", "x1").returncode == 0
    forgot = world.cli("forget", "x1", "--json")
    assert forgot.returncode == 0, forgot.stderr
    body = json.loads(forgot.stdout)
    assert body.pop("previous_status") in ("exited", "stopped")  # (1.4) as its end was seen
    assert body == {"ok": True, "agent_id": "x1", "forgotten": True, "purged": False}
    assert "x1" not in world.agents()
    journal = world.home / "journal" / "x1"
    assert journal.is_dir()
    nothing = world.cli("forget", "x1")
    assert nothing.returncode == Exit.NO_HOST and "nothing to forget" in nothing.stderr

    # --purge deletes the journal too (here the daemon no longer knew the id)
    purged = world.cli("forget", "--purge", "x1")
    assert purged.returncode == 0, purged.stderr
    assert purged.stdout == "deleted the journal of x1 (the daemon did not know it)\n"
    assert not journal.exists()

    for garbage in (["../x"], [], ["x1", "extra"], ["--purge=yes", "x1"], ["-x", "x1"]):
        bad = world.cli("forget", *garbage)
        assert bad.returncode == Exit.USAGE, (garbage, bad.stdout, bad.stderr)
        assert "Traceback" not in bad.stderr


def test_forget_without_a_daemon_and_purge(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    world.spawn("f1", flood_command("--count", "2", "--exit", "0"), linger=0)
    wait_for(lambda: (a := world.agents()["f1"])["status"] == "exited" and a["host_pid"] == 0)
    daemon.signal(signal.SIGTERM)
    daemon.wait_exit()
    # no daemon: the registry is edited directly (no daemon is started for it)
    forgot = world.cli("forget", "--purge", "f1")
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout == "forgot f1 and deleted its journal\n"
    assert world.registry("SELECT agent_id FROM agents") == []
    assert world.registry("SELECT agent_id FROM exits") == []
    assert not (world.home / "journal" / "f1").exists()
    assert not (world.home / "daemon.lock").exists() and not world.socket_path.exists()

    # a live host (here one started with serve, unknown to any registry) is refused
    world.reaper.spawn(
        [PY, "-m", "agenthost", "serve", "--agent-id", "s1", "--agent", "demo"], world.env
    )
    wait_for(lambda: (world.home / "hosts" / "s1.sock").exists(), what="s1 serving")
    live = world.cli("forget", "--purge", "s1")
    assert live.returncode == Exit.BUSY and "a live agent is not forgotten" in live.stderr
    assert (world.home / "journal" / "s1").is_dir()


def test_daemon_restart_keeps_exited_agents_exited(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    world.spawn("ok", flood_command("--count", "1", "--exit", "0"), linger=0)
    world.spawn("bad", flood_command("--count", "1", "--exit", "3"), linger=0)
    world.spawn("linger", flood_command("--count", "1", "--exit", "0"))  # its host lingers
    for agent_id in ("ok", "bad"):
        wait_for(lambda a=agent_id: world.agents()[a]["host_pid"] == 0, what=f"{agent_id} ended")
    wait_for(lambda: world.registry("SELECT exit_code FROM agents WHERE agent_id = 'linger'")
             == [(0,)], what="linger's exit recorded")  # fmt: skip
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    # the lingering host ends while no daemon runs
    assert world.cli("stop", "linger").returncode == 0
    wait_for(lambda: "linger" not in world.host_pids(), what="linger's host gone")

    world.start_daemon("--scan-interval", "0")
    assert world.ping()["reconcile"]["lost"] == []
    agents = world.agents()
    got = {a: (agents[a]["status"], agents[a]["exit_code"]) for a in ("ok", "bad", "linger")}
    assert got == {"ok": ("exited", 0), "bad": ("exited", 3), "linger": ("exited", 0)}
    outcomes = world.registry("SELECT agent_id, outcome FROM exits ORDER BY agent_id")
    assert outcomes == [("bad", "exited"), ("linger", "exited"), ("ok", "exited")]


class FakeHost:
    """A host from another version, played by a thread: it holds the agent's lock and
    answers ``host.status``/``host.attach`` on the agent's socket as that version would."""

    def __init__(self, home: Path, agent_id: str, version: str, protocol: str) -> None:
        from agenthost.lockfile import HostLock

        self.lock = HostLock(home / "hosts" / f"{agent_id}.lock")
        self.lock.acquire()
        self.lock.write_info({"pid": os.getpid(), "agent_id": agent_id})
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(home / "hosts" / f"{agent_id}.sock"))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        now = "2026-01-01T00:00:00.000000Z"
        self.answers = {
            "host.status": {
                "host": {
                    "pid": os.getpid(),
                    "version": version,
                    "protocol_version": protocol,
                    "started_at": now,
                    "socket_path": "x",
                },
                "agent": {"id": agent_id, "state": "running", "started_at": now},
            },
            "host.attach": {"agent_id": agent_id, "stream_offset": 0, "epoch": "old"},
        }
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conns: list[socket.socket] = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conns.append(conn)
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()
        for conn in conns:
            conn.close()

    def answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn.makefile("rwb") as io:
            for line in io:
                request = json.loads(line)
                payload = self.answers.get(request["type"], {})
                response = {"kind": "response", "type": request["type"], "id": request.get("id")}
                io.write(json.dumps({**response, "success": True, "payload": payload}).encode())
                io.write(b"\n")
                io.flush()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        self.lock.release()


def test_older_hosts_are_reported_and_incompatible_ones_left_alone(world: DaemonWorld) -> None:
    (world.home / "hosts").mkdir(mode=0o700)
    old = FakeHost(world.home, "old", "0.0.1", "1.0")
    new = FakeHost(world.home, "new", "9.0.0", "2.0")
    try:
        world.start_daemon("--scan-interval", "0")
        report = world.ping()["reconcile"]
        assert report["adopted"] == ["old"] and report["reattached"] == {"old": 0}
        assert report["older"] == [
            {"agent_id": "old", "version": "0.0.1", "protocol_version": "1.0"}
        ]
        assert report["incompatible"] == ["new"]
        agents = world.agents()
        assert agents["old"]["older_version"] is True and agents["old"]["status"] == "running"
        assert agents["old"]["managed"] is False
        assert agents["new"]["status"] == "incompatible"
        assert agents["new"]["host_protocol_version"] == "2.0"
    finally:
        old.close()
        new.close()


def test_a_frozen_host_is_unreachable_never_lost(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    world.spawn("z1", flood_command("--count", "0", "--rate", "20"))
    daemon.signal(signal.SIGTERM)
    daemon.wait_exit()
    host_pid = world.host_pids()["z1"]
    os.kill(host_pid, signal.SIGSTOP)  # alive (its lock is held) but silent
    try:
        world.start_daemon("--scan-interval", "0", "--probe-timeout", "0.2")
        report = world.ping()["reconcile"]
        assert report["unreachable"] == ["z1"] and report["lost"] == []
        assert world.agents()["z1"]["status"] == "unreachable"
    finally:
        os.kill(host_pid, signal.SIGCONT)
    before = world.agents()["z1"]["last_offset"]
    agent = wait_for(
        lambda: (
            (a := world.agents()["z1"])["status"] == "running" and a["last_offset"] > before and a
        ),
        what="followed again once it answers",
    )
    assert agent["host_pid"] == host_pid and agent["restarts"] == 0


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another uid")
def test_a_peer_of_another_uid_is_refused(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0")
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('EACCES'); sys.exit(0)\n"
        "try:\n"
        '    s.sendall(b\'{"type": "daemon.list"}\\n\')\n'
        "except BrokenPipeError:\n"
        "    pass  # refused and closed before we wrote; the answer is still readable\n"
        "print(s.makefile().readline().strip())\n"
    )

    def as_nobody() -> str:
        out = subprocess.run(
            [PY, "-c", probe, str(world.socket_path)], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    os.chmod(world.home, 0o711)  # the socket file itself (0600) still keeps them out
    assert as_nobody() == "EACCES"
    os.chmod(world.socket_path, 0o666)  # and should that be loosened, the peer check
    response = json.loads(as_nobody())
    assert response["success"] is False and response["code"] == "forbidden"
    assert "payload" not in response
    assert world.ping()["pid"] > 0  # the owner still gets in


def test_spawned_env_secrets_stay_private(world: DaemonWorld) -> None:
    secret = "sk-daemon-5ecret-value"
    daemon = world.start_daemon("--scan-interval", "0")
    command = ["sh", "-c", 'printf %s "$API_TOKEN" | sha256sum; exec sleep 60']
    world.spawn("sec", command, env={"API_TOKEN": secret})
    host_pid = world.host_pids()["sec"]
    digest = hashlib.sha256(secret.encode()).hexdigest()

    def journal() -> str:
        return "".join(p.read_text() for p in (world.home / "journal").rglob("*.jsonl"))

    wait_for(lambda: digest in journal(), what="the agent got the variable")
    # command lines are world-readable; the registry and the home are the user's alone
    assert secret.encode() not in Path(f"/proc/{host_pid}/cmdline").read_bytes()
    assert stat.S_IMODE(world.db_path.stat().st_mode) == 0o600
    listed = world.agents()["sec"]
    assert listed["spec"]["env"] == {"API_TOKEN": "<redacted>"}
    assert secret not in world.cli("list", "--json").stdout
    assert secret not in daemon.log()
    assert secret not in (world.home / "logs" / "sec.log").read_text()
    # a restart would need the value: the registry keeps it
    specs = world.registry("SELECT spec FROM agents WHERE agent_id = 'sec'")
    assert secret in specs[0][0]


def test_an_agent_that_exited_while_no_daemon_saw_it_is_exited_not_lost(
    world: DaemonWorld,
) -> None:
    # The host's log records the agent's end; a host with no linger ends right after.
    # A daemon that did not see the end (here: none ran; as well: a host that ended
    # before the daemon's follower attached) must take the end from the log: exited
    # with code 0, not lost, and not restarted as a failure.
    daemon = world.start_daemon("--scan-interval", "0")
    world.spawn(
        "quick",
        ["sh", "-c", "read x; exit 0"],
        linger=0,
        restart={"policy": "on-failure", "max_restarts": 3, "backoff": 0.01},
    )
    wait_for(lambda: world.agents()["quick"]["status"] == "running", what="running")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert world.cli("send", "quick", "go").returncode == 0
    wait_for(lambda: "quick" not in world.host_pids(), what="the host ended")

    world.start_daemon("--scan-interval", "0")
    report = world.ping()["reconcile"]
    assert report["lost"] == [] and report["restarting"] == []
    agent = world.agents()["quick"]
    assert (agent["status"], agent["exit_code"], agent["restarts"]) == ("exited", 0, 0)
    assert world.registry("SELECT outcome FROM exits WHERE agent_id = 'quick'") == [("exited",)]
