"""The subreaper's list of this process's children, read from the kernel's per-thread
lists (``/proc/PID/task/TID/children``): real child processes, started from the main
thread and from another one, zombies included."""

from __future__ import annotations

import os
import subprocess
import threading

from agenthost.host.reaper import Subreaper


def test_children_lists_each_child_with_its_session() -> None:
    own = subprocess.Popen(["sleep", "30"])
    apart = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        children = Subreaper().children()
        assert children[own.pid] == os.getsid(0)
        assert children[apart.pid] == apart.pid  # the leader of its own session
    finally:
        for proc in (own, apart):
            proc.kill()
            proc.wait()
    assert own.pid not in Subreaper().children()  # reaped: no longer a child


def test_children_include_those_of_other_threads_and_zombies() -> None:
    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(["true"])))
    thread.start()
    thread.join()
    (proc,) = started
    try:
        # ``true`` exits at once; not waited for, it stays a zombie child of ours,
        # on the list of the thread that started it (which has ended since)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        assert proc.pid in Subreaper().children()
    finally:
        proc.wait()
    assert proc.pid not in Subreaper().children()
