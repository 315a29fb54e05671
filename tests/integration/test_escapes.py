"""No escapes: a process the agent double-forks into a session of its own (``setsid``)
is ended when the host stops, when the agent exits on its own, and when the host is
killed; while the agent lives, such an orphan is the host's child, reaped when it exits.

The agent is a real program run by a real ``agenthost serve`` (the lines adapter).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from agenthost.host.reaper import escapees

from conftest import HostFactory
from hosttools import HostProc, pid_gone, wait_for

# argv: PIDFILE MODE. Double-forks a setsid() child (stdio on /dev/null, as a daemon
# has it) that writes its pid and sleeps; then the agent stays (MODE "stay": until
# stopped), or exits at its first input line (MODE "exit"). With MODE "stubborn" the escapee ignores
# SIGTERM (only SIGKILL ends it).
ESCAPER = """
import os, signal, sys, time
pidfile, mode = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if mode == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pidfile + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        while True:
            time.sleep(1000)
    os._exit(0)
os.wait()
while not os.path.exists(pidfile):
    time.sleep(0.01)
print("escaped", flush=True)
for line in sys.stdin:
    if mode == "exit":
        break
"""


@pytest.fixture(params=["exec", "fork"])
def start_by(request: pytest.FixtureRequest) -> str:
    """Hosts exec'd, and forked by a host factory (the daemon's way): both subreapers."""
    return str(request.param)


def _escaper(home: Path, hosts: HostFactory, mode: str) -> tuple[HostProc, int]:
    pidfile = home / "escapee.pid"
    host = hosts(
        "esc",
        "--agent",
        "lines",
        "--linger",
        "30",
        command=[sys.executable, "-u", "-c", ESCAPER, str(pidfile), mode],
    )
    wait_for(pidfile.exists, what="the escapee's pid file")
    escapee = int(pidfile.read_text())
    agent_pid = host.agent()["pid"]
    proc = psutil.Process(escapee)
    assert os.getsid(escapee) != agent_pid  # it left the agent's session and group
    assert os.getpgid(escapee) != agent_pid
    # its parent exited: re-parented to the host (a subreaper), not to init
    wait_for(lambda: proc.ppid() == host.pid, what="the escapee re-parented to the host")
    return host, escapee


def _stop(host: HostProc, timeout: float = 5.0) -> dict[str, object]:
    with host.raw() as conn:
        response = conn.request("host.stop", {"timeout": timeout})
    assert response["success"], response
    payload: dict[str, object] = response["payload"]
    return payload


def test_a_setsid_escapee_is_ended_by_stop(home: Path, host_factory: HostFactory) -> None:
    host, escapee = _escaper(home, host_factory, "stay")
    _stop(host)
    # ended and reaped by the host before it answered: not even a zombie is left
    assert not psutil.pid_exists(escapee)
    host.wait_exit()


def test_an_escapee_that_ignores_sigterm_is_killed(home: Path, host_factory: HostFactory) -> None:
    host, escapee = _escaper(home, host_factory, "stubborn")
    _stop(host)
    assert not psutil.pid_exists(escapee)
    assert "reaper.escapees" in host.log() and "SIGKILL" in host.log()


def test_an_escapee_is_ended_when_the_agent_exits_on_its_own(
    home: Path, host_factory: HostFactory
) -> None:
    host, escapee = _escaper(home, host_factory, "exit")
    with host.raw() as conn:
        assert conn.request("host.send", {"input": "bye"})["success"]
    host.wait_state("done", "error")
    wait_for(lambda: not psutil.pid_exists(escapee), what="the escapee ended and reaped")
    assert host.alive()  # the host lingers, with nothing of its agent left


def test_an_escapee_dies_with_a_killed_host(home: Path, host_factory: HostFactory) -> None:
    host, escapee = _escaper(home, host_factory, "stay")
    agent_pid = host.agent()["pid"]
    host.signal(signal.SIGKILL)
    host.wait_exit()
    # the watchdog ends the agent's group and every process of its run (marker)
    wait_for(lambda: pid_gone(escapee), what="the escapee ended after the host died")
    wait_for(lambda: pid_gone(agent_pid), what="the agent ended after the host died")


def test_an_orphan_that_exits_while_the_agent_lives_is_reaped(
    home: Path, host_factory: HostFactory
) -> None:
    host, escapee = _escaper(home, host_factory, "stay")
    os.kill(escapee, signal.SIGTERM)
    # the host is its parent now: it reaps it (no zombie), and the agent runs on
    wait_for(lambda: not psutil.pid_exists(escapee), what="the orphan reaped")
    assert host.agent()["state"] not in ("done", "error")
    _stop(host)


def test_only_children_in_other_sessions_the_host_did_not_start_are_escapees() -> None:
    # host session 1; 11 is its agent (own), 13 a subprocess.run of the host itself
    assert escapees({10: 10, 11: 11, 12: 11, 13: 1}, own={11}, session=1) == [10, 12]
    assert escapees({}, own={1}, session=1) == []
    assert escapees({5: 5}, own=set(), session=1) == [5]


def test_a_subprocess_of_the_host_itself_keeps_its_exit_status(
    home: Path, host_factory: HostFactory
) -> None:
    # the host runs `setpriv --help` as a probe at the agent's spawn: its exit status is
    # its own, not taken by the reaper (which logs every pid it reaps)
    host, _ = _escaper(home, host_factory, "stay")
    reaped = [line for line in host.log().splitlines() if "reaper.reaped" in line]
    assert reaped == []


# A host's SIGCHLD handler may run while a child of its own is being started: a child
# that exits at once (an ACP agent's short terminal command on a loaded machine) must
# keep its exit status for its Popen, not be reaped as an orphan (it read 0, not 4).
STARTING = """
import json, os, subprocess, sys, time
from agenthost.host import reaper

def zombie(pid):
    with open(f"/proc/{pid}/stat") as fh:
        stat = fh.read()
    return stat[stat.rfind(")") + 2] == "Z"

sub = reaper.Subreaper()
with reaper.starting_own():
    own = subprocess.Popen(["sh", "-c", "exit 4"], start_new_session=True)
    orphan = subprocess.Popen(["sh", "-c", "exit 5"], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (zombie(own.pid) and zombie(orphan.pid)):  # both exited, neither reaped
        assert time.monotonic() < deadline, "the children did not exit"
        time.sleep(0.01)
    during = sub.reap()  # what a SIGCHLD now does
    reaper.OWN.add(own.pid)
# the reap asked meanwhile is done now: the orphan's, not ours
gone = not os.path.exists(f"/proc/{orphan.pid}")
print(json.dumps({"during": during, "own": own.wait(), "orphan_reaped": gone}))
"""


def test_a_child_of_our_own_keeps_its_status_when_sigchld_comes_while_it_starts() -> None:
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", STARTING], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])  # after the reaper's log lines
    assert result == {"during": [], "own": 4, "orphan_reaped": True}
