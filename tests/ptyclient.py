"""A person at a terminal, for tests: run a command in a real pseudo-terminal of a
given size (its session's controlling terminal, as a terminal window gives a shell),
type keys, read what it writes with a deadline, resize it.

Everything the command writes is kept (``output``) and painted on an emulator of the
terminal's size (``screen``), so a test can compare what a person would see.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from typing import Any

from agenthost.terminal.screen import Screen

DEADLINE = 30.0


def set_size(fd: int, cols: int, rows: int) -> None:
    """Set a terminal's size (the kernel signals SIGWINCH to its foreground group)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class PtyClient:
    """``argv`` running in a fresh pseudo-terminal of ``cols`` x ``rows``."""

    def __init__(
        self,
        argv: Sequence[str],
        cols: int = 80,
        rows: int = 24,
        env: dict[str, str] | None = None,
    ) -> None:
        self.master, self.slave = os.openpty()
        set_size(self.master, cols, rows)
        self.cols, self.rows = cols, rows
        # setsid --ctty: a session of its own whose controlling terminal is the slave,
        # so the kernel's SIGWINCH and hangup reach it as they reach a shell's job
        self.process = subprocess.Popen(
            ["setsid", "--ctty", "--", *argv],
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            env={**os.environ, "TERM": "xterm-256color", **(env or {})},
            close_fds=True,
        )
        # the slave stays open here too: its settings can be read (``attrs``), and the
        # command's exit does not end the reads with EIO before they drained
        os.set_blocking(self.master, False)
        self.output = bytearray()
        self.screen = Screen(cols, rows)

    def __enter__(self) -> PtyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the person's side ---------------------------------------------------------------

    def write(self, data: bytes | str) -> None:
        """Type ``data`` (bytes as a terminal sends them for keys)."""
        if isinstance(data, str):
            data = data.encode()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view) :]
            except BlockingIOError:
                select.select([], [self.master], [], 1.0)

    def resize(self, cols: int, rows: int) -> None:
        """Resize the terminal, as a window is resized."""
        self.pump(0)  # what was written at the old size is painted at it
        set_size(self.master, cols, rows)
        self.cols, self.rows = cols, rows
        self.screen.resize(cols, rows)

    def attrs(self) -> list[Any]:
        """The terminal's settings (what ``stty -a`` shows), from the slave side."""
        return termios.tcgetattr(self.slave)

    # --- reading ----------------------------------------------------------------------------

    def pump(self, timeout: float) -> bool:
        """Read what is there within ``timeout`` seconds; whether anything came."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        got = False
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except (BlockingIOError, OSError):
                return got
            if not data:
                return got
            got = True
            self.output += data
            self.screen.feed(data)

    def wait_for(
        self, predicate: Callable[[PtyClient], object], timeout: float = DEADLINE, what: str = ""
    ) -> None:
        """Read until ``predicate(self)`` holds; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what or predicate}; "
                    f"screen:\n" + "\n".join(self.screen.lines()) + f"\nlast bytes: "
                    f"{bytes(self.output[-400:])!r}"
                )
            self.pump(min(left, 0.5))

    def wait_output(self, needle: bytes, timeout: float = DEADLINE) -> None:
        """Read until the output holds ``needle``."""
        self.wait_for(lambda c: needle in c.output, timeout, repr(needle))

    def wait_screen(self, text: str, timeout: float = DEADLINE) -> None:
        """Read until the screen shows ``text`` on one of its rows."""
        self.wait_for(lambda c: any(text in line for line in c.screen.lines()), timeout, text)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        """Read until the command exited (draining what it wrote); its status."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.process.args} did not exit in {timeout}s")
            self.pump(0.05)
        while self.pump(0.05):
            pass
        return self.process.returncode

    def close(self) -> None:
        """Kill the command if it runs; close the terminal."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)
