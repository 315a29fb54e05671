"""The entry points own the signals: run in this process, a host and the daemon obey
SIGTERM through the handlers their entry point installed, and once they have ended
every handler is back to what it was (no service sets one of its own)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from agenthost.daemon.files import daemon_socket_path
from agenthost.daemon.run import serve_daemon
from agenthost.daemon.service import Daemon, DaemonConfig
from agenthost.host.host import Host, HostConfig
from agenthost.host.run import run_host, serve_host
from agenthost.models import AgentState
from agenthost.paths import socket_path

from hosttools import wait_until as until

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP, signal.SIGPIPE)


def ours(signum: int, frame: FrameType | None) -> None:
    """The handler this test process had before (never called)."""


@pytest.fixture
def handlers() -> Iterator[None]:
    """Our own handler for every signal a service cares about, restored afterwards."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, ours)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def assert_ours() -> None:
    assert {sig.name: signal.getsignal(sig) for sig in SIGNALS} == {
        sig.name: ours for sig in SIGNALS
    }


def test_a_host_run_to_its_end_leaves_the_handlers_it_found(home: Path, handlers: None) -> None:
    # the agent exits at once and the host does not linger: run_host returns by itself
    config = HostConfig("e1", home, agent="lines", command=("true",), linger=0, journal=None)
    try:
        run_host(config)
    finally:
        gc.unfreeze()  # run_host froze this test process's objects
    assert not socket_path(home, "e1").exists()
    assert_ours()


@pytest.mark.asyncio
async def test_sigterm_stops_an_in_process_host_then_its_handlers_go(
    home: Path, handlers: None
) -> None:
    host = Host(HostConfig("e2", home, agent="lines", command=("cat",), journal=None))
    served = asyncio.create_task(serve_host(host))
    await until(lambda: host.process.running and host.socket_path.exists(), "the agent")
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(served, 30)
    assert host.exit is not None and host.exit.stop_requested
    assert host.stream.state is AgentState.DONE
    assert not host.socket_path.exists()
    assert_ours()


@pytest.mark.asyncio
async def test_sigterm_stops_an_in_process_daemon_then_its_handlers_go(
    home: Path, handlers: None
) -> None:
    daemon = Daemon(DaemonConfig(home, scan_interval=0, host_scope="session"))
    served = asyncio.create_task(serve_daemon(daemon))
    await until(lambda: daemon_socket_path(home).exists(), "the daemon's socket")
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(served, 30)
    assert not daemon_socket_path(home).exists()
    assert_ours()
