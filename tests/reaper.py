"""A subreaper for the daemon tests: it plays init's part for what the tests start.

On a normal machine a host whose daemon died is adopted by init (or by the systemd
user manager) and reaped when it exits. The PID 1 of some test machines never reaps,
so every exited orphan would stay a zombie for good and a "no zombie" assertion would
test the machine, not agenthost. This process marks itself a child subreaper
(``PR_SET_CHILD_SUBREAPER``), starts the commands the test asks for, and reaps every
descendant that ends up its child.

Protocol, one JSON object per line:

* stdin ``{"argv": [...], "env": {...}, "log": PATH}`` -> stdout ``{"pid": N}``
* stdout ``{"exit": PID, "status": CODE}`` for every process it reaps
  (``CODE`` negative for a death by signal)

At end of input it kills every process left under it (SIGKILL) and exits.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import sys
import time
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


def children() -> list[int]:
    """The pids whose parent is this process."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[1] == me:
            found.append(int(entry))
    return found


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        emit({"exit": pid, "status": os.waitstatus_to_exitcode(status)})


def spawn(request: dict[str, Any]) -> int:
    argv = [str(a) for a in request["argv"]]
    env = {str(k): str(v) for k, v in dict(request.get("env") or os.environ).items()}
    log = str(request.get("log") or "/dev/null")
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=True)


def kill_all() -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = children()
        if not pids:
            return
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.02)  # let the kernel reparent their children to us
        reap()


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the pipe
    stdin = sys.stdin.buffer
    buf = b""
    emit({"ready": os.getpid()})
    while True:
        ready, _, _ = select.select([stdin, wake_r], [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            reap()
        if stdin in ready:
            data = os.read(stdin.fileno(), 65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                if line.strip():
                    emit({"pid": spawn(json.loads(line))})
    kill_all()
    reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())
