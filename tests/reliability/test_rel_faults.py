"""Faults, measured: the agent dying by signal, closing its output, leaving children; a
full disk under the journal, the log and the daemon's registry; running out of file
descriptors; wall-clock jumps; SIGTERM while a stop is under way.

Extends tests/integration (``test_exit_status_and_final_state``,
``test_agent_closing_stdout_but_alive_is_still_supervised``,
``test_children_outliving_the_agent_are_ended``,
``test_disk_full_degrades_with_an_error_and_loses_nothing_acknowledged`` (RLIMIT_FSIZE),
``test_second_sigterm_during_stop_kills_at_once``) where they stop short: a real full
file system (a small tmpfs) instead of a size limit, the host's own log on it, the
daemon's registry on it; CPU time measured while a host is starved of descriptors or its
agent's pipes are closed (ratios, never wall-clock limits).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemontools import DaemonWorld, StreamCollector, daemon_world, flood_command
from hosttools import (
    PY,
    HostProc,
    RawConn,
    assert_contiguous,
    kill_tree,
    lines_agent,
    pid_gone,
    start_host,
    wait_for,
)

HostFactory = Callable[..., HostProc]
Figure = Callable[..., None]
Event = dict[str, Any]

ECHO = lines_agent(
    "import sys\nfor line in sys.stdin:\n    print(line.rstrip('\\n'), flush=True)\n"
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (not its children)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def read_until(conn: RawConn, data: str) -> list[Event]:
    """Events until an output event carrying ``data`` (responses skipped)."""
    events: list[Event] = []
    while True:
        frame = conn.frame()
        if frame["kind"] != "event":
            continue
        events.append(frame)
        if frame.get("data") == data:
            return events


def send_all(conn: RawConn, lines: list[str]) -> None:
    """Pipeline ``host.send`` of every line, then check every answer."""
    ids = [conn.send("host.send", {"input": line}) for line in lines]
    for rid in ids:
        response = conn.response(rid)
        assert response["success"], response


# --- the agent dies, closes its output, leaves children ---------------------------------


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM, signal.SIGINT])
def test_agent_killed_from_outside_reports_the_signal(
    host_factory: HostFactory, sig: signal.Signals
) -> None:
    """A signal from outside (not a stop): state ``error``, exit code -N, the signal's
    name in status and in one ``error`` event, no pid left; the host keeps serving."""
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", "exec cat"])
    agent_pid = host.agent()["pid"]
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        os.kill(agent_pid, sig)
        events = []
        while not (events and events[-1].get("state") == "error"):
            events.append(conn.frame())
    agent = host.agent()
    assert (agent["state"], agent["exit_code"], agent["signal"]) == ("error", -sig, sig.name)
    assert agent["pid"] == 0 and pid_gone(agent_pid)
    errors = [e["error"] for e in events if e["type"] == "error"]
    assert errors == [f"agent exited with signal {sig.name}"]
    lock = json.loads(host.lock_path.read_text())
    assert lock["agent_pid"] == 0
    with host.raw() as conn:
        stop = conn.request("host.stop", {"timeout": 1})["payload"]
    assert (stop["exit_code"], stop["signal"], stop["final_state"]) == (-sig, sig.name, "error")


def test_agent_killed_by_signal_is_recorded_by_the_daemon(home: Path) -> None:
    """Through the daemon: the ``agent_exited`` notice, ``daemon.list`` and the
    registry's ``exits`` row all carry the signal."""
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        world.spawn("k1", ["sh", "-c", "echo up; exec cat"])
        watch = StreamCollector(world)
        try:
            watch.wait(lambda w: w.saw("k1", "up"), what="agent up")
            agent_pid = world.agents()["k1"]["agent_pid"]
            os.kill(agent_pid, signal.SIGKILL)
            watch.wait(
                lambda w: any(n["type"] == "agent_exited" for n in w.notices), what="exit notice"
            )
            (notice,) = [n for n in watch.notices if n["type"] == "agent_exited"]
        finally:
            watch.close()
        assert (notice["exit_code"], notice["signal"]) == (-9, "SIGKILL")
        listed = world.agents()["k1"]
        assert (listed["status"], listed["exit_code"], listed["signal"]) == (
            "exited",
            -9,
            "SIGKILL",
        )
        # the run is logged in ``exits`` once the lingering host is gone
        world.request("daemon.stop", {"agent_id": "k1", "timeout": 1})
        rows = world.registry("SELECT outcome, exit_code, signal FROM exits WHERE agent_id='k1'")
        assert rows == [("stopped", -9, "SIGKILL")]


def test_agent_closing_stdout_and_stderr_is_supervised_without_spinning(
    host_factory: HostFactory, figure: Figure
) -> None:
    """An agent that closes both output pipes but lives on: still ``running`` with its
    pid, still gets its input, and the host does not spin on the closed pipes (its CPU
    time over the agent's remaining life, while nothing happens, is measured)."""
    code = (
        "import os, sys, time\n"
        "print('bye', flush=True)\n"
        "os.close(1); os.close(2)\n"
        "line = sys.stdin.readline()\n"
        "with open(sys.argv[1], 'w') as f: f.write(line)\n"
        "time.sleep(1.5)\n"  # the measured quiet period: the agent idles with no output
    )
    got = Path(tempfile.mkdtemp(prefix="ah-in-", dir="/tmp")) / "got"
    try:
        host = host_factory("a1", "--agent", "lines", command=[*lines_agent(code), str(got)])
        with host.raw() as conn:
            conn.request("host.attach", {"offset": 0})
            read_until(conn, "bye")
            agent = host.agent()
            assert agent["state"] == "running" and agent["pid"] > 0
            assert conn.request("host.send", {"input": "still there?"})["success"]
            wait_for(lambda: got.exists() and got.read_text() == "still there?\n", what="input")
            cpu0, t0 = cpu_seconds(host.pid), time.monotonic()
            while conn.frame().get("state") != "done":
                pass
            ratio = (cpu_seconds(host.pid) - cpu0) / (time.monotonic() - t0)
        assert host.agent()["exit_code"] == 0
        figure(
            "host CPU while its agent idles with closed stdout/stderr", ratio * 100, "% of a core"
        )
        assert ratio < 0.2
    finally:
        shutil.rmtree(got.parent, ignore_errors=True)


def test_children_ignoring_sigterm_are_killed_with_the_group(host_factory: HostFactory) -> None:
    """Children (and a grandchild) of the agent that ignore SIGTERM and hold none of its
    pipes outlive its exit: they are ended with the group (SIGTERM, then SIGKILL after a
    grace), the agent's exit is still reported as its own, and nothing is left behind
    (no zombie under the host)."""
    script = (
        "trap '' TERM\n"
        "sleep 1000 </dev/null >/dev/null 2>&1 &\n"
        "echo child $!\n"
        "sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo grandchild $!' \n"
        "exit 0\n"
    )
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", script])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        pids = {}
        while len(pids) < 2:
            frame = conn.frame()
            if frame.get("type") == "output":
                name, pid = frame["data"].split()
                pids[name] = int(pid)
    agent = host.wait_state("done")
    assert agent["exit_code"] == 0
    for name, pid in pids.items():
        wait_for(lambda pid=pid: pid_gone(pid), what=f"{name} ended")
    assert host.alive() and host.status()["agent"]["state"] == "done"
    leftovers = [
        p
        for p in psutil.Process(host.pid).children(recursive=True)
        if "read _unused" not in " ".join(p.cmdline())
    ]
    assert leftovers == []


def test_leftover_children_get_a_grace_after_sigterm(host_factory: HostFactory) -> None:
    """A child that holds none of the agent's pipes and cleans up on SIGTERM (for 0.3 s)
    gets to finish before SIGKILL (it used to follow SIGTERM within a millisecond, since
    the grace only waited for pipes such a child had already closed)."""
    marker = Path(tempfile.mkdtemp(prefix="ah-mark-", dir="/tmp")) / "cleaned"
    child = (
        "import os, signal, sys, time\n"
        "def bye(*_):\n"
        "    time.sleep(0.3)\n"
        f"    open({str(marker)!r}, 'w').write('done')\n"
        "    os._exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', os.getpid(), flush=True)\n"
        "os.close(1); os.close(2)\n"
        "while True: time.sleep(1)\n"
    )
    script = '"$0" -c "$CHILD" </dev/null & read x; exit 0'
    try:
        host = host_factory(
            "a1", "--agent", "lines", command=["sh", "-c", script, PY], env={"CHILD": child}
        )
        with host.raw() as conn:
            conn.request("host.attach", {"offset": 0})
            ready = conn.read_until(lambda f: str(f.get("data", "")).startswith("ready"))
            conn.request("host.send", {"input": "go"})
        pid = int(ready["data"].split()[1])
        assert host.wait_state("done")["exit_code"] == 0
        wait_for(lambda: pid_gone(pid), what="child ended")
        assert marker.read_text() == "done"
    finally:
        shutil.rmtree(marker.parent, ignore_errors=True)


# --- a full disk --------------------------------------------------------------------------


@pytest.fixture
def tmpfs() -> Iterator[Callable[[str], Path]]:
    """``tmpfs(size)``: a fresh tmpfs of that size (unmounted at teardown)."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if os.getuid() != 0:
            pytest.skip("needs root to mount a tmpfs (a real full file system)")
        path = Path(tempfile.mkdtemp(prefix="ahfs-", dir="/tmp"))
        options = f"size={size},mode=0700"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            path.rmdir()
            pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)  # detach it regardless
        path.rmdir()


def fill(fs: Path, *appended: Path) -> None:
    """Fill the file system: a filler file, then the last page of every file in
    ``appended`` (files being appended to, such as logs), until each write fails with
    ENOSPC."""
    for path in [fs / "filler", *appended]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 20, 4096, 64, 1):
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * size)
                assert os.statvfs(fs).f_bavail == 0 or size > 1
            with pytest.raises(OSError) as full:
                os.write(fd, b"\0")
            assert full.value.errno == errno.ENOSPC
        finally:
            os.close(fd)


def ignored_signals(pid: int) -> set[int]:
    """The signals ``pid`` ignores, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask & (1 << (n - 1))}
    raise AssertionError("no SigIgn line")


def journaled(home: Path, agent_id: str = "a1") -> list[Event]:
    directory = home / "journal" / agent_id
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]


def test_full_disk_under_journal_and_log_degrades_and_keeps_serving(
    tmpfs: Callable[[str], Path], figure: Figure
) -> None:
    """The host's home *and its log* on a tmpfs that fills up: the journal turns off with
    one ``error`` event (ENOSPC), every event journaled before is intact and exportable,
    the host keeps serving from its ring (attach from 0 replays all, send, history), its
    log writes fail silently instead of breaking requests (they used to: clients were
    reset and ``host.stop`` never answered), and it stops cleanly. A host started after
    space is freed begins a new epoch."""
    fs = tmpfs("8m")
    host = start_host(fs, "a1", "--agent", "lines", "--log-level", "debug", command=ECHO)
    try:
        # a write past a file size limit (RLIMIT_FSIZE) also raises SIGXFSZ: the host
        # ignores it (Python does so at start-up) and gets EFBIG instead
        assert signal.SIGXFSZ in ignored_signals(host.pid)
        with host.raw() as conn:
            conn.request("host.attach", {"offset": 0})
            send_all(conn, [f"before {i}" for i in range(100)])
            before = read_until(conn, "before 99")
            fill(fs, host.log_path)
            send_all(conn, [f"after {i}" for i in range(300)])
            events = before + read_until(conn, "after 299")
        # the journal's failure gave back the pages of its cut segment: fill them too,
        # so that from here on every log line fails
        fill(fs, host.log_path)
        log_size = host.log_path.stat().st_size
        assert_contiguous([e["offset"] for e in events], 1)
        (error,) = [e["error"] for e in events if e["type"] == "error"]
        assert "No space left on device" in error and "journal is off" in error
        assert "No space left on device" in host.status()["host"]["journal"]["error"]
        # everything journaled is exactly what clients got, and it covers every event
        # published before the disk filled
        kept = journaled(fs)
        assert_contiguous([e["offset"] for e in kept], 1)
        assert len(kept) >= before[-1]["offset"]
        for e in kept:
            assert e == events[e["offset"] - 1]
        # served from the ring: a new client gets the whole stream, nothing truncated
        with host.raw() as conn:
            attach = conn.request("host.attach", {"offset": 0})["payload"]
            assert attach["truncated"] is False and attach["oldest_offset"] == 1
            replay = conn.events(events[-1]["offset"])
            assert replay == events
            assert conn.request("host.send", {"input": "still"})["success"]
            read_until(conn, "still")
            history = conn.request("host.history", {"limit": 0})["payload"]
            assert history["entries"][-1]["content"] == "still"
            assert host.log_path.stat().st_size == log_size  # its log lines were dropped
            stop = conn.request("host.stop", {"timeout": 5})
        assert stop["success"], stop
        assert host.wait_exit() == 0
        assert not host.socket_path.exists() and not host.lock_path.exists()
        exported = subprocess.run(
            [PY, "-m", "agenthost", "export", "a1", "--format", "events", "--home", str(fs)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert exported.returncode == 0, exported.stderr
        assert [json.loads(line) for line in exported.stdout.splitlines()] == kept
        figure("events journaled before the disk filled", len(kept), "events")
        figure("events served from the ring after it filled", len(events) - len(kept), "events")

        os.unlink(fs / "filler")
        again = start_host(fs, "a1", "--agent", "lines", command=ECHO)
        try:
            assert again.status()["host"]["journal"]["epoch"] != attach["epoch"]
        finally:
            kill_tree(again.proc)
    finally:
        kill_tree(host.proc)


def test_full_disk_under_the_daemon_registry(tmpfs: Callable[[str], Path]) -> None:
    """The daemon's home on a tmpfs that fills up (registry, logs, hosts' journals): the
    daemon keeps running and answering; it keeps following and forwarding its hosts'
    events from memory, sees an agent end and a stop through it, and refuses a spawn it
    cannot record with a clear error (the id stays usable: it used to be stuck as
    ``spawning``). Once space is freed, everything it could not write reaches the
    registry: positions (even of an agent idle since), statuses, the ``exits`` rows."""
    fs = tmpfs("16m")
    quitter = lines_agent(
        "import sys\nfor line in sys.stdin:\n"
        "    print(line.rstrip(), flush=True)\n"
        "    if line.strip() == 'quit': raise SystemExit(4)\n"
    )
    with daemon_world(fs) as world:
        daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
        world.spawn("r1", ECHO)
        world.spawn("q1", quitter)
        world.spawn("s1", ["cat"])
        watch = StreamCollector(world)
        try:
            with RawConn(fs / "hosts" / "r1.sock") as host:
                host.request("host.attach", {"offset": 0})
                send_all(host, ["one"])
                read_until(host, "one")
                wait_for(lambda: registry_offset(world, "r1") >= 3, what="position recorded")
                fill(fs, daemon.log_path, *(fs / "logs").glob("*.log"))
                send_all(host, [f"full {i}" for i in range(50)])
                last = read_until(host, "full 49")[-1]["offset"]
            watch.wait(lambda w: w.saw("r1", "full 49"), what="forwarded while full")
            assert_contiguous(watch.offsets("r1"), 1, last)
            assert world.agents()["r1"]["last_offset"] == last  # in memory
            with RawConn(fs / "hosts" / "q1.sock") as host:  # an agent ends meanwhile
                send_all(host, ["quit"])
            wait_for(lambda: world.agents()["q1"]["status"] == "exited", what="q1 seen exiting")
            stopped = world.request("daemon.stop", {"agent_id": "s1", "timeout": 5})
            assert stopped["signal"] == "SIGTERM"
            assert world.agents()["s1"]["status"] == "stopped"
            refused = world.call(
                "daemon.spawn", {"agent_id": "r2", "agent": "lines", "command": ["cat"]}
            )
            assert refused["success"] is False and "full" in refused["error"], refused
            assert daemon.alive() and world.ping()["agents"] == 4
            assert registry_offset(world, "r1") < last  # what could not be written ...
            os.unlink(fs / "filler")
            # ... is written once there is room, though r1 has been idle since
            wait_for(lambda: registry_offset(world, "r1") == last, what="position written")
            statuses = dict(world.registry("SELECT agent_id, status FROM agents"))
            assert statuses["q1"] == "exited" and statuses["s1"] == "stopped", statuses
            # (its exit status is not there: the daemon reads it from the host's log,
            # which the full disk swallowed; the stop's answer above had it)
            ends = world.registry("SELECT agent_id, outcome FROM exits")
            assert ("s1", "stopped") in ends, ends
            world.spawn("r2", ["cat"])  # the refused id is usable
            assert world.agents()["r2"]["status"] == "running"
        finally:
            watch.close()
        assert daemon.alive()
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit() == 0
        assert world.registry("PRAGMA integrity_check") == [("ok",)]


def registry_offset(world: DaemonWorld, agent_id: str) -> int:
    rows = world.registry("SELECT last_offset FROM agents WHERE agent_id = ?", agent_id)
    return int(rows[0][0]) if rows else 0


# --- out of file descriptors ---------------------------------------------------------------


def test_descriptor_exhaustion_neither_spins_nor_sticks(
    host_factory: HostFactory, figure: Figure
) -> None:
    """A host limited to 64 descriptors, whose agent prints 500 lines/s (so the journal's
    fsync thread dups a descriptor every 20 ms), flooded with connections until it
    cannot accept, five times over. While exhausted, with a client waiting to be
    accepted, its CPU time is measured: it must not spin. (With uvloop's own server it
    did, at 100 % of a core, whenever the journal thread took libuv's spare descriptor:
    seen in about half of such rounds.) Clients already connected are still served,
    the journal's background thread survives its EMFILE (that used to kill it), and the
    host accepts again as soon as connections close."""
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--journal-sync-interval",
        "0.02",
        command=flood_command("--count", "0", "--rate", "500"),
        wrapper=["prlimit", "--nofile=64:64", "--"],
    )
    threads = psutil.Process(host.pid).num_threads()
    cpu0, t0 = cpu_seconds(host.pid), time.monotonic()
    select.select([], [], [], 0.3)  # the same window, not exhausted: the flood's own cost
    baseline = (cpu_seconds(host.pid) - cpu0) / (time.monotonic() - t0)
    exhausted = exhaust_descriptors(host.pid, host.socket_path, "host")
    figure("connections held at the 64-descriptor limit", exhausted.held, "connections")
    figure("host CPU while exhausted, a client waiting", exhausted.ratio * 100, "% of a core")
    figure("host CPU with the same agent output, not exhausted", baseline * 100, "% of a core")
    figure("exhausted rounds where the knock waited (no spare)", exhausted.waited, "of 5")
    assert exhausted.ratio < 0.2
    assert psutil.Process(host.pid).num_threads() >= threads  # the journal thread lives
    log = host.log()
    assert "Exception in thread" not in log and "Traceback" not in log
    assert "accept.paused" in log


def test_daemon_descriptor_exhaustion_backs_off_like_the_host(home: Path, figure: Figure) -> None:
    """The daemon stands on the same server as the host: limited to 64 descriptors
    (``prlimit --pid`` once it is up) and flooded with connections until it cannot
    accept, five times over, it pauses its accepts (``accept.paused``: uvloop's server
    had no such back-off), idles while a client waits, still serves the clients it
    has, and accepts again as soon as connections close."""
    with daemon_world(home) as world:
        daemon = world.start_daemon("--scan-interval", "0")
        subprocess.run(["prlimit", f"--pid={daemon.pid}", "--nofile=64:64"], check=True)
        exhausted = exhaust_descriptors(daemon.pid, world.socket_path, "daemon")
        figure("daemon connections held at the 64-descriptor limit", exhausted.held, "connections")
        figure("daemon CPU while exhausted, a client waiting", exhausted.ratio * 100, "% of a core")
        assert exhausted.ratio < 0.2
        assert daemon.events("accept.paused")
        assert "Traceback" not in daemon.log()


@dataclass
class Exhausted:
    held: int  # fewest connections held when accepting failed
    ratio: float  # CPU time per second of the service while exhausted with a client waiting
    waited: int  # rounds where that client waited (no spare descriptor to refuse it with)


def exhaust_descriptors(pid: int, path: Path, service: str) -> Exhausted:
    """Five rounds of: connect until a client is not served, knock once more, measure
    the CPU the service spends meanwhile, check that a client from before is still
    answered, let every connection go and wait until the service accepts again."""
    ping = json.dumps({"type": f"{service}.ping", "id": "held"}).encode() + b"\n"
    busy, window, held_counts, waited = 0.0, 0.0, [], 0
    for _ in range(5):
        held: list[socket.socket] = []
        try:
            while True:  # connections until one is not served
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(1.0)
                s.connect(str(path))
                try:
                    s.sendall(ping)
                    served = bool(s.recv(65536))
                except TimeoutError:  # waits for a descriptor: fine, as long as it is idle
                    served = False
                    waited += 1
                except OSError:
                    served = False
                held.append(s)
                if not served:
                    break
                assert len(held) < 200, "the descriptor limit did not apply"
            held_counts.append(len(held) - 1)
            # exhausted, with one more client knocking: the service must idle
            knock = socket.socket(socket.AF_UNIX)
            held.append(knock)
            with contextlib.suppress(OSError):
                knock.connect(str(path))
                knock.sendall(ping)
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            select.select([], [], [], 0.3)  # the measured window
            busy += cpu_seconds(pid) - cpu0
            window += time.monotonic() - t0
            with held[0] as conn:  # (a client from before still gets answers)
                conn.sendall(ping)
                assert b'"id":"held","success":true' in conn.recv(65536)
        finally:
            for s in held:
                s.close()
        with wait_for(lambda: try_connect(path, service), what="accepting again") as conn:
            assert conn.request(f"{service}.ping")["success"]
    return Exhausted(min(held_counts), busy / window, waited)


def try_connect(path: Path, service: str) -> RawConn | None:
    """A connection whose ping was answered, or None."""
    try:
        conn = RawConn(path)
    except OSError:
        return None
    try:
        if conn.request(f"{service}.ping")["success"]:
            return conn
    except (OSError, EOFError):
        pass
    conn.close()
    return None


# --- the wall clock jumps ----------------------------------------------------------------

FAKETIME_LIBS = [
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/faketime/libfaketime.so.1"),
]


@pytest.fixture
def faketime(home: Path) -> tuple[dict[str, str], Callable[[str], None]]:
    """Environment that runs a process on a wall clock we can move while it runs
    (libfaketime; the monotonic clock is left alone, as a real clock step does), and a
    function to set the offset (``"-7200"``, ``"+3d"``)."""
    lib = next((p for p in FAKETIME_LIBS if p.exists()), None)
    if lib is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    control = home / "faketime.rc"
    control.write_text("+0\n")
    env = {
        "LD_PRELOAD": str(lib),
        "FAKETIME_TIMESTAMP_FILE": str(control),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }

    def jump(offset: str) -> None:
        control.write_text(offset + "\n")

    return env, jump


def test_wall_clock_jumps_change_timestamps_only(
    host_factory: HostFactory, faketime: tuple[dict[str, str], Callable[[str], None]]
) -> None:
    """The host's wall clock jumps back two hours, then forward three days, while it
    streams: offsets stay contiguous and in order (live, replayed, journaled, and across
    a host restart), only the timestamps jump, uptime keeps counting on the monotonic
    clock, and a lingering host does not end early because its clock leapt forward."""
    env, jump = faketime
    host = host_factory("a1", "--agent", "lines", command=ECHO, env=env)
    stamps = {}
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        for label, offset in [("now", "+0"), ("back", "-7200"), ("forward", "+3d")]:
            jump(offset)
            send_all(conn, [f"{label} {i}" for i in range(50)])
            stamps[label] = read_until(conn, f"{label} 49")[-1]["timestamp"]
        uptime = conn.request("host.ping")["payload"]["uptime_seconds"]
    when = {k: datetime.fromisoformat(v.replace("Z", "+00:00")) for k, v in stamps.items()}
    assert when["back"] < when["now"] - timedelta(hours=1.9)  # the clock did jump
    assert when["forward"] > when["now"] + timedelta(days=2.9)
    assert 0 <= uptime < 3600  # monotonic: not 3 days, not negative
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        last = conn.request("host.history", {"limit": 1})["payload"]["offset"]
        events = conn.events(last)
    assert_contiguous([e["offset"] for e in events], 1)
    assert [e["offset"] for e in journaled(host.home)] == list(range(1, last + 1))
    with host.raw() as conn:
        conn.request("host.stop", {"timeout": 5})
    host.wait_exit()
    # a restart after the jumps continues the stream where it was
    jump("-7200")
    again = host_factory("a1", "--agent", "lines", "--linger", "3600", command=["true"], env=env)
    agent = again.wait_state("done")
    with again.raw() as conn:
        attach = conn.request("host.attach", {"offset": last})["payload"]
        nxt = conn.frame()
    assert attach["truncated"] is False and nxt["offset"] == last + 1
    assert agent["exit_code"] == 0
    jump("+40d")  # a lingering host waits on the monotonic clock: 40 days are nothing
    for _ in range(3):  # (each request wakes the loop, which would run a due timer)
        with again.raw() as conn:
            assert conn.request("host.ping")["success"]
    assert again.alive()


# --- SIGTERM while a stop is under way -------------------------------------------------

IGNORE_TERM = (
    "import signal, subprocess, sys\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen(['sleep', '1000'])\n"  # inherits the ignored SIGTERM
    "print('ready', child.pid, flush=True)\n"
    "sys.stdin.read()\n"
)


def start_stubborn(host_factory: HostFactory) -> tuple[HostProc, int, int]:
    """A host whose agent (and its child) ignore SIGTERM; 60 s until SIGKILL."""
    host = host_factory(
        "a1", "--agent", "lines", "--stop-timeout", "60", command=lines_agent(IGNORE_TERM)
    )
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        ready = conn.read_until(lambda f: str(f.get("data", "")).startswith("ready"))
    return host, host.agent()["pid"], int(ready["data"].split()[1])


@pytest.mark.parametrize("interrupt", ["sigterm", "forced stop"])
def test_sigterm_during_a_client_stop_answers_the_client(
    host_factory: HostFactory, interrupt: str
) -> None:
    """``host.stop`` (timeout 60 s) is waiting for an agent that ignores SIGTERM when the
    host gets SIGTERM (or another client a forced stop): the agent and its child are
    killed at once, the waiting client gets its answer (SIGKILL, *not graceful*: it
    used to say graceful), the host exits 0 and removes its files."""
    host, agent_pid, child = start_stubborn(host_factory)
    with host.raw(timeout=30) as conn:
        rid = conn.send("host.stop", {"timeout": 60})
        wait_for(lambda: "agent.stopping" in host.log(), what="stop under way")
        if interrupt == "sigterm":
            host.signal(signal.SIGTERM)
        else:
            with host.raw(timeout=30) as other:
                forced = other.request("host.stop", {"force": True})["payload"]
            assert (forced["signal"], forced["graceful"]) == ("SIGKILL", False)
        response = conn.response(rid)
    assert response["success"], response
    payload = response["payload"]
    assert (payload["signal"], payload["graceful"]) == ("SIGKILL", False)
    assert payload["duration_seconds"] < 60
    assert host.wait_exit(timeout=30) == 0
    assert pid_gone(agent_pid) and pid_gone(child)
    assert not host.socket_path.exists() and not host.lock_path.exists()


def test_client_stop_during_a_sigterm_stop_is_answered_or_closed(
    host_factory: HostFactory,
) -> None:
    """The other order: SIGTERM started the stop, a client's ``host.stop`` joins it, a
    second SIGTERM ends it. The client gets the shared result or a clean end of stream,
    never a hang; the host exits 0, its files removed, nothing of the agent left."""
    host, agent_pid, child = start_stubborn(host_factory)
    host.signal(signal.SIGTERM)
    wait_for(lambda: "agent.stopping" in host.log(), what="stop under way")
    with host.raw(timeout=30) as conn:
        rid = conn.send("host.stop", {"timeout": 60})
        wait_for(lambda: host.log().count("host.stop_requested") == 1, what="client stop")
        host.signal(signal.SIGTERM)
        try:
            response: Event | None = conn.response(rid)
        except EOFError:
            response = None  # closed cleanly with the host
    if response is not None:
        assert response["success"] and response["payload"]["signal"] == "SIGKILL"
    assert host.wait_exit(timeout=30) == 0
    assert pid_gone(agent_pid) and pid_gone(child)
    assert not host.socket_path.exists() and not host.lock_path.exists()


def test_sigterm_right_after_a_stop_answer_never_leaves_files(host_factory: HostFactory) -> None:
    """SIGTERM landing while the host winds down after answering ``host.stop``, five
    times: it exits (0, or by that late SIGTERM once its loop is closed) and its socket
    and lock are gone every time."""
    statuses = []
    for _ in range(5):
        host = host_factory("a1", "--agent", "lines", command=["cat"])
        with host.raw() as conn:
            assert conn.request("host.stop", {"timeout": 5})["success"]
            with contextlib.suppress(ProcessLookupError):
                host.signal(signal.SIGTERM)
        statuses.append(host.wait_exit(timeout=30))
        assert not host.socket_path.exists() and not host.lock_path.exists()
    assert set(statuses) <= {0, -signal.SIGTERM}
