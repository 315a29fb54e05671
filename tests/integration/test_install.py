"""`make install`: the command on the user's PATH, byte-compiled, working on its own.

The README tells a new user to run `make install` to get `agenthost` on PATH; this runs
it for real into a scratch prefix (a virtualenv of its own, packages from the index or
pip's cache) and uses the installed command as the README does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hosttools import wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
]


def test_make_install_puts_a_compiled_working_command_on_path(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    made = subprocess.run(
        ["make", "-C", str(REPO), "install", f"PREFIX={prefix}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    command = prefix / "bin" / "agenthost"
    assert command.is_symlink() and os.access(command, os.X_OK)
    # PATH does not hold the prefix here, so the install says how to add it
    assert f'export PATH="{prefix}/bin:$PATH"' in made.stdout

    # a regular install: every module of the package has its byte code, written at
    # install time (a host start then compiles nothing, PYTHONDONTWRITEBYTECODE or not)
    site = next((prefix / "share" / "agenthost" / "venv" / "lib").glob("python3*/site-packages"))
    sources = sorted((site / "agenthost").rglob("*.py"))
    assert len(sources) > 40
    missing = [
        s for s in sources if not list((s.parent / "__pycache__").glob(f"{s.stem}.cpython-*.pyc"))
    ]
    assert missing == []
    # ... and it does not run from this checkout
    assert not (site / "_editable_impl_agenthost.pth").exists()

    # the README's commands, with the installed command found on PATH
    home = tmp_path / "home"
    user_env = {**env, "PATH": f"{prefix / 'bin'}:{env['PATH']}", "AGENTHOST_HOME": str(home)}
    user_env["AGENTHOST_DEMO_PACE"] = "0"

    def agenthost(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["agenthost", *args], capture_output=True, text=True, env=user_env, timeout=60
        )

    started = agenthost("serve", "--agent-id", "web", "--detach", "--json")
    assert started.returncode == 0, started.stderr
    try:
        listed = json.loads(agenthost("list", "--json").stdout)
        assert [h["agent_id"] for h in listed] == ["web"]
        assert agenthost("send", "web", "hello").returncode == 0
        wait_for(
            lambda: (
                json.loads(agenthost("status", "web", "--json").stdout)["agent"]["state"] == "idle"
            ),
            what="the demo's turn to end",
        )
        history = json.loads(agenthost("history", "web", "--json").stdout)
        assert any(e["role"] == "user" and e.get("content") == "hello" for e in history["entries"])
    finally:
        stopped = agenthost("stop", "web", "--json")
    assert stopped.returncode == 0, stopped.stderr
