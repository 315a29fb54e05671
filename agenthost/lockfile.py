"""The host lock file: an ``flock`` held for the life of a host proves it is alive.

A pid in a file can be stale or reused, and a zombie passes ``kill -0``; a lock held
by an open file description is released by the kernel the moment its process dies, so
"lock held" means "host alive". A socket whose lock is free is stale and may be
removed; a socket whose lock is held is never touched.

The file also carries informational JSON (host pid, agent pid, start time) for humans
and for cleaning up after a crash; readers must not trust it for liveness.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from pathlib import Path

from agenthost.errors import ConfigError, HostAlreadyRunning
from agenthost.homefiles import open_checked

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs `agenthost list`'s fast path ~3 ms to import)
    from typing import Any

_ACQUIRE_ATTEMPTS = 20
_ACQUIRE_BACKOFF = 0.01  # a probe holds a shared lock for microseconds: retry briefly


class HostLock:
    """An exclusive, non-blocking lock on ``path``, re-created if it was unlinked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise HostAlreadyRunning (with the holder's pid if known);
        UntrustedFile for a lock file that is not the user's own."""
        for attempt in range(_ACQUIRE_ATTEMPTS):
            try:
                # another user's lock file (planted while the home was open to them) is
                # refused: whoever holds a descriptor of it decides whether we may run
                fd = open_checked(self.path, os.O_RDWR | os.O_CREAT)
            except OSError as exc:
                raise ConfigError(f"cannot open lock file {self.path}: {exc.strerror}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise ConfigError(f"cannot lock {self.path}: {exc.strerror}") from exc
                if attempt + 1 < _ACQUIRE_ATTEMPTS:
                    time.sleep(_ACQUIRE_BACKOFF)
                    continue
                info = read_lock_info(self.path) or {}
                pid = info.get("pid")
                raise HostAlreadyRunning(
                    "a host for this agent is already running"
                    + (f" (pid {pid})" if isinstance(pid, int) else ""),
                    hint="stop it first, or choose another --agent-id",
                ) from None
            # The previous holder may have unlinked the file between our open and our
            # flock: then we hold a lock on an orphan inode. Check and start over.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return
            os.close(fd)
        raise HostAlreadyRunning(f"could not take the lock {self.path}: it keeps changing")

    def write_info(self, info: dict[str, Any]) -> None:
        """Replace the informational content of the lock file."""
        if self._fd is None:
            return
        data = (json.dumps(info, sort_keys=True) + "\n").encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        """Unlink the file while still holding it, then drop the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None


def is_lock_held(path: Path) -> bool:
    """Whether a live process holds the lock at ``path`` (False if there is no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: assume alive, never remove a live host's socket
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def read_lock_info(path: Path) -> dict[str, Any] | None:
    """The JSON a host wrote into its lock file, or None if absent or unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(65536)
        obj = json.loads(data)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None
