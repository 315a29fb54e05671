"""``agenthost bridge``, without ssh: its stdio joined to a local host's socket, garbage
in, stdin's end (requests piped in are answered; an attach streams on), the host's end,
the reader of its stdout gone, and the errors (exit statuses, nothing on stdout)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import HostFactory
from daemontools import DaemonWorld, daemon_world
from hosttools import DEADLINE

CLI = [sys.executable, "-m", "agenthost"]


class Bridge:
    """An ``agenthost bridge`` process with pipes on its stdin and stdout."""

    def __init__(self, home: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "bridge", *args, "--home", str(home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = b""

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def line(self) -> dict[str, Any]:
        """The next line of stdout, which must be a JSON object (the protocol)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + DEADLINE
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no line from the bridge in time"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                data = os.read(fd, 65536)
                assert data, f"the bridge's stdout ended: {self._buffer!r}"
                self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    def until(self, kind: str, mtype: str) -> dict[str, Any]:
        while True:
            obj = self.line()
            if obj.get("kind") == kind and obj.get("type") == mtype:
                return obj

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self) -> int:
        return self.proc.wait(timeout=DEADLINE)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


OpenBridge = Callable[[str], Bridge]

PING_AND_STATUS = b'{"type": "host.ping", "id": "p"}\n{"type": "host.status", "id": "s"}\n'


def piped(home: Path, *args: str, data: bytes) -> tuple[int, list[dict[str, Any]]]:
    """``printf DATA | agenthost bridge ARGS``: its exit status and the lines it printed
    (stdin ends once ``data`` is written)."""
    out = subprocess.run(
        [*CLI, "bridge", *args, "--home", str(home)],
        input=data,
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as w:
        yield w


@pytest.fixture
def open_bridge(home: Path) -> Iterator[OpenBridge]:
    """``open_bridge(ARG)`` runs ``agenthost bridge ARG`` on ``home``; each is killed at
    teardown."""
    started: list[Bridge] = []

    def start(arg: str) -> Bridge:
        started.append(Bridge(home, arg))
        return started[-1]

    yield start
    for bridge in started:
        bridge.kill()


def test_garbage_in_gets_the_hosts_errors(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge
) -> None:
    host_factory("g1")
    bridge = open_bridge("g1")
    bridge.write(b'garbage\n\xff\xfe\x00not utf-8\n[1, 2]\n{"type": 7}\n')
    codes = [bridge.line().get("code") for _ in range(4)]
    assert codes == ["bad_request"] * 4
    bridge.write(b'{"type": "host.ping", "id": "p1"}\n')
    pong = bridge.line()
    assert pong["id"] == "p1" and pong["success"] is True
    bridge.close_stdin()
    assert bridge.wait() == 0


def test_requests_piped_in_are_answered_after_stdin_ends(
    home: Path, host_factory: HostFactory
) -> None:
    # what a script does over ssh: printf '%s\n%s\n' "$PING" "$STATUS" | ssh HOST ...
    host_factory("g2", "--agent", "lines", command=["cat"])
    status, lines = piped(home, "g2", data=PING_AND_STATUS)
    assert status == 0
    assert [(m["id"], m["type"], m["success"]) for m in lines] == [
        ("p", "host.ping", True),
        ("s", "host.status", True),
    ]
    assert lines[1]["payload"]["agent"]["id"] == "g2"


def test_daemon_requests_piped_in_are_answered_after_stdin_ends(
    home: Path, world: DaemonWorld
) -> None:
    world.start_daemon()
    data = b'{"type": "daemon.ping", "id": 1}\n{"type": "daemon.list", "id": 2}\n'
    status, lines = piped(home, "--daemon", data=data)
    assert status == 0
    assert [(m["id"], m["type"], m["success"]) for m in lines] == [
        (1, "daemon.ping", True),
        (2, "daemon.list", True),
    ]
    assert lines[1]["payload"]["agents"] == []


def test_an_attach_piped_in_streams_on_after_stdin_ends(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge
) -> None:
    host = host_factory("g5", "--agent", "lines", command=["cat"])
    bridge = open_bridge("g5")
    bridge.write(b'{"type": "host.attach", "id": "a", "payload": {"offset": 0}}\n')
    bridge.close_stdin()
    assert bridge.until("response", "host.attach")["success"] is True
    # the stream goes on: what another client sends reaches the bridge's stdout
    with host.raw() as other:
        other.request("host.send", {"input": "after the end of stdin"})
    echo = bridge.until("event", "output")
    assert echo["data"] == "after the end of stdin"
    assert bridge.proc.poll() is None
    # until the host closes the connection (it exits)
    with host.raw() as other:
        other.request("host.stop", {"force": True})
    assert bridge.wait() == 0
    assert host.wait_exit() == 0


@pytest.mark.parametrize("stdin_open", [False, True], ids=["stdin-ended", "stdin-open"])
def test_the_end_of_its_stdout_ends_an_idle_attached_bridge(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge, stdin_open: bool
) -> None:
    # a dropped ssh link: nobody reads the bridge's stdout any more, and no event comes
    # that would fail to be written there
    host = host_factory("g6", "--agent", "lines", command=["cat"])
    bridge = open_bridge("g6")
    bridge.write(b'{"type": "host.attach", "id": "a"}\n')
    if not stdin_open:
        bridge.close_stdin()
    assert bridge.until("response", "host.attach")["success"] is True
    assert bridge.proc.stdout is not None
    bridge.proc.stdout.close()  # the reader goes
    assert bridge.wait() == 0
    with host.raw() as other:  # the agent keeps running
        assert other.request("host.status")["payload"]["agent"]["state"] == "running"


def test_the_hosts_end_ends_the_bridge(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge
) -> None:
    host_factory("g3")
    bridge = open_bridge("g3")
    bridge.write(b'{"type": "host.attach", "id": "a"}\n')
    bridge.until("response", "host.attach")
    bridge.write(b'{"type": "host.stop", "id": "s", "payload": {"force": true}}\n')
    assert bridge.until("response", "host.stop")["success"] is True
    assert bridge.wait() == 0  # the host exited and closed the connection


def test_no_host_is_exit_3_and_nothing_on_stdout(home: Path, open_bridge: OpenBridge) -> None:
    bridge = open_bridge("nobody")
    assert bridge.wait() == 3
    assert bridge.proc.stdout is not None and bridge.proc.stdout.read() == b""
    assert bridge.proc.stderr is not None
    assert b"agenthost: error: no host is running for agent 'nobody'" in bridge.proc.stderr.read()


def test_no_daemon_is_exit_3(home: Path, open_bridge: OpenBridge) -> None:
    bridge = open_bridge("--daemon")
    assert bridge.wait() == 3
    assert bridge.proc.stderr is not None
    assert b"no daemon answers on" in bridge.proc.stderr.read()


@pytest.mark.parametrize(
    "args",
    [[], ["a1", "--daemon"], ["a1", "--start"], ["../x"], ["a" * 300]],
)
def test_usage_errors(home: Path, args: list[str]) -> None:
    out = subprocess.run(
        [*CLI, "bridge", *args, "--home", str(home)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stdout == b""


def test_pipelined_requests_do_not_jam_the_bridge(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge
) -> None:
    # more requests than the pipes and the socket hold, written before any answer is
    # read: the host pauses reading until its answers drain, so a bridge that waited on
    # one direction would hold up the other for ever
    import threading

    host_factory("g4")
    bridge = open_bridge("g4")
    count = 20000
    lines = b"".join(b'{"type": "host.ping", "id": "p%d"}\n' % i for i in range(count))
    writer = threading.Thread(target=bridge.write, args=(lines,), daemon=True)
    writer.start()
    ids = [bridge.line()["id"] for _ in range(count)]
    assert ids == [f"p{i}" for i in range(count)]
    writer.join(DEADLINE)
    bridge.close_stdin()
    assert bridge.wait() == 0
