"""The host factory's guarantees (DESIGN.md section 9), with real processes.

A forked host is a host of its own (session, process group, descriptors, environment,
title), it outlives the factory and the daemon (kill -9 each), nothing of the daemon or
the factory leaks into it or its agent, and a factory that dies in the middle of an
order loses no agent. Its speed is measured in benchmarks/, not here. That forked hosts
keep every attach guarantee is tests/integration/test_attach.py, run on both kinds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agenthost.hostfactory.messages import Order, Refused, decode_reply

from conftest import HostFactory
from daemontools import DaemonProc, DaemonWorld, daemon_world, flood_command
from forkhosts import ExecdFactory
from hosttools import PY, RawConn, kill_tree, pid_gone, start_host, wait_for

# An agent that prints what it was given (environment, descriptors), then waits.
REPORT_AGENT = [
    PY,
    "-c",
    "import json, os, sys\n"
    "fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
    "print(json.dumps({'env': dict(os.environ), 'fds': fds}), flush=True)\n"
    "sys.stdin.read()\n",
]


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


@pytest.fixture
def own_factory() -> Iterator[ExecdFactory]:
    """A factory of this test's own (it may be killed), with a variable of its own."""
    factory = ExecdFactory(env={**os.environ, "AGENTHOST_TEST_FACTORY_ONLY": "1"})
    try:
        yield factory
    finally:
        with contextlib.suppress(OSError):
            factory.close()


def agent_report(socket_path: Path) -> dict[str, Any]:
    """What REPORT_AGENT printed, read from its host's stream."""
    with RawConn(socket_path) as conn:
        conn.send("host.attach", {"offset": 0})
        frame = conn.read_until(
            lambda f: f.get("type") == "output" and str(f.get("data")).startswith('{"env"')
        )
    report: dict[str, Any] = json.loads(frame["data"])
    return report


def open_objects(pid: int) -> dict[str, int]:
    """What ``pid``'s descriptors point to (``socket:[N]``, ``pipe:[N]``, paths) -> fd."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out[os.readlink(f"/proc/{pid}/fd/{fd}")] = int(fd)
    return out


def shared_objects(pid: int, other: int) -> set[str]:
    """Sockets and pipes open in both processes (anonymous inodes and files aside)."""
    ours = {k for k in open_objects(pid) if k.startswith(("socket:", "pipe:"))}
    return ours & set(open_objects(other))


def test_a_forked_host_is_a_process_of_its_own(own_factory: ExecdFactory, home: Path) -> None:
    host = start_host(home, "f1", "--agent", "lines", command=REPORT_AGENT, factory=own_factory)
    try:
        proc = psutil.Process(host.pid)
        # the factory reaps it: re-parented to the factory (a subreaper) by the double fork
        assert proc.ppid() == own_factory.pid
        # its own process group, in a session it does not lead (no controlling terminal
        # can ever be acquired), which is not the factory's
        assert os.getpgid(host.pid) == host.pid
        assert os.getsid(host.pid) not in (host.pid, os.getsid(own_factory.pid))
        # ps and discovery see the serve command line
        argv = proc.cmdline()
        assert "serve" in argv and "f1" in argv and any("agenthost" in a for a in argv)
        # nothing of the factory: not its socket pair, not its wake-up pipe
        assert shared_objects(host.pid, own_factory.pid) == set()
        # stdio: /dev/null in, its log out
        fds = {fd: os.readlink(f"/proc/{host.pid}/fd/{fd}") for fd in (0, 1, 2)}
        assert fds == {0: "/dev/null", 1: str(host.log_path), 2: str(host.log_path)}
        report = agent_report(host.socket_path)
        assert "AGENTHOST_TEST_FACTORY_ONLY" not in report["env"]
        assert "NOTIFY_SOCKET" not in report["env"]
        assert report["fds"] == [0, 1, 2, 3]  # 3: the directory listing /proc/self/fd
        assert host.status()["agent"]["state"] == "running"
    finally:
        kill_tree(host.proc)


@pytest.mark.parametrize("start_by", ["exec", "fork"])
def test_the_agent_gets_the_same_environment_either_way(
    host_factory: HostFactory, start_by: str
) -> None:
    host = host_factory(
        "env1",
        "--agent",
        "lines",
        "--env",
        "GIVEN=by-env",
        command=REPORT_AGENT,
        env={"AGENTHOST_TEST_MARK": "caller"},
    )
    report = agent_report(host.socket_path)
    env = report["env"]
    assert env["GIVEN"] == "by-env" and env["AGENTHOST_TEST_MARK"] == "caller"
    assert "NOTIFY_SOCKET" not in env and "AGENTHOST_AGENT_ENV" not in env
    assert report["fds"] == [0, 1, 2, 3]


def test_hosts_outlive_their_factory(own_factory: ExecdFactory, home: Path) -> None:
    host = start_host(home, "f2", "--agent", "lines", command=REPORT_AGENT, factory=own_factory)
    try:
        own_factory.proc.kill()
        own_factory.proc.wait(30)
        assert host.status()["agent"]["state"] == "running"
        assert wait_for(lambda: psutil.Process(host.pid).ppid() != own_factory.pid)
        assert host.status()["agent"]["state"] == "running"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(host.pid).children(recursive=True):
                child.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(host.pid, signal.SIGKILL)


GARBAGE = [
    b"not json",
    b"\xff\xfe",
    b"[]",
    b'"start"',
    b'{"order": "stop"}',
    b'{"order": "start"}',
    b'{"order": "start", "argv": "serve", "env": {}, "cwd": "/", "log": "/dev/null", "title": ""}',
    b'{"order": "start", "argv": [1], "env": {}, "cwd": "/", "log": "/dev/null", "title": ""}',
    b'{"order": "start", "argv": [], "env": {"A=B": "c"}, "cwd": "/", "log": "/l", "title": ""}',
    b'{"order": "start", "argv": [], "env": {"A": 1}, "cwd": "/", "log": "/l", "title": ""}',
    b'{"order": "start", "argv": [], "env": {}, "cwd": "/\\u0000", "log": "/l", "title": ""}',
    b'{"order": "start", "argv": [], "env": [], "cwd": "/", "log": "/l", "title": ""}',
]


def test_the_factory_refuses_garbage_and_goes_on(own_factory: ExecdFactory, home: Path) -> None:
    for data in GARBAGE:
        own_factory.sock.sendall(data)
        answer = decode_reply(own_factory.sock.recv(1 << 16))
        assert isinstance(answer, Refused), (data, answer)
    # an order it can carry out only partly: the host runs and fails, reported as exited
    bad_cwd = Order(("--agent-id", "x"), {}, str(home / "missing"), str(home / "x.log"), "t")
    pid = own_factory.start(bad_cwd)
    assert own_factory.poll_exit(pid, 30) == 70
    assert "missing" in (home / "x.log").read_text()
    # and after all that, a real host starts
    host = start_host(home, "f3", "--agent", "lines", command=REPORT_AGENT, factory=own_factory)
    try:
        assert host.status()["agent"]["state"] == "running"
    finally:
        kill_tree(host.proc)


# ---------------------------------------------------------------- through the daemon


def factory_of(daemon: DaemonProc) -> psutil.Process:
    """The daemon's host factory (its child titled so)."""

    def find() -> psutil.Process | None:
        for child in psutil.Process(daemon.pid).children():
            with contextlib.suppress(psutil.Error):
                if "host-factory" in " ".join(child.cmdline()):
                    return child
        return None

    found = wait_for(find, what="the daemon's host factory")
    assert found is not None
    return found


def serve_processes(home: Path, agent_id: str) -> list[psutil.Process]:
    """Live ``agenthost serve`` processes of ``agent_id`` in ``home``: only this test's
    (another test's host of the same name, left behind by a timeout, is not ours)."""
    out = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        argv = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        # a forked host's title is its whole command line, which psutil may hand back
        # as one string or split at its spaces: compare the words
        words = " ".join(argv).split()
        options = set(zip(words, words[1:], strict=False))
        if (
            "serve" in words
            and any("agenthost" in w for w in words)
            and ("--agent-id", agent_id) in options
            and ("--home", str(home)) in options
        ):
            out.append(proc)
    return out


def one_serve_process(home: Path, agent_id: str) -> list[psutil.Process] | None:
    """The host of ``agent_id`` once it is the only one left (else None)."""
    found = serve_processes(home, agent_id)
    return found if len(found) == 1 else None


def test_daemon_hosts_are_forked_and_outlive_factory_and_daemon(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    factory = factory_of(daemon)
    first = world.spawn("h1", flood_command("--count", "0", "--rate", "20"))
    assert psutil.Process(first["host_pid"]).ppid() == factory.pid

    factory.kill()  # kill -9: the host lives on; the daemon starts a new factory
    # (pid_gone: a zombie counts as gone, and one reaped between two reads too)
    wait_for(lambda: pid_gone(factory.pid), what="the factory dead")
    second = world.spawn("h2", flood_command("--count", "0", "--rate", "20"))
    replacement = factory_of(daemon)
    assert replacement.pid != factory.pid
    assert psutil.Process(second["host_pid"]).ppid() == replacement.pid
    assert world.agents()["h1"]["status"] == "running"
    with RawConn(world.home / "hosts" / "h1.sock") as conn:
        assert conn.request("host.ping")["success"]
    # a factory that dies again soon after is not restarted at every spawn: exec
    replacement.kill()
    wait_for(lambda: pid_gone(replacement.pid), what="the second factory gone")
    execd = world.spawn("h2b", flood_command("--count", "0", "--rate", "20"))
    assert psutil.Process(execd["host_pid"]).ppid() == daemon.pid

    daemon.signal(signal.SIGKILL)  # kill -9 the daemon: the hosts live on
    daemon.wait_exit()
    for agent_id in ("h1", "h2", "h2b"):
        with RawConn(world.home / "hosts" / f"{agent_id}.sock") as conn:
            assert conn.request("host.ping")["success"]
    again = world.start_daemon("--scan-interval", "0")
    assert sorted(world.ping()["reconcile"]["reattached"]) == ["h1", "h2", "h2b"]
    new_factory = factory_of(again)
    third = world.spawn("h3", flood_command("--count", "0", "--rate", "20"))
    assert psutil.Process(third["host_pid"]).ppid() == new_factory.pid


def test_the_factory_ends_with_its_daemon(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    factory = factory_of(daemon)
    world.spawn("h1", flood_command("--count", "0", "--rate", "20"))
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    wait_for(lambda: pid_gone(factory.pid), what="the factory gone with its daemon")
    with RawConn(world.home / "hosts" / "h1.sock") as conn:
        assert conn.request("host.ping")["success"]


def test_a_factory_killed_after_it_forked_loses_no_agent(world: DaemonWorld) -> None:
    # the factory forks the host, then dies before it answers: the daemon hears nothing
    world.env["AGENTHOST_FACTORY_FAILPOINT"] = "after-fork"
    world.start_daemon("--scan-interval", "0")
    spawned = world.spawn("h1", flood_command("--count", "0", "--rate", "20"))
    # two hosts raced for the lock (the forked one, an exec'd one); one is left
    live = wait_for(lambda: one_serve_process(world.home, "h1"), what="one host of h1")
    assert live[0].pid == spawned["host_pid"] == world.host_pids()["h1"]
    assert world.agents()["h1"]["status"] == "running"
    with RawConn(world.home / "hosts" / "h1.sock") as conn:
        assert conn.request("host.ping")["success"]
    # and the daemon goes on: the next spawn (by a new factory, or exec'd) works too
    second = world.spawn("h2", flood_command("--count", "0", "--rate", "20"))
    live = wait_for(lambda: one_serve_process(world.home, "h2"), what="one host of h2")
    assert live[0].pid == second["host_pid"]


def test_a_factory_killed_with_an_order_waiting_loses_no_agent(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    factory = factory_of(daemon)
    factory.suspend()  # the order waits in its socket
    result: dict[str, Any] = {}

    def spawn() -> None:
        result.update(world.spawn("h1", flood_command("--count", "0", "--rate", "20")))

    spawning = threading.Thread(target=spawn)
    spawning.start()
    wait_for(lambda: daemon.events("factory.order_sent"), what="the order sent")
    factory.kill()
    spawning.join(60)
    assert result["agent_id"] == "h1"
    assert [p.pid for p in serve_processes(world.home, "h1")] == [result["host_pid"]]
    assert psutil.Process(result["host_pid"]).ppid() == daemon.pid  # exec'd instead


@pytest.mark.parametrize("factory", ["--host-factory", "--no-host-factory"])
def test_nothing_of_the_daemon_leaks_into_a_host_or_its_agent(
    world: DaemonWorld, factory: str
) -> None:
    # what a service manager gives the daemon is the daemon's, not its hosts'
    world.env.update(
        {"JOURNAL_STREAM": "8:12345", "INVOCATION_ID": "0123abcd", "DAEMON_VISIBLE": "1"}
    )
    daemon = world.start_daemon("--scan-interval", "0", "--host-scope", "session", factory)
    spawned = world.spawn("h1", REPORT_AGENT, env={"GIVEN": "by-spec"})
    host = spawned["host_pid"]
    report = agent_report(world.home / "hosts" / "h1.sock")
    env = report["env"]
    assert env["GIVEN"] == "by-spec" and env["DAEMON_VISIBLE"] == "1"
    for private in ("JOURNAL_STREAM", "INVOCATION_ID", "NOTIFY_SOCKET", "AGENTHOST_AGENT_ENV"):
        assert private not in env
    assert report["fds"] == [0, 1, 2, 3]
    others = [daemon.pid] + [p.pid for p in psutil.Process(daemon.pid).children()]
    for other in others:
        if other != host:
            assert shared_objects(host, other) == set(), other
    opened = set(open_objects(host))
    for name in ("daemon.lock", "daemon.db", "daemon.sock", "daemon.db-wal"):
        assert str(world.home / name) not in opened


def test_a_stuck_factory_is_killed_and_the_host_execd(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--scan-interval", "0")
    factory = factory_of(daemon)
    factory.suspend()  # stopped, not dead: it never answers
    spawned = world.spawn("h1", flood_command("--count", "0", "--rate", "20"))
    assert psutil.Process(spawned["host_pid"]).ppid() == daemon.pid
    wait_for(lambda: pid_gone(factory.pid), what="the stuck factory killed")
    assert [p.pid for p in serve_processes(world.home, "h1")] == [spawned["host_pid"]]


def test_a_clean_ctrl_c_of_the_daemon_warns_of_nothing(world: DaemonWorld) -> None:
    # issue 28: the daemon closing its own factory was logged as `factory.gone`, a warning
    daemon = world.start_daemon("--scan-interval", "0")
    factory_of(daemon)
    os.killpg(daemon.pid, signal.SIGINT)  # what Ctrl-C sends: the terminal's whole group
    assert daemon.wait_exit() == 0
    levels = [
        json.loads(line)["level"] for line in daemon.log().splitlines() if line.startswith("{")
    ]
    assert "warning" not in levels and "error" not in levels, daemon.log()
    assert daemon.events("factory.closed") and not daemon.events("factory.gone")
