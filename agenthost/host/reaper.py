"""The host as the child subreaper of its agent's process tree: no escapes.

A descendant of the agent that calls ``setsid()`` leaves the agent's process group, so
signalling the group does not reach it, and once its parent exits it is re-parented,
out of sight. The host's entry point (``agenthost serve``) therefore marks the host a
child subreaper (``PR_SET_CHILD_SUBREAPER``): every orphan of the agent's tree is
re-parented to the host instead of init, and becomes one of its children.

* While the agent lives, its orphans may run (a server it started on purpose); the
  host reaps those that exit (:meth:`Subreaper.reap`, on SIGCHLD), so none is left a
  zombie.
* When the agent ends (on its own or stopped), after its process group was ended,
  :meth:`Subreaper.end_escapees` ends every child of the host that the host did not
  start itself, with its descendants: SIGTERM, then SIGKILL after the grace. Killing
  one re-parents its children to the host, so it looks again until none is left.
* When the host itself dies (SIGKILL), it can do nothing: the agent's watchdog
  (:mod:`agenthost.host.process`) ends the agent's group and every process that
  carries the agent run's environment marker (:data:`RUN_MARKER`), which every
  descendant inherits. A process that cleared its environment escapes that last
  path only.

Which children are orphans of the agent's tree: the agent runs in a session of its
own, so everything it starts, and everything that left with ``setsid``, is in another
session than the host's; a child the host runs itself without a session of its own (a
``subprocess.run``) is in the host's session. The host's own children in sessions of
their own (the agent, its watchdog, an ACP agent's terminals) are registered in
:data:`OWN` by :class:`~agenthost.host.process.AgentProcess`. Only the rest are ever
reaped or ended here, so that ``Popen`` keeps every exit status of its own. Only a
process that is a host (the ``serve`` entry point) enables this: a host run inside
another program (a test) has children that are not its agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Final

import structlog

log = structlog.get_logger("agenthost.reaper")

PR_SET_CHILD_SUBREAPER: Final = 36
PR_GET_CHILD_SUBREAPER: Final = 37
RUN_MARKER: Final = "AGENTHOST_AGENT_RUN"
"""The environment variable, with a value unique to one run of one agent, that every
process of the agent's tree inherits: how the watchdog finds them when the host died."""

GIVE_UP: Final = 10.0
"""Seconds after SIGKILL when :meth:`Subreaper.end_escapees` stops waiting (a process
in uninterruptible sleep dies when the kernel lets it; the host must not hang)."""

OWN: set[int] = set()
"""Pids of the children this process started itself (and reaps through ``Popen``)."""

_starting = 0  # children of our own being started: their pids are not in OWN yet
_deferred: set[Subreaper] = set()  # reapers whose reap waits for those starts to end


@contextlib.contextmanager
def starting_own() -> Iterator[None]:
    """Around the start of a child of our own, until its pid is in :data:`OWN`.

    The SIGCHLD handler runs between any two bytecodes: a child that exits at once (a
    short command on a loaded machine) can signal before ``Popen`` has returned its
    pid, and a reap then would take its exit status from ``Popen`` as an orphan's. A
    reap asked meanwhile waits for the end of the block.
    """
    global _starting
    _starting += 1
    try:
        yield
    finally:
        _starting -= 1
        if not _starting:
            while _deferred:
                _deferred.pop().reap()


def escapees(children: Mapping[int, int], own: Collection[int], session: int) -> list[int]:
    """Which of the host's children (pid -> session id) are orphans of the agent's tree:
    those in another session than the host's (``session``) that it did not start."""
    return sorted(pid for pid, sid in children.items() if pid not in own and sid != session)


def set_subreaper(on: bool) -> bool:
    """Mark this process a child subreaper (or not); False where the kernel refuses."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False
    if not done:  # pragma: no cover - Linux has had it since 3.4
        log.warning("reaper.unavailable", errno=ctypes.get_errno())
    return bool(done)


def is_subreaper() -> bool:
    """Whether this process is a child subreaper."""
    flag = ctypes.c_int(0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False
    return bool(flag.value)


class Subreaper:
    """Reaps and ends the orphans of the agent's tree that were re-parented to us."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.session = os.getsid(0)

    def children(self) -> dict[int, int]:
        """This process's children (zombies too): pid -> session id."""
        found = {}
        for pid in self._child_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                found[pid] = os.getsid(pid)  # a zombie still has its session
        return found

    def _child_pids(self) -> list[int]:
        """The pids of this process's children, from the kernel's list of each thread's
        children (``/proc/PID/task/TID/children``), or psutil where there is none.

        Not psutil first: its ``children()`` reads the ``stat`` file of every process
        of the machine, and it costs a host ~6 ms to import; the reaping of the host's
        own first child (the probe of ``setpriv``, before the agent starts) paid both
        on every start.
        """
        pids: list[int] = []
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:  # pragma: no cover - no /proc
            return self._child_pids_psutil()
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/children", "rb") as fh:
                    pids += [int(pid) for pid in fh.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                if tid == str(self.pid):  # pragma: no cover - no CONFIG_PROC_CHILDREN
                    return self._child_pids_psutil()
                # else a thread that ended meanwhile
        return pids

    def _child_pids_psutil(self) -> list[int]:  # pragma: no cover - no CONFIG_PROC_CHILDREN
        import psutil  # imported here: only on a kernel without the children lists

        try:
            return [child.pid for child in psutil.Process(self.pid).children()]
        except psutil.Error:  # we are alive
            return []

    def orphans(self) -> list[int]:
        """The children that are orphans of the agent's tree."""
        return escapees(self.children(), OWN, self.session)

    def reap(self) -> list[int]:
        """Reap the orphans that exited (SIGCHLD); return their pids. While a child of
        our own is being started (:func:`starting_own`), later."""
        if _starting:
            _deferred.add(self)
            return []
        reaped = []
        for pid in self.orphans():
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped.append(pid)
        if reaped:
            log.debug("reaper.reaped", pids=reaped)
        return reaped

    def _tree(self, pids: Iterable[int]) -> list[int]:
        """``pids`` and their descendants, as far as they can be found."""
        import psutil

        found = list(pids)
        for pid in list(found):
            with contextlib.suppress(psutil.Error):
                found += [p.pid for p in psutil.Process(pid).children(recursive=True)]
        return found

    def _signal(self, pids: Iterable[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    async def end_escapees(self, grace: float) -> list[int]:
        """End every orphan of the agent's tree: SIGTERM, SIGKILL after ``grace``
        seconds; return the pids that were signalled."""
        loop = asyncio.get_running_loop()
        signalled: set[int] = set()
        deadline = loop.time() + grace
        killing = False
        delay = 0.005
        while True:
            self.reap()
            left = self.orphans()
            if not left:
                break
            if loop.time() >= deadline + GIVE_UP:  # pragma: no cover - unkillable
                log.warning("reaper.escapees_left", pids=left)
                break
            tree = self._tree(left)
            if not killing and loop.time() >= deadline:
                killing = True
                log.info("reaper.escapees", pids=sorted(set(tree)), signal="SIGKILL")
            if killing:
                self._signal(tree, signal.SIGKILL)
            else:
                fresh = [pid for pid in tree if pid not in signalled]
                if fresh:
                    log.info("reaper.escapees", pids=sorted(fresh), signal="SIGTERM")
                    self._signal(fresh, signal.SIGTERM)
            signalled.update(tree)
            # polling: an orphan's death is a SIGCHLD, but a descendant of it that is
            # re-parented to us comes with no signal at all
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return sorted(signalled)
