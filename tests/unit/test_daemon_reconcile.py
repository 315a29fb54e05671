"""agenthost.daemon.reconcile and .discovery: the plan (pure) and the on-disk checks
(real lock files and sockets in a temporary directory, no host processes)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agenthost._version import __version__
from agenthost.daemon.discovery import (
    HostProbe,
    ProbeKind,
    check_versions,
    end_from_log,
    is_stopped,
    package_older,
    probe,
    remove_stale,
    scan_hosts,
)
from agenthost.daemon.protocol import AgentStatus
from agenthost.daemon.reconcile import Step, candidates, plan
from agenthost.daemon.registry import AgentRecord
from agenthost.lockfile import HostLock
from agenthost.protocol import PROTOCOL_VERSION, AgentInfo, HostInfo, StatusResponse

from hosttools import wait_for

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def status(
    state: str = "running", protocol: str = PROTOCOL_VERSION, version: str = __version__
) -> StatusResponse:
    return StatusResponse(
        host=HostInfo(
            pid=10, version=version, protocol_version=protocol, started_at=NOW, socket_path="/x"
        ),
        agent=AgentInfo(id="a", state=state, started_at=NOW),
    )


def probed(kind: ProbeKind, st: StatusResponse | None = None) -> HostProbe:
    return HostProbe("a", kind, st if st is not None or kind is not ProbeKind.LIVE else status())


def rec(status_: str, host_pid: int = 0) -> AgentRecord:
    return AgentRecord("a", status_, host_pid=host_pid)


@pytest.mark.parametrize(
    ("record", "found", "step", "clean"),
    [
        (rec("running"), probed(ProbeKind.LIVE), Step.FOLLOW, False),
        (rec("lost"), probed(ProbeKind.LIVE), Step.FOLLOW, False),  # alive after all
        (None, probed(ProbeKind.LIVE), Step.ADOPT, False),
        (None, probed(ProbeKind.LIVE, status(protocol="2.0")), Step.INCOMPATIBLE, False),
        (rec("running"), probed(ProbeKind.UNREACHABLE), Step.FOLLOW, False),  # never lost
        (rec("running"), probed(ProbeKind.SOCKETLESS), Step.FOLLOW, False),
        (None, probed(ProbeKind.UNREACHABLE), Step.ADOPT, False),
        (rec("running"), probed(ProbeKind.STALE), Step.LOST, True),
        # an exit the daemon saw stays an exit: recorded already (host_pid 0), or its
        # lingering host ended while no daemon ran (its end still to record)
        (rec("exited"), probed(ProbeKind.GONE), Step.NOTHING, False),
        (rec("exited", host_pid=7), probed(ProbeKind.GONE), Step.ENDED, False),
        (rec("exited", host_pid=7), probed(ProbeKind.STALE), Step.ENDED, True),
        (rec("exited", host_pid=7), probed(ProbeKind.LIVE), Step.FOLLOW, False),
        (rec("spawning"), probed(ProbeKind.GONE), Step.LOST, False),
        (rec("restarting"), probed(ProbeKind.GONE), Step.RESTART, False),
        (rec("restarting"), probed(ProbeKind.STALE), Step.RESTART, True),
        (None, probed(ProbeKind.STALE), Step.NOTHING, True),
        (rec("stopped"), probed(ProbeKind.STALE), Step.NOTHING, True),
        (rec("stopped"), None, Step.NOTHING, False),
    ],
)
def test_plan(record: AgentRecord | None, found: HostProbe | None, step: Step, clean: bool) -> None:
    records = {"a": record} if record else {}
    probes = {"a": found} if found else {}
    (planned,) = plan(records, probes)
    assert (planned.agent_id, planned.step, planned.clean) == ("a", step, clean)


def test_candidates_and_scan(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    for name in ("x.sock", "y.lock", "z.log", ".hidden.sock", "bad id.sock", "nosuffix"):
        (hosts / name).touch()
    assert scan_hosts(tmp_path) == {"x", "y"}
    records = {
        "r": AgentRecord("r", AgentStatus.RUNNING),
        "s": AgentRecord("s", AgentStatus.STOPPED),
        "t": AgentRecord("t", AgentStatus.RESTARTING),
        "u": AgentRecord("u", AgentStatus.LOST),
    }
    assert candidates(tmp_path, records) == {"x", "y", "r", "t"}
    assert scan_hosts(tmp_path / "nowhere") == set()


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "hosts").mkdir(mode=0o700)
    yield tmp_path


def listen(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.fspath(path))
    sock.listen(1)
    return sock


def dead_socket(path: Path) -> None:
    listen(path).close()  # the file stays, nobody listens


@pytest.mark.asyncio
async def test_probe_and_stale_cleanup(hosts: Path) -> None:
    home = hosts
    sock = home / "hosts" / "a.sock"
    lock = home / "hosts" / "a.lock"
    assert (await probe(home, "a", 0.2)).kind is ProbeKind.GONE

    dead_socket(sock)
    lock.write_text(json.dumps({"pid": 1}))  # a dead host's leftovers
    assert (await probe(home, "a", 0.2)).kind is ProbeKind.STALE
    assert remove_stale(home, "a")
    assert not sock.exists() and not lock.exists()

    # a held lock: alive; without a socket file: socketless; never cleaned
    held = HostLock(lock)
    held.acquire()
    try:
        held.write_info({"pid": os.getpid()})
        found = await probe(home, "a", 0.2)
        assert found.kind is ProbeKind.SOCKETLESS and found.host_pid == os.getpid()
        dead_socket(sock)
        assert not remove_stale(home, "a") and sock.exists()
        # alive, socket there, nobody answers the probe in time
        sock.unlink()
        with listen(sock):
            found = await probe(home, "a", 0.2)
            assert found.kind is ProbeKind.UNREACHABLE and found.error
    finally:
        held.release()


# holds the lock of agent "a" as a host would, named like one (`agenthost serve a`)
FAKE_HOST = """
import os, sys
from agenthost.lockfile import HostLock
lock = HostLock(sys.argv[1]); lock.acquire(); lock.write_info({"pid": os.getpid()})
print("ok", flush=True); sys.stdin.read()
"""


@pytest.fixture
def fake_host(hosts: Path) -> Iterator[subprocess.Popen[bytes]]:
    lock = hosts / "hosts" / "a.lock"
    argv = [sys.executable, "-c", FAKE_HOST, str(lock), "agenthost", "serve", "a"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
            yield proc
        finally:
            proc.kill()
    assert not is_stopped(proc.pid, "a") and not is_stopped(0, "a")  # gone; no pid


@pytest.mark.asyncio
async def test_a_stopped_host_is_unreachable_without_waiting(
    hosts: Path, fake_host: subprocess.Popen[bytes]
) -> None:
    pid = fake_host.pid
    with listen(hosts / "hosts" / "a.sock"):  # the socket accepts, nobody answers
        assert not is_stopped(pid, "a")
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: is_stopped(pid, "a"), what="the signal delivered")
        assert not is_stopped(pid, "b")  # somebody else's host, or a reused pid
        started = time.monotonic()
        found = await probe(hosts, "a", 30.0)
        assert time.monotonic() - started < 10  # not the probe's 30 s
        assert found.kind is ProbeKind.UNREACHABLE and found.host_pid == pid
        assert found.error is not None and "stopped" in found.error


def test_a_listening_socket_without_lock_is_never_removed(hosts: Path) -> None:
    sock = hosts / "hosts" / "a.sock"
    with listen(sock):  # e.g. a live host whose lock file a cleanup job deleted
        assert not remove_stale(hosts, "a") and sock.exists()
    assert remove_stale(hosts, "a") and not sock.exists()


def test_versions() -> None:
    assert check_versions(status()).older is False
    assert check_versions(status()).compatible is True
    older = check_versions(status(protocol="1.0"))
    assert older.older and older.compatible
    assert check_versions(status(version="0.0.1")).older
    assert not check_versions(status(protocol="2.0")).compatible
    assert not check_versions(status(protocol="x")).compatible
    assert package_older("0.1.0", "0.2.0") and package_older("0.9", "0.10")
    assert not package_older("0.2.0", "0.1.0") and not package_older("0.1.0", "0.1.0")
    assert not package_older("dev", "0.1.0") and not package_older("1.0+local", "1.0")


def test_end_from_log(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    assert end_from_log(log) is None
    lines = [
        {"event": "host.started"},
        {"event": "agent.exited", "exit_code": 3, "signal": None},
        {"event": "host.started"},
        {"event": "agent.spawned"},
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert end_from_log(log) is None  # the latest run's end was not logged
    with log.open("a") as fh:
        fh.write(json.dumps({"event": "agent.exited", "exit_code": -9, "signal": "SIGKILL"}) + "\n")
    assert end_from_log(log) == {"exit_code": -9, "signal": "SIGKILL"}
