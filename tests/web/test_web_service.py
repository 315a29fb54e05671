"""``agenthost web`` as a systemd user service: the unit file, and the READY=1 it
sends once it accepts connections."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from agenthost.launch import ReadyListener
from agenthost.web.tokens import TokenStore

from hosttools import DEADLINE, PY

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "agenthost-web.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_web_unit_verifies(tmp_path: Path) -> None:
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text())
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert UNIT.name not in result.stderr, result.stderr


def test_the_web_unit_is_notify_and_keeps_stdout_out_of_the_journal() -> None:
    text = UNIT.read_text()
    assert "Type=notify" in text
    assert "ExecStart=/usr/bin/env agenthost web $AGENTHOST_WEB_ARGS" in text
    assert "\nStandardOutput=null\n" in text  # a first start's token never in the journal


def test_the_gateway_says_ready_to_systemd_once_it_serves(home: Path) -> None:
    token = TokenStore(home).add("svc", ["read"])
    with ReadyListener() as listener:
        env = {**os.environ, "NOTIFY_SOCKET": listener.address}
        argv = [PY, "-m", "agenthost", "web", "--listen", "127.0.0.1:0", "--home", str(home)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        try:
            listener.wait(proc, DEADLINE)  # type: ignore[arg-type]
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()  # printed before READY=1: no wait
            assert line.startswith("listening on http://127.0.0.1:")
            url = line.split()[-1]
            me = httpx.get(url + "api/me", headers={"Authorization": f"Bearer {token}"})
            assert me.status_code == 200
        finally:
            proc.terminate()
            assert proc.wait(DEADLINE) == 0
            if proc.stdout is not None:
                proc.stdout.close()
