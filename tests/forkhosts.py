"""Hosts forked by a real host factory, for the suites that run on both kinds of host.

The test process runs event loops, so it cannot fork a factory itself: it execs one
(``python -m agenthost.hostfactory --fd N``) and speaks the factory's messages over a
blocking socket pair. :class:`ForkedProc` stands where a :class:`subprocess.Popen` of
an exec'd host stands in :class:`hosttools.HostProc` (pid, poll, wait, kill): the host
is the factory's child, not ours, so its exit status comes from the factory.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from agenthost.hostfactory.messages import (
    MAX_MESSAGE,
    Exited,
    Order,
    Refused,
    Reply,
    Started,
    decode_reply,
    encode,
)


class ExecdFactory:
    """A host factory started by exec, and the test's end of its socket."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agenthost.hostfactory", "--fd", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self.sock = ours
        self.exits: dict[int, int] = {}
        self._lock = threading.RLock()  # tests start hosts from thread pools too

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, order: Order, timeout: float = 30.0) -> int:
        """Send ``order``; the forked host's pid."""
        with self._lock:
            return self._start(order, timeout)

    def _start(self, order: Order, timeout: float) -> int:
        self.sock.sendall(encode(order))
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline - time.monotonic())
            if isinstance(message, Started):
                return message.pid
            if isinstance(message, Refused):
                raise RuntimeError(f"the factory refused: {message.reason}")
            if message is None:
                raise TimeoutError("the factory did not answer")

    def poll_exit(self, pid: int, timeout: float = 0.0) -> int | None:
        """The exit status of ``pid`` if the factory reported it within ``timeout``."""
        with self._lock:
            return self._poll_exit(pid, timeout)

    def _poll_exit(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while pid not in self.exits:
            if self._next(max(0.0, deadline - time.monotonic())) is None:
                return None
        return self.exits[pid]

    def _next(self, timeout: float) -> Reply | None:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return None
        data = self.sock.recv(MAX_MESSAGE + 1)
        if not data:
            raise EOFError("the factory has ended")
        message = decode_reply(data)
        if isinstance(message, Exited):
            self.exits[message.pid] = message.status
        return message

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(10)


class ForkedProc:
    """What a test needs of a host's process, for a host the factory forked."""

    def __init__(self, factory: ExecdFactory, pid: int) -> None:
        self.factory = factory
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["<forked by the host factory>"]

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.factory.poll_exit(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self.factory.poll_exit(self.pid, 30.0 if timeout is None else timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 30.0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def fork_host(
    factory: ExecdFactory, argv: list[str], env: dict[str, str], log: str, cwd: str | None = None
) -> ForkedProc:
    """Have ``factory`` fork ``agenthost serve ARGV[5:]`` (``argv`` as for exec:
    ``python -m agenthost serve ...``)."""
    serve_at = argv.index("serve")
    order = Order(
        argv=tuple(argv[serve_at + 1 :]),
        env=env,
        cwd=cwd or os.getcwd(),
        log=log,
        title=" ".join(argv),
    )
    return ForkedProc(factory, factory.start(order))
