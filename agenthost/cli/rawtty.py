"""The local terminal for a pass-through: raw mode, its size, writing to it.

:class:`RawMode` puts the terminal in raw mode (every key read as it is typed, no
echo, no signals from Ctrl-C, no output processing) and gives the settings back on
every way out of its block: a return, an exception, and the signals that end the
process politely (the caller turns SIGTERM and SIGHUP into a return).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import termios
import tty
from typing import Any

from agenthost.errors import AgentHostError


class RawMode:
    """Raw mode on the terminal ``fd`` for a ``with`` block."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> RawMode:
        try:
            self._saved = termios.tcgetattr(self.fd)
            tty.setraw(self.fd, termios.TCSANOW)
        except termios.error as exc:
            raise AgentHostError(f"cannot put the terminal in raw mode: {exc}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """The settings from before (again: harmless); a terminal that is gone (a
        hangup) is left as it is."""
        if self._saved is not None:
            # TCSADRAIN: what was written is shown before the echo comes back
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


def terminal_size(fd: int) -> tuple[int, int] | None:
    """``(cols, rows)`` of the terminal ``fd``, None when it does not say (0x0)."""
    try:
        raw = fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None
    rows, cols, _, _ = struct.unpack("HHHH", raw)
    return (cols, rows) if cols and rows else None


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a blocking terminal). Raise OSError when the
    terminal is gone."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except BlockingIOError:  # someone else made it non-blocking: wait for room
            _wait_writable(fd)
            continue
        view = view[written:]


def _wait_writable(fd: int) -> None:
    import select

    try:
        select.select([], [fd], [], 1.0)
    except OSError as exc:
        if exc.errno != errno.EINTR:
            raise
