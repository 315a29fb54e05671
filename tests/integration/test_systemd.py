"""The systemd unit files parse and reference a working command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[2] / "systemd"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_host_template_unit_verifies(tmp_path: Path) -> None:
    # verify an instance of the template (a template itself cannot be verified)
    instance = tmp_path / "agenthost-host@demo.service"
    instance.write_text((UNITS / "agenthost-host@.service").read_text())
    result = subprocess.run(
        ["systemd-analyze", "verify", str(instance)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "agenthost-host@demo.service" not in result.stderr, result.stderr


def test_host_template_is_notify_and_stops_the_host_first() -> None:
    text = (UNITS / "agenthost-host@.service").read_text()
    assert "Type=notify" in text  # the host sends READY=1 once its socket serves
    assert "KillMode=mixed" in text  # SIGTERM to the host, which stops its agent
    assert "serve --agent-id %i" in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_daemon_unit_verifies(tmp_path: Path) -> None:
    unit = tmp_path / "agenthost-daemon.service"
    unit.write_text((UNITS / "agenthost-daemon.service").read_text())
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "agenthost-daemon.service" not in result.stderr, result.stderr


def test_daemon_unit_is_notify_and_never_kills_hosts() -> None:
    text = (UNITS / "agenthost-daemon.service").read_text()
    assert "Type=notify" in text  # READY=1 after the start-up reconcile
    # a stop or restart of the unit signals the daemon alone, never the hosts
    assert "\nKillMode=process\n" in text
    assert "ExecStart=/usr/bin/env agenthost daemon" in text
