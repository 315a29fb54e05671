"""Run a real TUI in a real pseudo-terminal, for e2e tests that need no agenthost host.

:class:`PtyProcess` starts a program in its own session with a PTY's slave as its
controlling terminal (as a terminal emulator or tmux does), reads everything it writes
from the master in a thread, and lets a test type keys and wait, with a deadline, for
text to appear on the screen.

The screen is approximated, not emulated: :func:`visible_text` removes escape sequences
and all whitespace, so a needle is matched whatever the cursor moves between its words
(TUIs such as Claude Code's redraw with cursor addressing, not with spaces). That is
enough to know a prompt is shown; which tool ran is checked on the fake model API's
record, which is exact.

It answers the terminal queries TUIs send at start-up (device attributes, cursor
position, colours), as a terminal emulator would: some TUIs wait for them.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# CSI ... final, OSC ... (BEL | ST), DCS/APC/PM/SOS ... ST, and two-byte escapes.
_ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"
    rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    rb"|\x1b[P_^X][^\x1b]*\x1b\\"
    rb"|\x1b[()*+][0-~]"
    rb"|\x1b[ -/]*[0-~]"
)
_WHITESPACE = re.compile(r"\s+")

# Terminal queries and the answers xterm gives (what a TUI may wait for).
_QUERIES: tuple[tuple[bytes, bytes], ...] = (
    (b"\x1b[c", b"\x1b[?62;22c"),  # primary device attributes
    (b"\x1b[0c", b"\x1b[?62;22c"),
    (b"\x1b[>c", b"\x1b[>41;380;0c"),  # secondary device attributes
    (b"\x1b[>0q", b"\x1bP>|xterm(380)\x1b\\"),  # XTVERSION
    (b"\x1b]10;?\x07", b"\x1b]10;rgb:ffff/ffff/ffff\x07"),  # foreground colour
    (b"\x1b]11;?\x07", b"\x1b]11;rgb:0000/0000/0000\x07"),  # background colour
    (b"\x1b]10;?\x1b\\", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
    (b"\x1b]11;?\x1b\\", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),
    (b"\x1b[?u", b"\x1b[?0u"),  # kitty keyboard protocol flags
)
_CPR = b"\x1b[6n"  # cursor position report: answered "row 1, col 1"


def visible_text(data: bytes) -> str:
    """``data`` without escape sequences and without any whitespace (see module doc)."""
    text = _ESCAPES.sub(b"", data).decode("utf-8", "replace")
    return _WHITESPACE.sub("", text)


class PtyProcess:
    """One program on a fresh PTY of ``cols`` x ``rows``. A context manager that kills
    the program's whole process group on exit."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path | str,
        *,
        cols: int = 120,
        rows: int = 40,
    ) -> None:
        self.argv = list(argv)
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self._cond = threading.Condition()
        self.output = bytearray()
        self._scanned = 0  # how far the query answering has looked
        self.eof = False
        full_env = {"TERM": "xterm-256color", "COLORTERM": "truecolor", **env}
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=str(cwd),
                env=full_env,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                # the slave becomes the controlling terminal of the new session
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
            )
        finally:
            os.close(slave)
        self._reader = threading.Thread(target=self._read, daemon=True, name="pty-reader")
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every slave descriptor is closed
                data = b""
            with self._cond:
                if not data:
                    self.eof = True
                    self._cond.notify_all()
                    return
                self.output += data
                self._answer_queries()
                self._cond.notify_all()

    def _answer_queries(self) -> None:
        # look a little behind the last scan: a query may straddle two reads
        start = max(0, self._scanned - 16)
        window = bytes(self.output[start:])
        self._scanned = len(self.output)
        answers = [
            (window.find(query, 0), answer)
            for query, answer in _QUERIES
            for _ in range(window.count(query))
        ]
        answers += [(0, b"\x1b[1;1R")] * window.count(_CPR)
        for _, answer in sorted(answers, key=lambda pair: pair[0]):
            try:
                os.write(self.master, answer)
            except OSError:
                return

    # -- input

    def write(self, data: bytes | str) -> None:
        """Type ``data`` (keys, text) into the terminal."""
        raw = data.encode() if isinstance(data, str) else data
        os.write(self.master, raw)

    def type_line(self, text: str) -> None:
        """Type ``text``, then Enter (a separate write, as a person's keypress is: TUIs
        treat one write holding text and a CR as a paste)."""
        self.write(text)
        self.wait_for(text[-20:], timeout=15)
        self.write(b"\r")

    # -- output

    def text(self) -> str:
        """Everything shown so far, as :func:`visible_text`."""
        with self._cond:
            return visible_text(bytes(self.output))

    def mark(self) -> int:
        """The current end of the output, to wait for text shown after this point."""
        with self._cond:
            return len(self.output)

    def wait_for(self, needle: str, timeout: float = 20.0, since: int = 0) -> None:
        """Wait until ``needle`` (its whitespace ignored) is shown after output offset
        ``since``; TimeoutError (with the tail of the screen text) at the deadline."""
        want = _WHITESPACE.sub("", needle)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if want in visible_text(bytes(self.output[since:])):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.eof:
                    tail = visible_text(bytes(self.output[since:]))[-1500:]
                    what = "exited" if self.eof else "timed out"
                    raise TimeoutError(f"{what} waiting for {needle!r}; shown: {tail}")
                self._cond.wait(remaining)

    # -- lifetime

    def kill(self) -> None:
        """SIGKILL the program's process group (idempotent), reap it, close the PTY."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what the group left behind
        except ProcessLookupError:
            pass
        self._reader.join(timeout=5)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def __enter__(self) -> PtyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
