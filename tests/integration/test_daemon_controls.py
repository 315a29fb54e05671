"""`agenthost daemon status` and `agenthost daemon stop` with a real daemon and real
hosts (issue 28, item 11): changing the daemon's limits needed `kill` with a pid read
from the JSON of daemon.lock. A stop is graceful and the daemon's alone: its hosts and
agents keep running, and `agenthost daemon` still runs a daemon as before."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from agenthost.cli.common import Exit
from agenthost.lockfile import is_lock_held

from daemontools import DaemonWorld
from hosttools import PY

ECHO = [PY, "-u", "-c", "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"]


def test_status_shows_the_daemon_and_stop_leaves_its_hosts_running(world: DaemonWorld) -> None:
    daemon = world.start_daemon("--max-agents", "2", "--queue", "--idle-stop", "30m")
    world.spawn("a1", ECHO)
    world.spawn("a2", ECHO)
    world.spawn("a3", ECHO)  # queued
    hosts = world.host_pids()
    assert set(hosts) == {"a1", "a2"}

    shown = world.cli("daemon", "status")
    assert shown.returncode == 0, shown
    lines = shown.stdout.splitlines()
    assert f"daemon:  running, pid {daemon.pid}" in lines
    assert "limits:  --max-agents 2 --queue --idle-stop 30m0s" in lines
    assert "agents:  3 (1 queued, 2 running)" in lines
    assert f"home:    {world.home}" in lines
    as_json = json.loads(world.cli("daemon", "status", "--json").stdout)
    assert (as_json["ok"], as_json["pid"], as_json["agents"]) == (True, daemon.pid, 3)
    assert as_json["limits"] == {"max_agents": 2, "queue": True, "idle_stop": 1800.0}
    assert as_json["statuses"] == {"queued": 1, "running": 2}
    assert as_json["socket_path"] == str(world.home / "daemon.sock")
    assert as_json["log"] == str(daemon.log_path)  # where its stderr goes

    stopped = world.cli("daemon", "stop")
    assert stopped.returncode == 0, stopped
    assert stopped.stdout.startswith(f"stopped the daemon (pid {daemon.pid}); its hosts")
    assert daemon.wait_exit() == 0  # a clean SIGTERM exit, as systemd would stop it
    assert not is_lock_held(world.home / "daemon.lock")
    assert world.host_pids() == hosts  # the hosts, and their agents, live on
    sent = world.cli("send", "a1", "still here")
    assert sent.returncode == 0, sent

    gone = world.cli("daemon", "status")
    assert gone.returncode == Exit.NO_HOST, gone
    assert f"no daemon runs for {world.home}" in gone.stderr and "agenthost daemon" in gone.stderr
    again = world.cli("daemon", "stop", "--json")
    assert again.returncode == 0, again
    assert json.loads(again.stdout) == {
        "ok": True,
        "stopped": False,
        "pid": None,
        "home": str(world.home),
    }

    # a new daemon, with other limits, finds them all again
    world.start_daemon("--max-agents", "3")
    agents = world.agents()
    assert {a: agents[a]["status"] for a in ("a1", "a2")} == {"a1": "running", "a2": "running"}
    assert world.ping()["limits"]["max_agents"] == 3


def test_a_daemon_that_does_not_end_is_a_timeout(world: DaemonWorld) -> None:
    daemon = world.start_daemon()
    daemon.signal(signal.SIGSTOP)  # SIGTERM stays pending while it is stopped
    try:
        late = world.cli("daemon", "stop", "--timeout", "0.5")
        assert late.returncode == Exit.TIMEOUT, late
        assert f"the daemon (pid {daemon.pid}) did not exit within 0.5s" in late.stderr
        assert f"kill -9 {daemon.pid}" in late.stderr
    finally:
        daemon.signal(signal.SIGCONT)
    assert daemon.wait_exit() == 0  # the SIGTERM it was sent, handled once it runs


def test_the_home_may_be_given_to_the_group(world: DaemonWorld, home: Path) -> None:
    daemon = world.start_daemon()
    env = dict(world.env)
    world.env.pop("AGENTHOST_HOME")
    try:
        done = world.cli("daemon", "--home", str(home), "status", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["pid"] == daemon.pid, done
        done = world.cli("daemon", "--home", str(home), "stop")
        assert done.returncode == 0, done
    finally:
        world.env = env
    assert daemon.wait_exit() == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["daemon", "--max-agents", "2", "stop"], "--max-agents: an option of `agenthost daemon`"),
        (["daemon", "--queue", "status"], "--queue: an option of `agenthost daemon` itself"),
        (["daemon", "stop", "--timeout", "nan"], "--timeout"),
        (["daemon", "stop", "--timeout", "0"], "--timeout"),
        (["daemon", "statu"], "No such command 'statu'"),
    ],
)
def test_garbage_daemon_control_lines_are_usage_errors(
    world: DaemonWorld, args: list[str], says: str
) -> None:
    daemon = world.start_daemon()
    done = world.cli(*args)
    assert done.returncode == Exit.USAGE, done
    assert says in done.stderr, done
    assert daemon.alive()  # nothing was stopped
