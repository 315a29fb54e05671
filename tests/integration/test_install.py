"""`make install`: the command on the user's PATH, byte-compiled, working on its own.

The README tells a new user to run `make install` to get `agenthost` on PATH; this runs
it for real into a scratch prefix (a virtualenv of its own, packages from the index or
pip's cache) and uses the installed command as the README does.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from agenthost.lockfile import is_lock_held, read_lock_info

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

    # the README's "Using it" commands as printed, with the installed command on PATH
    home = tmp_path / "home"
    user_env = {**env, "PATH": f"{prefix / 'bin'}:{env['PATH']}", "AGENTHOST_HOME": str(home)}
    user_env["AGENTHOST_DEMO_PACE"] = "0"

    def agenthost(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["agenthost", *args], capture_output=True, text=True, env=user_env, timeout=60
        )

    commands = readme_commands()
    assert [c[1] for c in commands][:2] == ["serve", "list"]
    served = commands[0]
    agent = served[served.index("--agent-id") + 1]  # the README's example agent
    try:
        for argv in commands:
            if argv[1] == "attach":
                argv = [*argv, "--no-follow"]  # the interactive session, without its terminal
            done = agenthost(*argv[1:])
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
            if argv[1] == "send":
                # the agent answered (a line of its own), and history has the message
                wait_for(
                    lambda: (
                        "got: run the tests" in agenthost("attach", agent, "--no-follow").stdout
                    ),
                    what="the agent's answer",
                )
                history = json.loads(agenthost("history", agent, "--json").stdout)
                assert [e["content"] for e in history["entries"]] == ["run the tests"]
        helper = json.loads(agenthost("status", "helper", "--json").stdout)
        assert helper["agent"]["backend"] == "demo"
        assert_installed_gateway_serves_the_page(user_env)
    finally:
        agenthost("stop", agent)
        agenthost("stop", "helper")
        stop_daemon(home)


def assert_installed_gateway_serves_the_page(env: dict[str, str]) -> None:
    """The page's static files ship in the package: the installed `agenthost web`
    serves them (and its API answers the token it printed)."""
    gateway = subprocess.Popen(
        ["agenthost", "web", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert gateway.stdout is not None
        lines = [gateway.stdout.readline(), gateway.stdout.readline()]
        assert lines[0].startswith("token admin: "), lines
        token = lines[0].split(": ", 1)[1].strip()
        url = next(line.split()[-1] for line in lines if line.startswith("listening on "))
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        with urllib.request.urlopen(url + "static/app.js", timeout=10) as script:
            assert script.status == 200
        # the vendored terminal (xterm.js), its stylesheet and its licence ship too
        for name in ("xterm.mjs", "addon-fit.mjs", "xterm.css", "LICENSE", "VERSIONS.json"):
            with urllib.request.urlopen(f"{url}static/vendor/xterm/{name}", timeout=10) as got:
                assert got.status == 200 and got.read(), name
        ask = urllib.request.Request(
            url + "api/agents", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(ask, timeout=10) as listing:
            assert "helper" in {item["agent_id"] for item in json.load(listing)}
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        if gateway.stdout is not None:
            gateway.stdout.close()


def readme_commands() -> list[list[str]]:
    """The command lines of the README's "Using it" shell block (comments removed)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Using it") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    commands = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    commands = [c for c in commands if c]
    assert commands and all(c[0] == "agenthost" for c in commands)
    return commands


def stop_daemon(home: Path) -> None:
    """End the daemon that `agenthost run` started (hosts it spawned were stopped)."""
    info = read_lock_info(home / "daemon.lock") or {}
    pid = info.get("pid")
    if isinstance(pid, int) and is_lock_held(home / "daemon.lock"):
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not is_lock_held(home / "daemon.lock"), what="the daemon to end")
