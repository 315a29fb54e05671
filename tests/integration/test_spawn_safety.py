"""Spawning the agent safely in a host that has threads (issue 12, item 12).

No Python code may run between fork and exec (``preexec_fn`` can deadlock a child
forked while another thread holds a lock); the agent must still die with its host,
even when the host is killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agenthost.host.host import Host, HostConfig
from agenthost.host.process import (
    AgentProcess,
    ExitStatus,
    SpawnError,
    check_program,
    pdeathsig_wrapper,
)

from conftest import HostFactory
from hosttools import PY, pid_gone, wait_for

HAS_PDEATHSIG = bool(pdeathsig_wrapper())


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def watchdog_of(host_pid: int, agent_pid: int) -> psutil.Process:
    """The host's watchdog: the ``sh`` whose argument is the agent's process group."""
    for child in psutil.Process(host_pid).children():
        argv = child.cmdline()
        if argv[:2] == ["/bin/sh", "-c"] and argv[3:4] == [str(agent_pid)]:
            return child
    raise AssertionError("no watchdog found")


@pytest.fixture
def fork_hooks() -> Iterator[list[str]]:
    """Records Python's at-fork hooks while armed: they run only when Popen must call
    back into Python in the child (``preexec_fn``)."""
    calls: list[str] = []
    armed = [False]
    os.register_at_fork(
        before=lambda: armed[0] and calls.append("before"),
        after_in_child=lambda: armed[0] and calls.append("child"),
    )
    armed[0] = True
    try:
        yield calls
    finally:
        armed[0] = False


def test_the_agent_is_spawned_without_python_in_the_child(fork_hooks: list[str]) -> None:
    out: list[bytes] = []
    ended: list[ExitStatus] = []

    async def run() -> None:
        process = AgentProcess(out.append, out.append, ended.append, lambda _m: None)
        process.start([PY, "-c", "print('hello')"], None, dict(os.environ))
        status = await process.exited()
        assert status.exit_code == 0
        await process.aclose()

    asyncio.run(run())
    assert b"".join(out) == b"hello\n" and len(ended) == 1
    assert fork_hooks == []  # with preexec_fn it would be ["before", ...]


@pytest.mark.skipif(not HAS_PDEATHSIG, reason="no setpriv with --pdeathsig here")
def test_the_agent_dies_with_its_host_even_without_the_watchdog(
    host_factory: HostFactory,
) -> None:
    host = host_factory("a1", "--agent", "lines", command=["sleep", "1000"])
    agent_pid = host.agent()["pid"]
    try:
        watchdog = watchdog_of(host.pid, agent_pid)
        watchdog.kill()  # only the kernel's parent-death signal is left
        wait_for(lambda: pid_gone(watchdog.pid), what="the watchdog gone")  # a zombie
        host.signal(signal.SIGKILL)
        host.wait_exit()
        wait_for(lambda: pid_gone(agent_pid), what="the agent to die with its host")
    finally:
        if not pid_gone(agent_pid):
            os.killpg(agent_pid, signal.SIGKILL)


def test_the_agent_runs_as_itself(host_factory: HostFactory) -> None:
    # an exec wrapper is only visible until it execs the agent: same pid, own argv/exe
    host = host_factory("a1", "--agent", "lines", command=["sleep", "1000"])
    pid = host.agent()["pid"]
    wait_for(lambda: cmdline(pid) == ["sleep", "1000"], what="the agent's own argv")
    sleep = shutil.which("sleep")
    assert sleep is not None
    assert os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(sleep)
    assert os.getsid(pid) == pid == os.getpgid(pid)


def test_the_agent_does_not_inherit_the_hosts_ignored_sighup(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=["sleep", "1000"])
    pid = host.agent()["pid"]
    wait_for(lambda: cmdline(pid) == ["sleep", "1000"], what="exec'd")

    def ignored(of: int) -> int:
        status = Path(f"/proc/{of}/status").read_text()
        (line,) = [x for x in status.splitlines() if x.startswith("SigIgn:")]
        return int(line.split()[1], 16)

    hup = 1 << (signal.SIGHUP - 1)
    assert ignored(host.pid) & hup  # the host outlives terminals...
    assert not ignored(pid) & hup  # ...its agent has the default action


# --- commands that cannot start: same report as before the wrapper -----------------------


@pytest.mark.parametrize(
    ("command", "code", "text"),
    [
        (["/nonexistent/agent-binary"], 127, "command not found: /nonexistent/agent-binary"),
        (["no-such-command-xyz"], 127, "command not found: no-such-command-xyz"),
        ([""], 127, "command not found: (empty command name)"),
        (["/etc"], 126, "permission denied: /etc"),
        (["{home}/plain.txt"], 126, "permission denied: {home}/plain.txt"),
    ],
)
@pytest.mark.asyncio
async def test_garbage_commands_are_reported(
    home: Path, command: list[str], code: int, text: str
) -> None:
    # `serve` refuses them before anything starts (tests/integration/test_missing_agent.py);
    # a host given one all the same (a program gone between that check and the spawn, a
    # library user) serves the failure: its agent never ran, and says why
    (home / "plain.txt").write_text("not a program\n")  # mode 0644: not executable
    command = [c.format(home=home) for c in command]
    text = text.format(home=home)
    config = HostConfig("a1", home, agent="lines", command=tuple(command), linger=0, journal=None)
    host = Host(config)
    await asyncio.wait_for(host.run(), 30)  # nothing to wait for, no linger: it ends
    agent = host.agent_info()
    assert agent.state == "error" and agent.exit_code == code and agent.pid == 0
    assert agent.last_error is not None and text in agent.last_error
    assert agent.start_error is not None and text in agent.start_error


def test_check_program_follows_path_and_cwd(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    env = {"PATH": str(tool.parent)}
    with pytest.raises(SpawnError) as denied:
        check_program("tool", None, env)
    assert denied.value.exit_code == 126
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    check_program("tool", None, env)  # found through the agent's PATH
    check_program("./bin/tool", str(tmp_path), {})  # relative to the agent's cwd
    with pytest.raises(SpawnError) as missing:
        check_program("./bin/tool", str(tmp_path / "bin"), {})
    assert missing.value.exit_code == 127
    with pytest.raises(SpawnError) as no_cwd:
        check_program("tool", str(tmp_path / "gone"), env)
    assert "working directory not found" in str(no_cwd.value)


def test_pdeathsig_wrapper_is_probed(tmp_path: Path) -> None:
    assert pdeathsig_wrapper(str(tmp_path)) == ()  # none there: the watchdog alone
    old = tmp_path / "setpriv"  # an util-linux before 2.33: the option is unknown
    old.write_text("#!/bin/sh\necho \"setpriv: unrecognized option '$1'\" >&2\nexit 1\n")
    old.chmod(0o755)
    assert pdeathsig_wrapper(str(tmp_path)) == ()
    real = shutil.which("setpriv", path="/usr/bin:/bin")
    if real is None:
        pytest.skip("no setpriv here")
    wrapper = pdeathsig_wrapper(os.path.dirname(real))
    assert wrapper in ((), (real, "--pdeathsig", "SIGTERM", "--"))
