"""The host's life: start, serve, agent exit, linger, stop, signals, locks, stale sockets."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from agenthost.journal import JournalConfig, JournalWriter, SyncPolicy
from agenthost.launch import ReadyListener
from agenthost.paths import journal_dir
from agenthost.protocol import MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, EventEncoder, PingResponse

from conftest import HostFactory
from hosttools import (
    DEADLINE,
    PY,
    HostProc,
    RawConn,
    kill_tree,
    lines_agent,
    pid_gone,
    serve_argv,
    wait_for,
)

RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
CAT = ["cat"]


def test_ping_status_list_fields(host_factory: HostFactory) -> None:
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--project",
        "proj",
        "--task",
        "T-1",
        "--description",
        "does things",
        command=CAT,
    )
    with host.raw() as conn:
        ping = conn.request("host.ping")
        assert ping["success"] is True and "error" not in ping and "code" not in ping
        assert ping["kind"] == "response" and ping["type"] == "host.ping"
        p = ping["payload"]
        assert p["protocol_version"] == PROTOCOL_VERSION
        assert p["min_protocol_version"] == MIN_PROTOCOL_VERSION == "1.0"
        assert re.match(r"^(\d+h)?(\d+m)?\d+s$", p["uptime"])
        assert RFC3339_Z.match(p["started_at"])
        # the hand-built payload is exactly what the model would produce
        assert PingResponse.model_validate(p).model_dump(mode="json", exclude_none=True) == p
        status = conn.request("host.status")["payload"]
        assert status["host"]["pid"] == host.pid
        assert status["host"]["socket_path"] == str(host.socket_path)
        agent = status["agent"]
        assert agent["id"] == "a1" and agent["project"] == "proj"
        assert agent["task"] == "T-1" and agent["description"] == "does things"
        assert agent["backend"] == "lines" and agent["state"] == "running"
        assert agent["pid"] > 0 and agent["worktree"] == os.getcwd()
        assert RFC3339_Z.match(agent["started_at"])
        listed = conn.request("host.list")["payload"]["agents"]
        assert [a["id"] for a in listed] == ["a1"]


def test_unset_project_and_worktree_are_strings(host_factory: HostFactory) -> None:
    agent = host_factory("a1", "--agent", "lines", command=CAT).agent()
    assert agent["project"] == "" and isinstance(agent["worktree"], str)


def test_permissions_of_directory_socket_and_lock(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    assert stat.S_IMODE(os.stat(host.socket_path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(host.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(host.lock_path).st_mode) == 0o600


def test_agent_in_its_own_process_group(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    pid = host.agent()["pid"]
    assert os.getpgid(pid) == pid  # group leader
    assert os.getsid(pid) == pid  # own session: no controlling terminal
    assert os.getpgid(pid) != os.getpgid(host.pid)


def test_stderr_lines_are_output_events(host_factory: HostFactory) -> None:
    code = "import sys; input(); print('out'); print('err', file=sys.stderr)"
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "go"})
        seen = []
        while len([e for e in seen if e.get("type") == "output"]) < 2:
            f = conn.frame()
            if f["kind"] == "event":
                seen.append(f)
    outputs = {e["stream"]: e["data"] for e in seen if e["type"] == "output"}
    assert outputs == {"stdout": "out", "stderr": "err"}


@pytest.mark.parametrize(
    ("code", "exit_code", "sig", "state"),
    [
        ("raise SystemExit(0)", 0, None, "done"),
        ("raise SystemExit(3)", 3, None, "error"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9, "SIGKILL", "error"),
    ],
)
def test_exit_status_and_final_state(
    host_factory: HostFactory, code: str, exit_code: int, sig: str | None, state: str
) -> None:
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    agent = host.wait_state("done", "error")
    assert agent["state"] == state
    assert agent["exit_code"] == exit_code
    assert agent.get("signal") == sig
    assert agent["pid"] == 0
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        events = []
        while not events or events[-1].get("type") != "state" or events[-1]["state"] != state:
            events.append(conn.frame())
    errors = [e for e in events if e["type"] == "error"]
    if exit_code == 0:
        assert errors == []
    else:
        assert len(errors) == 1 and (sig or str(exit_code)) in errors[0]["error"]


def test_spawn_failure_is_reported_and_host_keeps_serving(home: Path) -> None:
    # `serve` refuses a program that is not there before anything starts
    # (test_missing_agent.py); a host given one all the same (the library's run_host,
    # or a program gone between that check and the spawn) serves the failure
    code = (
        "import sys; from pathlib import Path\n"
        "from agenthost.host.host import HostConfig\n"
        "from agenthost.host.run import run_host\n"
        "run_host(HostConfig('a1', Path(sys.argv[1]), agent='lines',"
        " command=('/nonexistent/agent-binary',)))\n"
    )
    log = home / "a1.host.log"
    with ReadyListener() as listener, open(log, "ab") as fh:
        env = {**os.environ, "NOTIFY_SOCKET": listener.address}
        proc = subprocess.Popen([PY, "-c", code, str(home)], stdout=fh, stderr=fh, env=env)
        host = HostProc(home, "a1", proc, log)
        try:
            listener.wait(proc, DEADLINE)
            agent = host.wait_state("error")
            assert agent["exit_code"] == 127 and "not found" in agent["last_error"]
            assert "command not found: /nonexistent/agent-binary" in agent["start_error"]
            with host.raw() as conn:
                resp = conn.request("host.send", {"input": "hello"})
                assert resp["success"] is False and resp["code"] == "agent_not_running"
                stop = conn.request("host.stop", {"timeout": 1})
            assert stop["success"] and stop["payload"]["exit_code"] == 127
            assert host.wait_exit() == 0
        finally:
            kill_tree(proc)


def test_agent_that_exits_at_once_then_linger_ends(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", "--linger", "1", command=["true"])
    # the host lingers: status is served with the final state...
    agent = host.wait_state("done")
    assert agent["exit_code"] == 0
    # ...until the linger time ends; then it removes its socket and lock and exits 0
    assert host.wait_exit() == 0
    assert not host.socket_path.exists() and not host.lock_path.exists()


def test_stop_graceful_reports_real_exit_and_removes_socket(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    agent_pid = host.agent()["pid"]
    with host.raw() as conn:
        resp = conn.request("host.stop", {"timeout": 5, "reason": "test"})
        # the answer comes after the agent exited, and the socket is already gone
        assert pid_gone(agent_pid)
        assert not host.socket_path.exists()
        assert conn.closed_by_peer()
    p = resp["payload"]
    assert resp["success"] and p["stopped"] is True
    assert p["exit_code"] == -15 and p["signal"] == "SIGTERM"
    assert p["graceful"] is True and p["final_state"] == "done"  # a requested stop
    assert re.match(r"^\d+\.\ds$", p["duration"]) and p["duration_seconds"] >= 0
    assert host.wait_exit() == 0
    assert not host.lock_path.exists()


def test_stop_escalates_to_sigkill_after_timeout(host_factory: HostFactory) -> None:
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
        resp = conn.request("host.stop", {"timeout": 0.3})
    p = resp["payload"]
    assert p["exit_code"] == -9 and p["signal"] == "SIGKILL" and p["graceful"] is False
    assert p["duration_seconds"] >= 0.3


def test_force_stop_is_never_graceful(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        p = conn.request("host.stop", {"force": True})["payload"]
    assert p["signal"] == "SIGKILL" and p["graceful"] is False


def test_stop_after_agent_exited_returns_recorded_result(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=lines_agent("raise SystemExit(7)"))
    host.wait_state("error")
    with host.raw() as conn:
        p = conn.request("host.stop")["payload"]
    assert p["exit_code"] == 7 and p["final_state"] == "error" and p["stopped"] is True
    assert host.wait_exit() == 0


def test_concurrent_stops_share_one_result(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as c1, host.raw() as c2:
        c1.send("host.stop", {"timeout": 5})
        c2.send("host.stop", {"timeout": 5})
        r1, r2 = c1.response(), c2.response()
    assert r1["payload"]["exit_code"] == r2["payload"]["exit_code"] == -15


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_stop_agent_then_host(host_factory: HostFactory, sig: int) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    agent_pid = host.agent()["pid"]
    host.signal(sig)
    assert host.wait_exit() == 0
    assert pid_gone(agent_pid)
    assert not host.socket_path.exists() and not host.lock_path.exists()


def test_second_sigterm_during_stop_kills_at_once(host_factory: HostFactory) -> None:
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    host = host_factory("a1", "--agent", "lines", "--stop-timeout", "60", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
    agent_pid = host.agent()["pid"]
    host.signal(signal.SIGTERM)
    wait_for(lambda: "agent.stopping" in host.log(), what="stop started")
    host.signal(signal.SIGTERM)
    assert host.wait_exit(timeout=20) == 0  # far less than the 60 s stop timeout
    assert pid_gone(agent_pid)


def test_sighup_is_ignored(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    agent_pid = host.agent()["pid"]
    host.signal(signal.SIGHUP)
    with host.raw() as conn:
        assert conn.request("host.ping")["success"]
    assert host.alive() and not pid_gone(agent_pid)


def test_sigusr1_while_the_host_starts_is_harmless(home: Path) -> None:
    # A daemon sends SIGUSR1 to a host that holds its lock but has no socket: which
    # is every host between taking its lock and binding. Signal it all along. A full
    # journal segment to recover first (~16 MiB, as after a long session) makes that
    # window last long enough for the signals to land in it.
    writer = JournalWriter(journal_dir(home, "a1"), "a1", JournalConfig(sync=SyncPolicy.NONE))
    writer.open()
    encoder = EventEncoder("a1")
    stamp = "2026-01-01T00:00:00.000000Z"
    for first in range(1, 150_001, 1000):
        lines = [b"x" * 60] * 1000
        writer.append(b"".join(encoder.output_lines(first, stamp, lines, "stdout")), first, 1000)
    writer.close()
    proc = subprocess.Popen(
        serve_argv(home, "a1", ["--agent", "lines"], CAT),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lock = home / "hosts" / "a1.lock"
    sock = home / "hosts" / "a1.sock"

    def lock_held() -> bool:
        try:
            fd = os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def signalled_until_served() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the host died: {proc.returncode}")
        if lock_held():
            proc.send_signal(signal.SIGUSR1)
        try:
            with RawConn(sock, timeout=2) as conn:
                return bool(conn.request("host.ping")["success"])
        except OSError:
            return False

    try:
        wait_for(signalled_until_served, what="host serving while signalled")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigusr1_recreates_a_deleted_socket(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as survivor:
        os.unlink(host.socket_path)
        host.signal(signal.SIGUSR1)
        wait_for(host.socket_path.exists, what="socket re-created")
        assert stat.S_IMODE(os.stat(host.socket_path).st_mode) == 0o600
        with host.raw() as conn:
            assert conn.request("host.ping")["success"]
        # connections made before keep working
        assert survivor.request("host.ping")["success"]


def test_host_killed_by_sigkill_takes_its_whole_agent_group_along(
    host_factory: HostFactory,
) -> None:
    # the agent starts a child that ignores its pipes: only a group kill reaches it
    script = "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; cat"
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", script])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        child = int(conn.read_until(lambda f: f.get("type") == "output")["data"])
    agent_pid = host.agent()["pid"]
    assert os.getpgid(child) == agent_pid
    host.signal(signal.SIGKILL)
    host.wait_exit()
    wait_for(lambda: pid_gone(agent_pid) and pid_gone(child), what="agent group killed")


def test_watchdog_does_not_outlive_a_normal_stop(host_factory: HostFactory) -> None:
    import psutil

    host = host_factory("a1", "--agent", "lines", command=CAT)
    helpers = [p for p in psutil.Process(host.pid).children() if "read _unused" in str(p.cmdline())]
    assert len(helpers) == 1  # the watchdog exists while the agent runs
    with host.raw() as conn:
        conn.request("host.stop", {"timeout": 5})
    host.wait_exit()
    assert pid_gone(helpers[0].pid)


def test_stale_socket_of_killed_host_is_cleaned(host_factory: HostFactory) -> None:
    first = host_factory("a1", "--agent", "lines", command=CAT)
    first.signal(signal.SIGKILL)
    first.wait_exit()
    assert first.socket_path.exists()  # left behind by the dead host
    with pytest.raises(ConnectionRefusedError):
        RawConn(first.socket_path)
    second = host_factory("a1", "--agent", "lines", command=CAT)
    with second.raw() as conn:
        assert conn.request("host.status")["payload"]["host"]["pid"] == second.pid


def test_second_serve_is_refused_and_live_socket_untouched(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    inode = os.stat(host.socket_path).st_ino
    result = subprocess.run(
        serve_argv(host.home, "a1", ["--agent", "lines"], CAT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 6
    assert "already running" in result.stderr and str(host.pid) in result.stderr
    assert os.stat(host.socket_path).st_ino == inode
    with host.raw() as conn:
        assert conn.request("host.status")["payload"]["host"]["pid"] == host.pid


@pytest.mark.parametrize("agent_id", ["../x", "a/b", ".hidden", "", "x" * 65])
def test_invalid_agent_id_is_refused_and_creates_nothing(home: Path, agent_id: str) -> None:
    root = home
    result = subprocess.run(
        serve_argv(root / "h", agent_id, ["--agent", "lines"], CAT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "invalid agent id" in result.stderr
    assert list(root.iterdir()) == []


def test_socket_path_too_long_is_a_clear_error(home: Path) -> None:
    deep = home / ("d" * 100)
    result = subprocess.run(
        serve_argv(deep, "a1", ["--agent", "lines"], CAT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "AF_UNIX" in result.stderr


def test_children_outliving_the_agent_are_ended(host_factory: HostFactory) -> None:
    # the agent starts a background child that keeps the output pipe open, then exits
    script = "sleep 1000 & echo $!; exit 0"
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", script])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        child = int(conn.read_until(lambda f: f.get("type") == "output")["data"])
    host.wait_state("done")
    assert pid_gone(child)


def test_agent_closing_stdout_but_alive_is_still_supervised(host_factory: HostFactory) -> None:
    code = "import os, sys, time\nprint('bye', flush=True)\nos.close(1)\nsys.stdin.read()\n"
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    agent = host.agent()
    assert agent["state"] == "running" and agent["pid"] > 0
    with host.raw() as conn:
        p = conn.request("host.stop", {"timeout": 5})["payload"]
    assert p["signal"] == "SIGTERM"


def test_python_m_agenthost_entry_point() -> None:
    out = subprocess.run(
        [PY, "-m", "agenthost", "--version"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0 and "agenthost" in out.stdout


def test_agent_gets_default_sigpipe_and_sighup(host_factory: HostFactory) -> None:
    # The host ignores SIGHUP and SIGPIPE; ignored dispositions survive exec, so the
    # host must reset them for the agent. /proc shows the agent's ignored signals.
    script = "grep '^SigIgn' /proc/self/status; read x"
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", script])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        line = conn.read_until(lambda f: str(f.get("data", "")).startswith("SigIgn"))
    ignored = int(line["data"].split(":")[1].strip(), 16)
    assert ignored & (1 << (signal.SIGPIPE - 1)) == 0
    assert ignored & (1 << (signal.SIGHUP - 1)) == 0


def test_open_hosts_directory_is_made_private(home: Path) -> None:
    (home / "hosts").mkdir(mode=0o755)
    os.chmod(home / "hosts", 0o755)
    result = subprocess.run(
        serve_argv(home, "a1", ["--agent", "lines", "--linger", "0"], ["true"]),
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0
    assert stat.S_IMODE(os.stat(home / "hosts").st_mode) == 0o700


def test_forced_stop_kills_descendants_outside_the_group(host_factory: HostFactory) -> None:
    # Like Codex, the agent starts a command in a session (and group) of its own, and
    # ignores SIGTERM: only killing the whole process tree ends the command.
    # (exec keeps the ignored SIGTERM: the leader survives it until SIGKILL)
    script = "trap '' TERM; setsid sleep 1000 & echo $!; exec sleep 1000"
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", script])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        child = int(conn.read_until(lambda f: f.get("type") == "output")["data"])
        agent_pid = host.agent()["pid"]
        # outside the agent's group (once the child has called setsid)
        wait_for(lambda: os.getpgid(child) != agent_pid, what="child in its own session")
        p = conn.request("host.stop", {"timeout": 0.3})["payload"]
    assert p["signal"] == "SIGKILL" and p["graceful"] is False
    wait_for(lambda: pid_gone(child), what="descendant killed")
