"""The sandbox's seccomp filter, for real: each refused call is made inside bubblewrap
with the filter (``bwrap --seccomp FD``) and refused, and made again in the same sandbox
without it, where the kernel answers differently (success, or its own EFAULT/EBADF/
EINVAL): so every refusal is shown to be the filter's. Benign workloads (git, Python
threads and multiprocessing, node with a worker, shell pipelines) still run inside.

The calls are made by tests/sandboxprobe.py (ctypes ``syscall()``; TIOCSTI against a pty
from ``os.openpty``). As root the control runs without a user namespace, so the process
holds real capabilities and the kernel reaches its argument checks; the filtered run is
made both ways (with every capability the filter still refuses). Without root, calls the
kernel itself refuses for want of a capability cannot be told apart and are skipped,
saying so. Skipped without bubblewrap, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import termios
import tty
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from e2e.clis import unavailable

from agenthost.sandbox import seccomp

PROBE = str(Path(__file__).parent.parent / "sandboxprobe.py")
ROOT = os.geteuid() == 0
COMMON = ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev"]
COMMON += ["--proc", "/proc", "--tmpfs", "/tmp"]  # a private /tmp, as the host's sandbox has
# and, over it, this checkout and its Python (a clone under /tmp, as in CI, is hidden else)
for _shown in dict.fromkeys(
    [str(Path(__file__).resolve().parents[2]), sys.prefix, sys.base_prefix]
):
    COMMON += ["--ro-bind", _shown, _shown]
LINES = {
    # The sandbox as the brief of the host's sandbox has it.
    "userns": ["--unshare-all"],
    # Every namespace but the user's: as root, real capabilities (root only).
    "privileged": [
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ],
}
CONTROL_LINE = "privileged" if ROOT else "userns"

EPERM, ENOSYS, EAFNOSUPPORT = errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT
REFUSED: dict[str, int | str] = {
    name: EPERM
    for name in (
        "tiocsti tiocsti_high_bits tioclinux bpf perf_event_open userfaultfd io_uring_setup "
        "io_uring_enter io_uring_register keyctl add_key request_key unshare_user "
        "unshare_net unshare_mount clone_user setns mount umount2 pivot_root chroot "
        "open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr kexec_load "
        "kexec_file_load init_module finit_module delete_module reboot swapon swapoff acct "
        "quotactl syslog settimeofday clock_settime clock_adjtime iopl ioperm "
        "open_by_handle_at uselib"
    ).split()
}
"""Each probe of tests/sandboxprobe.py and the outcome the filter gives it."""
REFUSED |= {
    "clone3": ENOSYS,
    "socket_vsock": EAFNOSUPPORT,
    "socket_vsock_high_bits": EAFNOSUPPORT,
    "socket_packet": EAFNOSUPPORT,
}
if platform.machine() == "x86_64":
    REFUSED["int80_tiocsti"] = "signal SIGSYS"  # the i386 ABI: the process is killed
ALLOWED = ("socket_inet", "socket_unix", "ptrace_traceme")
TERMINAL_PROBES = ("tiocsti", "tiocsti_high_bits", "int80_tiocsti", "tioclinux")


@pytest.fixture(scope="module")
def bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        unavailable("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        raise AssertionError("not reached")
    reason = seccomp.unavailable()
    if reason is not None:
        unavailable(reason)
    return path


def sandboxed(
    bwrap: str,
    argv: Sequence[str],
    *,
    line: str = "userns",
    filtered: bool = True,
    pass_fds: Sequence[int] = (),
    extra: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in bubblewrap (with the filter unless ``filtered`` is false)."""
    fds = list(pass_fds)
    args = [bwrap, *LINES[line], *COMMON, *extra]
    seccomp_fd = None
    if filtered:
        seccomp_fd = seccomp.filter_fd()
        fds.append(seccomp_fd)
        args += ["--seccomp", str(seccomp_fd)]
    try:
        return subprocess.run(
            [*args, "--", *argv],
            pass_fds=fds,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)


class Pty:
    """A pty pair in raw mode: FIONREAD on the slave counts the bytes a TIOCSTI pushed,
    at once (no waiting for an echo)."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)

    def pending(self) -> int:
        buf = fcntl.ioctl(self.slave, termios.FIONREAD, b"\0\0\0\0")
        count: int = struct.unpack("i", buf)[0]
        return count

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


def probe(bwrap: str, names: Sequence[str], *, line: str, filtered: bool) -> dict[str, object]:
    """Run the probes in one sandbox; their outcomes by name."""
    pty = Pty()
    try:
        done = sandboxed(
            bwrap,
            [sys.executable, PROBE, "--tty", str(pty.slave), *names],
            line=line,
            filtered=filtered,
            pass_fds=[pty.slave],
        )
    finally:
        pty.close()
    assert done.returncode == 0, done.stderr
    outcomes: dict[str, object] = json.loads(done.stdout)
    return outcomes


@pytest.fixture(scope="module")
def outcomes(bwrap: str) -> Iterator[dict[tuple[str, bool], dict[str, object]]]:
    """Every probe's outcome per (line, filtered), one sandbox each."""
    names = [*REFUSED, *ALLOWED]
    runs = [("userns", True), (CONTROL_LINE, False)]
    if ROOT:
        runs.append(("privileged", True))
    yield {run: probe(bwrap, names, line=run[0], filtered=run[1]) for run in runs}


@pytest.mark.parametrize("line", ["userns", "privileged"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_inside(
    outcomes: dict[tuple[str, bool], dict[str, object]], name: str, line: str
) -> None:
    if line == "privileged" and not ROOT:
        pytest.skip("the sandbox with real capabilities needs root")
    assert outcomes[(line, True)][name] == REFUSED[name]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_by_the_filter_only(
    outcomes: dict[tuple[str, bool], dict[str, object]], name: str
) -> None:
    """Without the filter the same call gets another answer: the refusal is the filter's."""
    control = outcomes[(CONTROL_LINE, False)][name]
    if control == REFUSED[name] and not ROOT:
        pytest.skip(f"without root the kernel refuses {name} too (no capability): no control")
    assert control != REFUSED[name]


@pytest.mark.parametrize("name", ALLOWED)
def test_allowed_inside(outcomes: dict[tuple[str, bool], dict[str, object]], name: str) -> None:
    """Unix and IP sockets, and ptrace in the agent's own tree, stay allowed."""
    assert outcomes[("userns", True)][name] == 0


@pytest.mark.parametrize("name", [n for n in TERMINAL_PROBES if n in REFUSED and n != "tioclinux"])
def test_tiocsti_types_into_the_terminal_only_without_the_filter(bwrap: str, name: str) -> None:
    """The injection is real without the filter (a byte arrives on the terminal's input)
    and none arrives with it."""
    for filtered, expected in ((False, 1), (True, 0)):
        pty = Pty()
        try:
            done = sandboxed(
                bwrap,
                [sys.executable, PROBE, "--tty", str(pty.slave), name],
                filtered=filtered,
                pass_fds=[pty.slave],
            )
            assert done.returncode == 0, done.stderr
            assert pty.pending() == expected, (filtered, done.stdout)
        finally:
            pty.close()


def test_the_filter_is_loaded_in_the_agent_and_the_sandbox_init(bwrap: str) -> None:
    """Mode 2 (filter) for the agent and bwrap's PID 1 in the sandbox, which the agent
    could otherwise ptrace to make calls the filter refuses."""
    done = sandboxed(bwrap, ["sh", "-c", "grep '^Seccomp:' /proc/self/status /proc/1/status"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "/proc/self/status:Seccomp:",
        "2",
        "/proc/1/status:Seccomp:",
        "2",
    ]


# --- benign workloads keep working inside


def test_git_init_and_commit(bwrap: str, tmp_path: Path) -> None:
    script = (
        'set -e; cd "$1"; git init -q; echo hi > f; git add f; '
        "git -c user.name=a -c user.email=a@example.com commit -q -m first; "
        "git log --format=%s"
    )
    done = sandboxed(
        bwrap,
        ["sh", "-c", script, "sh", str(tmp_path)],
        extra=["--bind", str(tmp_path), str(tmp_path), "--setenv", "HOME", str(tmp_path)],
    )
    assert (done.returncode, done.stdout) == (0, "first\n"), done.stderr


PYTHON_WORK = """
import concurrent.futures, multiprocessing, subprocess, threading
def square(x):
    return x * x
if __name__ == "__main__":
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        threads = sum(pool.map(square, range(10)))
    results = [threads]
    for method in ("fork", "forkserver", "spawn"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            results.append(sum(pool.map(square, range(10))))
    results.append(subprocess.run(["echo", "exec"], capture_output=True, text=True).stdout)
    print(results)
"""


def test_python_threads_multiprocessing_and_subprocess(bwrap: str, tmp_path: Path) -> None:
    # A file, not -c: "spawn" and "forkserver" workers import the main module.
    script = tmp_path / "work.py"
    script.write_text(PYTHON_WORK)
    done = sandboxed(
        bwrap, [sys.executable, str(script)], extra=["--ro-bind", str(tmp_path), str(tmp_path)]
    )
    assert (done.returncode, done.stdout) == (0, "[285, 285, 285, 285, 'exec\\n']\n"), done.stderr


NODE_WORK = """
const { Worker } = require("node:worker_threads");
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const code = "require('node:worker_threads').parentPort.postMessage(6 * 7)";
const w = new Worker(code, { eval: true });
w.on("message", async (m) => {
  const text = await fs.promises.readFile("/proc/self/status", "utf8");
  const child = execFileSync("echo", ["child"]).toString().trim();
  console.log(m, child, text.includes("Seccomp:\\t2"));
  await w.terminate();
});
"""


def test_node_with_a_worker_thread(bwrap: str) -> None:
    node = shutil.which("node") or "/usr/bin/node"
    if not Path(node).exists():
        unavailable("node is not installed")
    done = sandboxed(bwrap, [node, "-e", NODE_WORK])
    assert (done.returncode, done.stdout) == (0, "42 child true\n"), done.stderr


def test_shell_pipelines(bwrap: str) -> None:
    script = "seq 1000 | sort -rn | head -n 3 | tr '\\n' ' ' | sed 's/ $//'; echo; "
    script += "(exit 3) || echo $?"
    done = sandboxed(bwrap, ["sh", "-c", script])
    assert (done.returncode, done.stdout) == (0, "1000 999 998\n3\n"), done.stderr
