"""The daemon of another machine through ssh (``bridge --daemon``): ``run --remote``,
``DaemonClient(remote=...)``; and the commands run there whole (``export``, ``forget``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.client import Client
from agenthost.daemon.client import DaemonClient

from daemontools import DaemonWorld, daemon_world
from hosttools import wait_for
from sshtools import Sshd

CLI = [sys.executable, "-m", "agenthost"]


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as w:
        yield w


@pytest.fixture
def env(sshd: Sshd, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = sshd.env(home)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **values, "AGENTHOST_DEMO_PACE": "0"}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


@pytest.mark.asyncio
async def test_daemon_client_over_ssh(sshd: Sshd, env: dict[str, str], world: DaemonWorld) -> None:
    world.start_daemon()
    async with DaemonClient(remote=sshd.remote) as daemon:
        ping = await daemon.ping()
        assert ping.protocol_version
        assert await daemon.list() == []


def test_run_export_forget_on_a_remote(
    sshd: Sshd, env: dict[str, str], world: DaemonWorld, home: Path
) -> None:
    world.start_daemon()
    started = cli(env, "run", "--agent-id", "d1", "--remote", sshd.remote, "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["socket_path"] == str(home / "hosts" / "d1.sock")
    with Client("d1", remote=sshd.remote) as client:
        client.send("remote hello")
        for event in client.attach(0):
            if event.type == "result":
                break
        client.stop()
    wait_for(
        lambda: "remote hello" in cli(env, "export", "d1", "--remote", sshd.remote).stdout,
        what="the journal's conversation",
    )
    md = cli(env, "export", "d1", "--remote", sshd.remote, "--format", "md")
    assert md.stdout.startswith("# Conversation of agent `d1`")

    def forgotten() -> bool:
        out = cli(env, "forget", "d1", "--remote", sshd.remote, "--json")
        return out.returncode == 0 and json.loads(out.stdout)["forgotten"] is True

    wait_for(forgotten, what="the daemon to forget the stopped agent")
    again = cli(env, "forget", "d1", "--remote", sshd.remote)
    assert again.returncode == 3  # the remote's own exit status, passed on
    assert "knows no agent 'd1'" in again.stderr


def test_run_remote_cwd_is_not_checked_here(sshd: Sshd, env: dict[str, str]) -> None:
    # a directory of the other machine: this one does not have to have it; the remote
    # (with no daemon answering and ssh refused here) says what failed
    bad = {**env, "AGENTHOST_REMOTE_COMMAND": "/nonexistent"}
    out = cli(bad, "run", "--agent-id", "d2", "--cwd", "/only/there", "--remote", sshd.remote)
    assert out.returncode == 11, out.stderr
    assert "agenthost is not installed on" in out.stderr
    local = cli(env, "run", "--agent-id", "d2", "--cwd", "/only/there")
    assert local.returncode == 2 and "does not exist" in local.stderr


@pytest.mark.asyncio
async def test_autostart_starts_the_remote_daemon(
    sshd: Sshd, env: dict[str, str], home: Path
) -> None:
    from agenthost.daemon.files import daemon_lock_path
    from agenthost.errors import DaemonNotRunning
    from agenthost.lockfile import read_lock_info

    from hosttools import pid_gone, wait_until

    with pytest.raises(DaemonNotRunning):  # none runs there, and none is started
        async with DaemonClient(remote=sshd.remote) as daemon:
            await daemon.ping()
    try:
        async with DaemonClient(remote=sshd.remote, autostart=True) as daemon:
            assert (await daemon.ping()).protocol_version
            assert await daemon.list() == []
    finally:
        info = read_lock_info(daemon_lock_path(home)) or {}
        pid = info.get("pid")
        if isinstance(pid, int):
            os.kill(pid, signal.SIGTERM)
            await wait_until(lambda: pid_gone(pid), what="the daemon's exit")
    assert isinstance(pid, int)
