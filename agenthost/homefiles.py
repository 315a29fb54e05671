"""Files of the home that decide something are obeyed only when they are the user's own.

Whoever can write ``config.toml`` decides what the approval policy allows and which
command a notice runs; whoever can write ``tokens.json``, the session secret or the link
key gets into the web gateway or approves requests; whoever can write the registry
decides what the daemon restarts. A home that was once writable by others (made under
umask 000, a shared directory, a mistyped ``--home``) may hold such a file planted by
another user, and making the home private afterwards does not remove it. So every
reader of such a file opens it here, and it is refused unless it is:

- a regular file (not a symbolic link: a link planted in place of ``config.toml`` is
  the same attack; not a directory, a FIFO or a device),
- owned by the user (the process's effective uid),
- not writable by its group or others (a secret: not readable by them either),
- in a directory that passes the same test (else its entries can be swapped).

:func:`problem` is the decision: sans-IO, a stat result and a uid in, what is wrong
out. :func:`open_checked` opens the file without following a symbolic link
(``O_NOFOLLOW``) relative to its directory opened first, and decides on what it opened
(``fstat`` of both descriptors): no window between the check and the use. The error,
:class:`~agenthost.errors.UntrustedFile`, names the file, what is wrong and how to fix
it, e.g. ``<home>/config.toml is owned by uid 65534, not you (uid 0): remove it or
chown it``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agenthost.errors import UntrustedFile

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs the CLI's fast path ~3 ms to import)
    from typing import Final

_OTHERS_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH
_OTHERS_READ: Final = stat.S_IRGRP | stat.S_IROTH

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)

SYMLINK_PROBLEM: Final = (
    "is a symbolic link, not the file itself: put the file in its place (or remove the link)"
)


def problem(
    st: os.stat_result, euid: int, *, secret: bool = False, directory: bool = False
) -> str | None:
    """What makes a file of the home (its ``st``, from ``lstat`` or ``fstat``) unfit to
    be obeyed by user ``euid``, as the rest of a sentence that starts with its path and
    ends with how to fix it; None when it may be used.

    "Others" are its group and everybody else (the mode says which).
    ``secret``: its content must not leak either (no read bit for group or others).
    ``directory``: a directory is expected (the one holding such files).
    """
    mode = st.st_mode
    if directory:
        if not stat.S_ISDIR(mode):
            return "is not a directory: remove it"
    elif not stat.S_ISREG(mode):
        if stat.S_ISLNK(mode):
            return SYMLINK_PROBLEM
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        return f"is {kind}, not a regular file: remove it"
    if st.st_uid != euid:
        return f"is owned by uid {st.st_uid}, not you (uid {euid}): remove it or chown it"
    perms = stat.S_IMODE(mode)
    if perms & _OTHERS_WRITE:
        return f"is writable by others (mode {perms:04o}): chmod go-w it"
    if secret and perms & _OTHERS_READ:
        return f"is readable by others (mode {perms:04o}): chmod 600 it"
    return None


def check(path: Path, st: os.stat_result, *, secret: bool = False, directory: bool = False) -> None:
    """Raise UntrustedFile naming ``path`` if :func:`problem` finds one (for the
    process's effective uid)."""
    found = problem(st, os.geteuid(), secret=secret, directory=directory)
    if found is not None:
        raise UntrustedFile(f"{path} {found}")


def open_checked(
    path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, secret: bool = False
) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``O_CREAT`` makes it 0600) once
    the file and its directory passed :func:`problem`; the caller closes it.

    The directory is opened first and checked, then the file is opened relative to it
    without following a symbolic link (``O_NOFOLLOW``) nor blocking on a FIFO
    (``O_NONBLOCK``, a no-op for regular files), and checked as opened. Raise
    UntrustedFile; any other OSError (FileNotFoundError for a missing file or
    directory) is the caller's to translate.
    """
    path = Path(path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        check(path.parent, os.fstat(dir_fd), directory=True)
        try:
            fd = os.open(
                path.name,
                flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link in the file's place
                raise UntrustedFile(f"{path} {SYMLINK_PROBLEM}") from None
            raise
    finally:
        os.close(dir_fd)
    try:
        check(path, os.fstat(fd), secret=secret)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_checked(path: Path, limit: int, *, secret: bool = False) -> tuple[bytes, os.stat_result]:
    """At most ``limit + 1`` bytes of ``path`` (so a caller can tell "too large") and
    the stat of the file they were read from, opened with :func:`open_checked`."""
    fd = open_checked(path, secret=secret)
    try:
        st = os.fstat(fd)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def check_beside(path: Path, suffixes: tuple[str, ...]) -> None:
    """Check the files that a library opens beside ``path`` by name (SQLite's
    ``-wal``, ``-shm``, ``-journal``), those that exist, with ``lstat``.

    Only by name, as the library opens them; that is enough once ``path``'s directory
    passed :func:`open_checked`: nobody else can add or replace an entry in it.
    """
    for suffix in suffixes:
        side = path.with_name(path.name + suffix)
        try:
            st = os.lstat(side)
        except FileNotFoundError:
            continue
        check(side, st)
