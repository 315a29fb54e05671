"""Finding hosts on disk and telling live ones from leftovers (through client.py only).

A host is alive exactly when its lock file is held (:mod:`agenthost.lockfile`). So:

* lock held, socket answers        -> live
* lock held, socket does not answer -> unreachable (stopped with SIGSTOP, overloaded)
* lock held, no socket file         -> socketless: a cleanup job deleted it; SIGUSR1
  makes the host bind it again
* lock free, files left             -> stale: a dead host's leftovers, removed while we
  hold its lock ourselves, so a host starting at that moment cannot lose its new socket
* nothing                           -> gone
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from agenthost._version import __version__
from agenthost.client import AsyncClient, open_probe
from agenthost.errors import AgentHostError, InvalidAgentId, ProtocolError, UntrustedFile
from agenthost.homefiles import open_checked
from agenthost.lockfile import is_lock_held, read_lock_info
from agenthost.paths import hosts_dir, lock_path, socket_path, validate_agent_id
from agenthost.protocol import (
    PROTOCOL_VERSION,
    StatusResponse,
    compare_versions,
    is_version_supported,
)


class ProbeKind(StrEnum):
    """What probing an agent's host files found."""

    LIVE = "live"
    UNREACHABLE = "unreachable"
    SOCKETLESS = "socketless"
    STALE = "stale"
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class HostProbe:
    """The result of :func:`probe`."""

    agent_id: str
    kind: ProbeKind
    status: StatusResponse | None = None
    host_pid: int = 0
    """From the lock file when the lock is held (informational)."""
    error: str | None = None
    client: AsyncClient | None = field(default=None, compare=False, repr=False)
    """A live host's open connection, on which its status was asked: whoever follows
    the host attaches on it (one connection per host, not a probe's then a
    follower's), anybody else closes it (:func:`discard`)."""


async def discard(found: HostProbe) -> None:
    """Close the connection a probe kept open, when nobody will follow on it."""
    if found.client is not None:
        await found.client.close()


def scan_hosts(home: Path) -> set[str]:
    """Agent ids with a socket or a lock file in ``<home>/hosts``."""
    found: set[str] = set()
    try:
        entries = list(os.scandir(hosts_dir(home)))
    except FileNotFoundError:
        return found
    for entry in entries:
        stem, dot, suffix = entry.name.rpartition(".")
        if not dot or suffix not in ("sock", "lock"):
            continue
        with contextlib.suppress(InvalidAgentId):
            found.add(validate_agent_id(stem))
    return found


async def probe(home: Path, agent_id: str, timeout: float) -> HostProbe:
    """Classify one agent's host (see the module doc); a live host's status included,
    with the connection it was asked on (``client``: the caller's to use or close)."""
    lock = lock_path(home, agent_id)
    sock = socket_path(home, agent_id)
    if not is_lock_held(lock):
        if sock.exists() or lock.exists():
            return HostProbe(agent_id, ProbeKind.STALE)
        return HostProbe(agent_id, ProbeKind.GONE)
    pid = lock_pid(lock)
    if not sock.exists():
        return HostProbe(agent_id, ProbeKind.SOCKETLESS, host_pid=pid)
    if is_stopped(pid, agent_id):
        # it cannot answer before it is continued: waiting the timeout for it held up
        # the daemon's start, so every other agent's watchers, by that much
        error = f"the host (pid {pid}) is stopped (SIGSTOP)"
        return HostProbe(agent_id, ProbeKind.UNREACHABLE, host_pid=pid, error=error)
    try:
        client, status = await open_probe(agent_id, socket_path=sock, timeout=timeout)
    except AgentHostError as exc:
        if is_lock_held(lock):
            return HostProbe(agent_id, ProbeKind.UNREACHABLE, host_pid=pid, error=str(exc))
        return HostProbe(agent_id, ProbeKind.STALE, error=str(exc))  # it died meanwhile
    return HostProbe(agent_id, ProbeKind.LIVE, status, status.host.pid, client=client)


def lock_pid(lock: Path) -> int:
    """The host pid a lock file names (0 if unreadable)."""
    pid = (read_lock_info(lock) or {}).get("pid")
    return pid if isinstance(pid, int) and pid > 0 else 0


def remove_stale(home: Path, agent_id: str) -> bool:
    """Remove a dead host's socket and lock file; False (nothing touched) if a host holds
    the lock or something listens on the socket.

    The lock is taken for the duration, so a host starting right now waits for us (its
    lock acquisition retries) instead of having its fresh socket deleted.
    """
    lock = lock_path(home, agent_id)
    sock = socket_path(home, agent_id)
    fd: int | None = None
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # a live host holds it
        if _listening(sock):
            return False  # e.g. a live host whose lock file was deleted: never touch it
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                    os.unlink(lock)
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _listening(path: Path) -> bool:
    """Whether something accepts connections on the socket file at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    try:
        sock.connect(os.fspath(path))
    except OSError as exc:
        # refused or absent: nobody there; EAGAIN: a full backlog, so somebody is
        return exc.errno not in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)
    else:
        return True
    finally:
        sock.close()


def wake(home: Path, agent_id: str) -> int:
    """Send SIGUSR1 to the live host of ``agent_id`` so it re-creates its socket file.

    Return the pid signalled, or 0 when the lock file does not name a process that is
    this agent's host (a pid from a dead host's file may have been reused).
    """
    lock = lock_path(home, agent_id)
    pid = lock_pid(lock)
    if not pid or not is_lock_held(lock) or not is_host_process(pid, agent_id):
        return 0
    try:
        os.kill(pid, signal.SIGUSR1)
    except (ProcessLookupError, PermissionError):
        return 0
    return pid


def is_stopped(pid: int, agent_id: str) -> bool:
    """Whether ``pid`` is ``agent_id``'s host and is stopped (SIGSTOP, SIGTSTP, a
    debugger): it answers nothing until it is continued."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    # "pid (comm) S ...": the state follows the last ")" (comm may hold one)
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"T", b"t") and is_host_process(pid, agent_id)


def is_host_process(pid: int, agent_id: str) -> bool:
    """Whether ``pid`` runs ``agenthost serve`` for ``agent_id``."""
    argv = _cmdline(pid)
    return "serve" in argv and agent_id in argv and any("agenthost" in a for a in argv)


def _cmdline(pid: int) -> list[str]:
    """The arguments of ``pid`` ([] if it is gone). Read from /proc, not with psutil:
    its import alone cost the daemon's start ~8 ms of CPU."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return split_cmdline(fh.read())
    except OSError:
        return []


def split_cmdline(data: bytes) -> list[str]:
    """The arguments in the bytes of ``/proc/PID/cmdline`` (as psutil reads them)."""
    argv = data.decode(errors="replace").rstrip("\0").split("\0")
    if len(argv) == 1 and " " in argv[0]:
        argv = argv[0].split(" ")  # a title set over argv (setproctitle): one string
    return argv


async def wait_for_socket(home: Path, agent_id: str, timeout: float) -> bool:
    """Poll until the host's socket file exists (after :func:`wake`); False on timeout."""
    sock = socket_path(home, agent_id)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not sock.exists():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(delay)  # no inotify in the stdlib: a short, bounded poll
        delay = min(delay * 2, 0.1)
    return True


@dataclass(frozen=True, slots=True)
class VersionCheck:
    """How a host's versions compare with the daemon's."""

    older: bool
    """The host runs an older agenthost or protocol than the daemon."""
    compatible: bool
    """The daemon can follow the host (same protocol major)."""


def check_versions(status: StatusResponse) -> VersionCheck:
    """Compare a host's package and protocol versions with ours."""
    host = status.host
    try:
        compatible = is_version_supported(host.protocol_version)
        older_protocol = compare_versions(host.protocol_version, PROTOCOL_VERSION) < 0
    except ProtocolError:
        return VersionCheck(older=False, compatible=False)
    return VersionCheck(older_protocol or package_older(host.version, __version__), compatible)


def package_older(theirs: str, ours: str) -> bool:
    """Whether package version ``theirs`` is older than ``ours`` (numeric release parts
    compared; anything unparsable is not called older)."""

    def release(text: str) -> tuple[int, ...] | None:
        parts = []
        for piece in text.split("+")[0].split("."):
            digits = ""
            for ch in piece:
                if not ch.isdigit():
                    break
                digits += ch
            if not digits:
                break
            parts.append(int(digits))
        return tuple(parts) or None

    a, b = release(theirs), release(ours)
    return a is not None and b is not None and a < b


def end_from_log(path: Path, limit: int = 256 << 10) -> dict[str, object] | None:
    """What a host's log says about its agent's end in its latest run: ``exit_code``
    and ``signal`` (and ``stop_requested`` when true) of the last ``agent.exited`` line
    after the last ``host.started``. None when it says nothing, or cannot be trusted
    (another user's, writable by others: it decides whether a stop was asked for)."""
    try:
        with os.fdopen(open_checked(path), "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - limit))
            data = fh.read()
    except (OSError, UntrustedFile):
        return None
    for line in reversed(data.splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        event = obj.get("event")
        if event == "host.started":
            return None  # this run's end was not logged
        if event == "agent.exited":
            end = {"exit_code": obj.get("exit_code"), "signal": obj.get("signal")}
            if obj.get("stop_requested") is True:
                end["stop_requested"] = True
            return end
    return None
