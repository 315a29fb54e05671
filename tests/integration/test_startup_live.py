"""What a real exec'd host has imported once its agent runs and it answered a ping:
none of the modules it only needs later (tests/unit/test_startup_imports.py checks
the import graph; this checks what the running process did, e.g. in a signal handler:
reaping its first child, the probe of ``setpriv``, imported psutil before the agent
started)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import HostFactory
from hosttools import HostProc, wait_for


@pytest.fixture
def start_by() -> str:
    return "exec"  # a forked host has its imports from the factory, not from its start


def imported(host: HostProc) -> set[str]:
    """The modules the host imported so far (its ``-X importtime`` lines, on stderr)."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", host.log(), re.M))


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
    loaded = imported(host)
    assert "agenthost.host.host" in loaded  # the report is there: the check can fail
    later = {"psutil", "pydantic", "agenthost.models", "importlib.metadata"}
    assert sorted(later & loaded) == []
