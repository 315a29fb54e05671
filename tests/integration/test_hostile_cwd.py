"""A working directory with an ``agenthost/`` package of its own (any clone of a
repository that has one): none of our processes may import it.

``python -m`` puts the directory a process starts in first on its import path. Every
process agenthost starts of its own code runs in a directory it does not choose: a
host started by ``serve --detach`` where the user typed the command, a host the daemon
starts (forked from its factory or exec'd) and the demo agent in the agent's directory,
the daemon in its home, an exec'd host factory in the daemon's. So each starts with
``python -P`` (agenthost/pyargv.py). The CLI runs here as a user runs it, its console
script (whose ``sys.path[0]`` is its bin directory), in the planted directory too.

The planted package writes a marker file when it is imported; each test asserts that
the marker never appears and that the real thing works (a demo agent answers a turn).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.hostfactory.handle import Factory
from agenthost.hostfactory.messages import Order
from agenthost.hostoptions import HostOptions
from agenthost.paths import socket_path

from conftest import HostFactory
from daemontools import DaemonWorld, daemon_world
from hosttools import DEADLINE, HEAD, RawConn, wait_until

AGENTHOST = str(Path(sys.executable).with_name("agenthost"))
"""The console script, as the user runs it."""

QUESTION = "count these four words"
ANSWER = 'You said "count these four words". That is 4 words.'


class Planted:
    """A directory holding a package named ``agenthost`` that leaves a marker when it is
    imported (``agenthost/__init__.py``, ``agenthost/__main__.py``)."""

    def __init__(self, directory: Path, marker: Path) -> None:
        self.dir = directory
        self.marker = marker
        package = directory / "agenthost"
        package.mkdir()
        for name in ("__init__.py", "__main__.py"):
            (package / name).write_text(
                f"with open({str(marker)!r}, 'a') as fh:\n"
                f"    fh.write(f'{{__name__}} imported from {{__file__}}\\n')\n"
            )

    def imported(self) -> str:
        """What the marker says ("" while the planted package was never imported)."""
        return self.marker.read_text() if self.marker.exists() else ""


@pytest.fixture
def planted(tmp_path: Path) -> Planted:
    """A planted ``agenthost`` package in a directory of its own."""
    directory = tmp_path / "project"
    directory.mkdir()
    return Planted(directory, tmp_path / "imported")


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as w:
        yield w


@pytest.fixture(params=["exec", "fork"])
def start_by(request: pytest.FixtureRequest) -> str:
    """Hosts of ``host_factory`` both exec'd and forked from a host factory."""
    return str(request.param)


def cli_in(world: DaemonWorld, cwd: Path, *args: str) -> str:
    """Run the ``agenthost`` console script in ``cwd`` under the world's reaper (what it
    starts in the background is the reaper's); its output. It must succeed."""
    out = world.home / f"cli-{secrets.token_hex(4)}.out"
    env = {**world.env, "AGENTHOST_DEMO_PACE": "0"}
    pid = world.reaper.spawn(["env", "-C", str(cwd), AGENTHOST, *args], env, out)
    status = world.reaper.wait_exit(pid, DEADLINE * 2)
    text = out.read_text()
    assert status == 0, text
    return text


def answers_a_turn(path: Path) -> None:
    """The agent behind ``path`` (a demo agent) answers a turn."""
    with RawConn(path, timeout=DEADLINE) as conn:
        conn.request("host.attach", {"offset": HEAD})
        conn.request("host.send", {"input": QUESTION})

        def answer(frame: dict[str, Any]) -> bool:
            entry = frame.get("chat_entry") or {}
            return entry.get("role") == "assistant" and entry.get("content") == ANSWER

        conn.read_until(answer)


def agent_cwd(path: Path) -> str:
    """The working directory of the agent behind ``path``."""
    with RawConn(path, timeout=DEADLINE) as conn:
        pid = conn.request("host.status")["payload"]["agent"]["pid"]
    return os.readlink(f"/proc/{pid}/cwd")


def test_serve_detach(world: DaemonWorld, planted: Planted) -> None:
    cli_in(world, planted.dir, "serve", "--detach", "--agent-id", "s1", "--agent", "demo")
    sock = socket_path(world.home, "s1")
    assert agent_cwd(sock) == str(planted.dir)
    answers_a_turn(sock)
    assert planted.imported() == ""


@pytest.mark.parametrize("hosts", ["forked", "execd"])
def test_run(world: DaemonWorld, planted: Planted, hosts: str) -> None:
    # the daemon runs in its home: a package planted there must not be imported either
    Planted(world.home, planted.marker)
    if hosts == "execd":
        world.start_daemon("--no-host-factory")
    # else `run` starts the daemon (agenthost.daemon.client.start_daemon), whose host
    # factory forks the host
    cli_in(world, planted.dir, "run", "--agent-id", "r1", "--agent", "demo")
    sock = socket_path(world.home, "r1")
    assert agent_cwd(sock) == str(planted.dir)
    answers_a_turn(sock)
    assert planted.imported() == ""


def test_the_demo_agent(host_factory: HostFactory, planted: Planted) -> None:
    host = host_factory("d1", "--agent", "demo", "--cwd", str(planted.dir))
    assert agent_cwd(host.socket_path) == str(planted.dir)
    answers_a_turn(host.socket_path)
    assert planted.imported() == ""


@pytest.mark.asyncio
async def test_an_execd_host_factory(
    home: Path, planted: Planted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what the daemon execs when its factory is gone; it runs where the daemon runs
    monkeypatch.chdir(planted.dir)
    factory = Factory.exec_new()
    factory.attach()
    options = HostOptions(agent_id="f1", home=home, agent="demo", cwd=planted.dir)
    env = {**os.environ, "AGENTHOST_DEMO_PACE": "0"}
    env.pop("NOTIFY_SOCKET", None)
    order = Order(tuple(options.to_argv()), env, str(planted.dir), str(home / "f1.log"), "f1")
    try:
        pid, _ = await factory.start_host(order)
        try:
            sock = socket_path(home, "f1")
            await wait_until(sock.exists, what="the forked host's socket")
            await asyncio.to_thread(answers_a_turn, sock)
        finally:
            os.kill(pid, signal.SIGKILL)  # (its watchdog ends the agent)
    finally:
        factory.close()
    assert planted.imported() == ""


def test_the_console_script_leaves_its_cwd_off_the_path(planted: Planted) -> None:
    # what a user types: the script's sys.path[0] is its bin directory, not the cwd
    out = subprocess.run(
        [AGENTHOST, "--version"], cwd=planted.dir, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert planted.imported() == ""
