"""Upgrades, measured: hosts, clients and daemons of different protocol versions.

The older side is real: the last commit of this repository that spoke protocol 1.0
(``OLD_COMMIT``, before the 1.1 messages were added) is extracted from git and run as a
host (and as a client) next to the current code, on real sockets. Another major version
does not exist yet, so a host speaking 2.0 is played by a thread that answers on a real
socket the way such a host would (``FutureHost``). Extends
``test_older_hosts_are_reported_and_incompatible_ones_left_alone`` (a fake 1.0 host that
streams nothing) and ``test_unknown_fields_are_ignored_and_minor_versions_served``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from agenthost.client import Client
from agenthost.errors import UnknownType, VersionUnsupported
from agenthost.lockfile import HostLock
from agenthost.protocol import MIN_PROTOCOL_VERSION, PROTOCOL_VERSION

from daemontools import StreamCollector, daemon_world
from hosttools import PY, HostProc, RawConn, kill_tree, lines_agent, start_host, wait_for

HostFactory = Callable[..., HostProc]
Figure = Callable[..., None]

OLD_COMMIT = "19fc42fcf8f702f491a890d72d7c2e11d204832c"
"""The last commit whose package speaks protocol 1.0 (the next one added 1.1)."""
REPO = Path(__file__).resolve().parents[2]
ECHO = lines_agent(
    "import sys\nfor line in sys.stdin:\n    print(line.rstrip('\\n'), flush=True)\n"
)


@pytest.fixture(scope="module")
def old_package() -> Iterator[Path]:
    """A directory holding the ``agenthost`` package of ``OLD_COMMIT``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", OLD_COMMIT, "agenthost"],
        capture_output=True,
        timeout=60,
    )
    if archive.returncode != 0:
        pytest.skip(f"the protocol 1.0 commit is not in this clone: {archive.stderr[-200:]!r}")
    root = Path(tempfile.mkdtemp(prefix="ah-old-", dir="/tmp"))
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    assert 'PROTOCOL_VERSION: Final = "1.0"' in (root / "agenthost" / "protocol.py").read_text()
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def old(package: Path) -> list[str]:
    """A wrapper that runs ``python -m agenthost`` from the old package (its directory
    first on sys.path, so the current tree is not imported)."""
    return ["env", "-C", str(package), f"PYTHONPATH={package}"]


@pytest.fixture
def old_hosts(old_package: Path) -> Iterator[Callable[..., HostProc]]:
    """``start(home, agent_id, command)``: a protocol 1.0 host (killed at teardown)."""
    started: list[HostProc] = []

    def start(home: Path, agent_id: str, command: Sequence[str] = ECHO) -> HostProc:
        host = start_host(
            home, agent_id, "--agent", "lines", command=command, wrapper=old(old_package)
        )
        started.append(host)
        return host

    yield start
    for host in started:
        kill_tree(host.proc)


def old_cli(package: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*old(package), PY, "-m", "agenthost", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "agenthost", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


# --- an older host, a newer client or daemon -------------------------------------------


def test_newer_client_and_cli_use_an_older_host(
    home: Path, old_hosts: Callable[..., HostProc]
) -> None:
    """A 1.1 client (which sends ``protocol_version: "1.1"`` on every request) and the CLI
    drive a real 1.0 host: ping, status, attach, send, history, list, stop. A 1.1-only
    request gets ``unknown_type``, a clear typed error, and the connection goes on."""
    host = old_hosts(home, "old")
    with Client("old", home=home) as client:
        ping = client.ping()
        assert (ping.protocol_version, ping.min_protocol_version) == ("1.0", "1.0")
        assert client.status().host.protocol_version == "1.0"
        client.attach(0)
        offset = client.send("hello old host").offset
        events = [client.recv_event(timeout=30) for _ in range(3)]
        assert [e.offset for e in events] == [1, 2, 3] and offset == 2
        assert events[-1].data == "hello old host"
        with pytest.raises(UnknownType, match="host.interrupt"):
            client.interrupt()
        assert client.history().entries[-1].content == "hello old host"
    status = cli(home, "status", "old", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["host"]["protocol_version"] == "1.0"
    assert cli(home, "send", "old", "again").returncode == 0
    assert "again" in cli(home, "history", "old").stdout
    listed = json.loads(cli(home, "list", "--json").stdout)
    assert [h["agent"]["id"] for h in listed] == ["old"]
    interrupt = cli(home, "interrupt", "old")
    assert interrupt.returncode == 5 and "unknown message type" in interrupt.stderr
    assert cli(home, "stop", "old").returncode == 0
    assert host.wait_exit() == 0


def test_daemon_adopts_and_follows_older_hosts(
    home: Path, old_hosts: Callable[..., HostProc]
) -> None:
    """A 1.1 daemon with real 1.0 hosts: one running before it starts (adopted by the
    start-up reconcile, reported as older), one started while it runs (adopted by a
    rescan). It follows both streams into ``daemon.watch`` in order, records their
    positions, lists them as older, and stops one through ``daemon.stop``."""
    (home / "hosts").mkdir(mode=0o700)
    first = old_hosts(home, "old1")
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0.2", "--flush-interval", "0.05")
        report = world.ping()["reconcile"]
        assert report["adopted"] == ["old1"]
        assert report["older"] == [
            {"agent_id": "old1", "version": "0.1.0", "protocol_version": "1.0"}
        ]
        second = old_hosts(home, "old2")
        watch = StreamCollector(world)
        try:
            wait_for(lambda: "old2" in world.agents(), what="old2 adopted by a rescan")
            for host in (first, second):
                with host.raw() as conn:
                    for i in range(20):
                        assert conn.request("host.send", {"input": f"line {i}"})["success"]
            for agent_id in ("old1", "old2"):
                watch.wait(lambda w, a=agent_id: w.saw(a, "line 19"), what=f"{agent_id} followed")
                offsets = watch.offsets(agent_id)
                assert offsets == list(range(1, len(offsets) + 1))
                listed = world.agents()[agent_id]
                assert listed["older_version"] is True and listed["managed"] is False
                assert listed["host_protocol_version"] == "1.0"
                last = offsets[-1]
                wait_for(
                    lambda a=agent_id, last=last: (
                        world.registry("SELECT last_offset FROM agents WHERE agent_id = ?", a)
                        == [(last,)]
                    ),
                    what="position recorded",
                )
        finally:
            watch.close()
        stopped = world.request("daemon.stop", {"agent_id": "old1", "timeout": 5})
        assert stopped["stopped"] and stopped["signal"] == "SIGTERM"
        assert first.wait_exit() == 0
        assert world.agents()["old1"]["status"] == "stopped"
        assert world.agents()["old2"]["status"] == "running"


def test_older_cli_uses_a_newer_host(home: Path, old_package: Path) -> None:
    """The other way round: the 1.0 CLI (sending ``protocol_version: "1.0"``) against a
    1.1 host, whose answers carry fields and events it has never heard of."""
    host = start_host(home, "new", "--agent", "lines", command=ECHO)
    try:
        status = old_cli(old_package, home, "status", "new", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["host"]["protocol_version"] == PROTOCOL_VERSION
        assert old_cli(old_package, home, "send", "new", "from the past").returncode == 0
        history = old_cli(old_package, home, "history", "new")
        assert history.returncode == 0 and "from the past" in history.stdout
        stop = old_cli(old_package, home, "stop", "new")
        assert stop.returncode == 0, stop.stderr
        assert host.wait_exit() == 0
    finally:
        kill_tree(host.proc)


# --- another major version -------------------------------------------------------------


def test_requests_of_another_major_are_refused(
    home: Path, host_factory: HostFactory, old_hosts: Callable[..., HostProc]
) -> None:
    """``protocol_version`` 2.0 (or below the minimum, 0.9) gets ``version_unsupported``
    from a 1.1 host, a real 1.0 host, and the daemon, and the connection stays usable.
    (A field named ``v`` is not the version field: like every unknown envelope field it
    is ignored, and the request is served.)"""
    new = host_factory("new", "--agent", "lines", command=ECHO)
    older = old_hosts(home, "old")
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        targets = {
            "host 1.1": (new.socket_path, "host.ping"),
            "host 1.0": (older.socket_path, "host.ping"),
            "daemon": (world.socket_path, "daemon.ping"),
        }
        for name, (path, ping) in targets.items():
            with RawConn(path) as conn:
                for version in ("2.0", "0.9", "10.0"):
                    response = conn.request(ping, protocol_version=version)
                    assert response["success"] is False, (name, version, response)
                    assert response["code"] == "version_unsupported", (name, version)
                    assert f"protocol version {version} is not supported" in response["error"]
                assert conn.request(ping, v="2.0")["success"], name
                assert conn.request(ping, protocol_version="1.99")["success"], name
                assert conn.request(ping)["success"], name


class FutureHost:
    """A host of another version, played by a thread on a real socket: it holds the
    agent's lock and answers ``ping``/``status``/``attach`` (then streams ``events``)
    as a host speaking ``protocol`` (minimum ``minimum``) would."""

    def __init__(
        self, home: Path, agent_id: str, protocol: str, minimum: str, events: int = 0
    ) -> None:
        (home / "hosts").mkdir(mode=0o700, exist_ok=True)
        self.lock = HostLock(home / "hosts" / f"{agent_id}.lock")
        self.lock.acquire()
        # no pid: the lock would name the test process, which teardown kills by pid
        self.lock.write_info({"agent_id": agent_id})
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(home / "hosts" / f"{agent_id}.sock"))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        now = "2030-01-01T00:00:00.000000Z"
        self.events = [
            {
                "kind": "event",
                "type": "output",
                "agent_id": agent_id,
                "offset": n,
                "timestamp": now,
                "data": f"future {n}",
                "stream": "stdout",
                "hologram": {"new": "field"},
            }
            for n in range(1, events + 1)
        ]
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {
            "host.ping": {
                "version": "9.0.0",
                "protocol_version": protocol,
                "min_protocol_version": minimum,
                "uptime": "1s",
                "uptime_seconds": 1.0,
                "started_at": now,
            },
            "host.status": {
                "host": {
                    "pid": os.getpid(),
                    "version": "9.0.0",
                    "protocol_version": protocol,
                    "started_at": now,
                    "socket_path": "x",
                },
                "agent": {"id": agent_id, "state": "running", "started_at": now},
            },
            "host.attach": {
                "agent_id": agent_id,
                "stream_offset": events,
                "oldest_offset": 1,
                "truncated": False,
                "epoch": "f" * 32,
            },
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
            with contextlib.suppress(OSError):
                conn.close()

    def answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError), conn.makefile("rwb") as io:
            for line in io:
                request = json.loads(line)
                self.requests.append(request)
                head = {"kind": "response", "type": request["type"], "id": request.get("id")}
                payload = self.answers.get(request["type"])
                if payload is None:
                    frame = {**head, "success": False, "code": "unknown_type", "error": "?"}
                else:
                    frame = {**head, "success": True, "payload": payload}
                io.write(json.dumps(frame).encode() + b"\n")
                if request["type"] == "host.attach":
                    for event in self.events:
                        io.write(json.dumps(event).encode() + b"\n")
                io.flush()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        self.lock.release()


@pytest.fixture
def future_hosts(home: Path) -> Iterator[Callable[..., FutureHost]]:
    made: list[FutureHost] = []

    def make(agent_id: str, protocol: str, minimum: str, events: int = 0) -> FutureHost:
        host = FutureHost(home, agent_id, protocol, minimum, events)
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


def test_a_host_of_another_major_is_refused_with_a_clear_error(
    home: Path, future_hosts: Callable[..., FutureHost]
) -> None:
    """A host answering protocol 2.0: the client refuses it on connect (a typed
    ``VersionUnsupported`` naming both versions), the CLI exits with status 5 and says
    so; a daemon that finds it while running marks it ``incompatible`` and never
    attaches. A 1.x host that requires a newer minimum than ours is refused the same
    way; a newer *minor* (1.9) is used, its unknown fields and events ignored."""
    future_hosts("fut", "2.0", "2.0")
    with pytest.raises(VersionUnsupported, match=r"protocol version 2\.0 is not supported"):
        Client("fut", home=home).connect()
    status = cli(home, "status", "fut")
    assert status.returncode == 5
    assert "protocol version 2.0 is not supported" in status.stderr, status.stderr

    above = f"1.{int(PROTOCOL_VERSION.split('.')[1]) + 1}"  # the minor after ours
    future_hosts("picky", "1.9", above)
    with pytest.raises(VersionUnsupported, match=rf"requires protocol >= {re.escape(above)}"):
        Client("picky", home=home).connect()

    minor = future_hosts("minor", "1.9", MIN_PROTOCOL_VERSION, events=3)
    with Client("minor", home=home) as client:
        assert client.status().host.protocol_version == "1.9"
        client.attach(0)
        assert [client.recv_event(timeout=10).data for _ in range(3)] == [
            "future 1",
            "future 2",
            "future 3",
        ]
    assert {r.get("protocol_version") for r in minor.requests} == {PROTOCOL_VERSION}

    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0.2")
        report = world.ping()["reconcile"]
        assert sorted(report["incompatible"]) == ["fut"]  # picky speaks 1.9: it is ours
        late = future_hosts("late", "2.0", "2.0")
        wait_for(
            lambda: world.agents().get("late", {}).get("status") == "incompatible",
            what="the late 2.0 host marked incompatible",
        )
        assert [r["type"] for r in late.requests].count("host.attach") == 0
        agents = world.agents()
        assert agents["late"]["host_protocol_version"] == "2.0"
        assert agents["minor"]["status"] == "running" and agents["minor"]["older_version"] is False
