"""``agenthost bridge``, without ssh: its stdio joined to a local host's socket, garbage
in, stdin's end, the host's end, and the errors (exit statuses, nothing on stdout)."""

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


def test_stdin_end_ends_an_attached_bridge(
    home: Path, host_factory: HostFactory, open_bridge: OpenBridge
) -> None:
    host = host_factory("g2")
    bridge = open_bridge("g2")
    bridge.write(b'{"type": "host.attach", "id": "a", "payload": {"offset": 0}}\n')
    assert bridge.until("response", "host.attach")["success"] is True
    assert bridge.line()["kind"] == "event"  # the replay flows
    bridge.close_stdin()
    assert bridge.wait() == 0
    assert host.proc.poll() is None  # the agent keeps running


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
