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
