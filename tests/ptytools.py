"""A small driver of real programs in a real pseudo-terminal, for the terminal tests
of issue 30: spawn a program in its own session with the PTY's slave as its
controlling terminal (``setsid --ctty``), send keys, read with a deadline, resize with
TIOCSWINSZ, and record every chunk read (and every resize) in order, as the host's
``terminal`` and ``terminal_size`` events would carry them.

A :class:`Recording` is saved as JSON (tests/fixtures/tty/*.json): the argv, the first
size, the chunks (standard base64 strings, or ``[cols, rows]`` for a resize) and the
marks (chunk counts after which a test compares screens).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import platform
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termoracle import Chunk

DEADLINE = 20.0
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}
"""The number of read(2) in /proc/PID/syscall, per machine."""
TTY_FIXTURES = Path(__file__).parent / "fixtures" / "tty"


@dataclass
class Recording:
    """What a program wrote to its terminal, in order, with the resizes between."""

    name: str
    argv: list[str]
    cols: int
    rows: int
    chunks: list[Chunk] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)
    """Chunk counts at which the screens are compared (the end is always one)."""

    def prefixes(self) -> list[list[Chunk]]:
        """The chunks up to each mark, then all of them."""
        ends = sorted({*self.marks, len(self.chunks)})
        return [self.chunks[:end] for end in ends]

    def size_after(self, count: int) -> tuple[int, int]:
        """The terminal's size after the first ``count`` chunks."""
        size = (self.cols, self.rows)
        for chunk in self.chunks[:count]:
            if isinstance(chunk, tuple):
                size = chunk
        return size

    def data(self) -> bytes:
        """All the bytes written, resizes left out."""
        return b"".join(c for c in self.chunks if isinstance(c, bytes))

    def to_json(self) -> str:
        items = [
            list(c) if isinstance(c, tuple) else base64.b64encode(c).decode() for c in self.chunks
        ]
        return json.dumps(
            {
                "name": self.name,
                "argv": self.argv,
                "cols": self.cols,
                "rows": self.rows,
                "marks": self.marks,
                "chunks": items,
            },
            indent=0,
        )

    @classmethod
    def from_json(cls, text: str) -> Recording:
        raw = json.loads(text)
        chunks: list[Chunk] = [
            (int(c[0]), int(c[1])) if isinstance(c, list) else base64.b64decode(c)
            for c in raw["chunks"]
        ]
        return cls(raw["name"], raw["argv"], raw["cols"], raw["rows"], chunks, raw["marks"])

    def save(self, directory: Path = TTY_FIXTURES) -> Path:
        path = directory / f"{self.name}.json"
        path.write_text(self.to_json())
        return path


def load_recordings(directory: Path = TTY_FIXTURES) -> list[Recording]:
    """Every recording kept in ``directory``, by name."""
    return [Recording.from_json(p.read_text()) for p in sorted(directory.glob("*.json"))]


def set_size(fd: int, cols: int, rows: int) -> None:
    """Set the terminal size of the PTY ``fd`` (the kernel signals SIGWINCH to the
    foreground process group when it changes)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class PtyProgram:
    """A program running in a fresh PTY, its output recorded.

    Use as a context manager: on exit the program's process group is killed and reaped.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        cols: int = 80,
        rows: int = 24,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.master, slave = os.openpty()
        set_size(self.master, cols, rows)
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            **(env or {}),
        }
        # setsid --ctty: a new session whose controlling terminal is the slave (stdin),
        # as the host runs a terminal agent.
        self.process = subprocess.Popen(
            ["setsid", "--ctty", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=environment,
            cwd=cwd,
            close_fds=True,
        )
        self.tty_name = os.ttyname(slave)
        """The terminal's device (/dev/pts/N): its settings are read there."""
        os.close(slave)
        self.recording = Recording(name, list(argv), cols, rows)
        self._since_mark = bytearray()
        self.eof = False

    def __enter__(self) -> PtyProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill what is left of the program and close the PTY."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=DEADLINE)
        os.close(self.master)

    def send(self, keys: bytes | str) -> None:
        """Type ``keys`` (bytes as a terminal sends them)."""
        data = keys.encode() if isinstance(keys, str) else keys
        while data:
            written = os.write(self.master, data)
            data = data[written:]

    def wait_reading(self, timeout: float = DEADLINE) -> None:
        """Wait until the program is blocked reading its terminal (the read system call
        on a descriptor of the terminal, from /proc/PID/syscall: less reads /dev/tty).

        A resize's SIGWINCH that comes between a program's last check of its signals
        and its read is acted on only at the next key (less does this): a program that
        waits in its read takes the signal at once."""
        number = READ_SYSCALL.get(platform.machine())
        if number is None:  # (another architecture: no wait, the race stays)
            return
        path = f"/proc/{self.process.pid}/syscall"
        deadline = time.monotonic() + timeout
        while True:
            try:
                fields = Path(path).read_text().split()
            except OSError:  # it exited
                return
            if fields and fields[0] == number and self._is_terminal(int(fields[1], 16)):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.recording.name}: never waited for a key ({fields})")
            time.sleep(0.01)  # (polls /proc: the kernel has no event for it)

    def _is_terminal(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/{self.process.pid}/fd/{fd}") == self.tty_name
        except OSError:
            return False

    def resize(self, cols: int, rows: int) -> None:
        """Resize the terminal, recorded at this point of the stream."""
        set_size(self.master, cols, rows)
        self.recording.chunks.append((cols, rows))

    @property
    def output(self) -> bytes:
        """Everything the program wrote so far."""
        return b"".join(c for c in self.recording.chunks if isinstance(c, bytes))

    def attrs(self) -> list[Any]:
        """The terminal's settings now (what ``stty -a`` shows)."""
        fd = os.open(self.tty_name, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            return termios.tcgetattr(fd)
        finally:
            os.close(fd)

    def read_until(
        self, predicate: Callable[[], object], timeout: float = DEADLINE, what: str = ""
    ) -> None:
        """Read until ``predicate()`` holds; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                tail = self.output[-400:]
                raise AssertionError(f"{self.recording.name}: no {what or predicate} in {tail!r}")
            if not self._read_some(min(remaining, 0.5)) and not predicate():
                raise AssertionError(f"{self.recording.name} exited before {what or predicate}")

    def _read_some(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False at EOF."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the slave side is closed (the program exited)
            data = b""
        if not data:
            self.eof = True
            return False
        self.recording.chunks.append(data)
        self._since_mark += data
        return True

    def expect(self, pattern: bytes | str, timeout: float = DEADLINE) -> re.Match[bytes]:
        """Read until ``pattern`` (a regular expression) matches the output since the
        last :meth:`mark` or match; fail after ``timeout``."""
        regex = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self._since_mark)
            if match:
                del self._since_mark[: match.end()]
                return match
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.eof:
                tail = bytes(self._since_mark[-400:])
                raise AssertionError(f"{self.recording.name}: no {regex.pattern!r} in {tail!r}")
            if not self._read_some(min(remaining, 0.5)):
                continue

    def mark(self) -> None:
        """Compare screens at this point of the recording."""
        self.recording.marks.append(len(self.recording.chunks))
        self._since_mark.clear()

    def drain_to_exit(self, timeout: float = DEADLINE) -> int:
        """Read until the program has exited and its output is drained; its exit code."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.recording.name}: did not exit")
            self._read_some(0.5)
        return self.process.wait(timeout=DEADLINE)
