"""What a real exec'd host has imported once its agent runs and it answered a ping,
and a restarted daemon once it is ready: none of the modules they only need later
(tests/unit/test_startup_imports.py checks the import graph; this checks what the
running process did, e.g. in a signal handler: reaping its first child, the probe of
``setpriv``, imported psutil before the agent started)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from conftest import HostFactory
from daemontools import DaemonWorld
from hosttools import wait_for


@pytest.fixture
def start_by() -> str:
    return "exec"  # a forked host has its imports from the factory, not from its start


def imported(log: str) -> set[str]:
    """The modules a process imported so far (its ``-X importtime`` lines, on stderr)."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", log, re.M))


def test_a_started_host_has_not_imported_what_it_needs_later(
    host_factory: HostFactory, home: Path
) -> None:
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        command=["sleep", "infinity"],
        env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    # its log, not a request: host.status would load the models
    wait_for(lambda: '"agent.spawned"' in host.log(), what="the agent spawned")
    with host.raw() as conn:
        assert conn.request("host.ping")["success"]
    loaded = imported(host.log())
    assert "agenthost.host.host" in loaded  # the report is there: the check can fail
    later = {"psutil", "pydantic", "agenthost.models", "importlib.metadata", "secrets"}
    assert sorted(later & loaded) == []


def test_a_restarted_daemon_is_ready_without_the_configuration_or_the_channels(
    world: DaemonWorld,
) -> None:
    """It reattaches a live host whose events it had all seen without them: the
    configuration's models and the notification channels wait for an event to judge
    (a replayed state change reads the configuration), a notice or a request that
    needs them."""
    world.env["PYTHONPROFILEIMPORTTIME"] = "1"
    # no factory: its imports would be in the daemon's log
    args = ("--scan-interval", "0", "--flush-interval", "0.05", "--no-host-factory")
    daemon = world.start_daemon(*args)
    world.spawn("d1", ["sleep", "infinity"])
    # its state event "running" seen and recorded: the next daemon replays nothing
    wait_for(lambda: world.registry("SELECT last_offset FROM agents") == [(1,)], what="flush")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    daemon = world.start_daemon(*args)
    # what it imported up to its "daemon.ready" line (logged once READY=1 was sent)
    log = wait_for(lambda: daemon.log().partition('"daemon.ready"')[1] and daemon.log())
    loaded = imported(log.partition('"daemon.ready"')[0])
    assert list(world.ping()["reconcile"]["reattached"]) == ["d1"]
    assert "agenthost.daemon.service" in loaded  # the report is there: the check can fail
    later = {"agenthost.config", "agenthost.attention.channels", "tomllib"}
    assert sorted(later & loaded) == []
