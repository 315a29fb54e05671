"""The pseudo-terminal of a terminal agent (``--agent pty``).

The host opens the pair; the agent gets the slave side as its stdin, stdout, stderr
and controlling terminal, in a session of its own; the host keeps the master side
and reads what the agent paints, writes what clients type, and sets the size.

No Python code runs between fork and exec (see :mod:`agenthost.host.process`), so
the controlling terminal cannot come from ``os.login_tty`` in a ``preexec_fn``: it
comes from util-linux ``setsid --ctty``, which calls ``setsid()`` and
``ioctl(0, TIOCSCTTY)``, then execs the agent keeping its pid. It makes the session
without a fork only when it is not a process-group leader, so the agent is spawned
without Popen's ``start_new_session``.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import struct
import termios
from typing import Final

_IUTF8: Final = getattr(termios, "IUTF8", 0o40000)  # Linux's value; Python 3.12 names it


@functools.cache
def controlling_terminal_wrapper(search_path: str) -> tuple[str, ...] | None:
    """The argv prefix that gives the agent its session and controlling terminal
    (``setsid`` found in ``search_path``: system directories, never the user's PATH),
    or None when there is none."""
    setsid = shutil.which("setsid", path=search_path)
    return None if setsid is None else (setsid, "--ctty", "--")


def set_size(fd: int, cols: int, rows: int) -> None:
    """Set the terminal's size in cells (raise OSError)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def open_pty(cols: int, rows: int) -> tuple[int, int]:
    """A new pseudo-terminal of ``cols`` x ``rows``: ``(master, slave)``, both
    non-inheritable, the master non-blocking. Line editing knows UTF-8 (``iutf8``:
    a backspace erases a whole character)."""
    master, slave = os.openpty()
    try:
        set_size(master, cols, rows)
        attrs = termios.tcgetattr(slave)
        attrs[0] |= _IUTF8
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        os.set_blocking(master, False)
    except OSError:
        os.close(master)
        os.close(slave)
        raise
    return master, slave
