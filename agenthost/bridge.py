"""``agenthost bridge``: join this process's stdin and stdout to a local host's (or the
daemon's) socket, byte for byte, for use as an SSH remote command.

A client on another machine runs ``ssh HOST agenthost bridge ID`` and speaks the
protocol through it (docs/remote.md). The bridge connects (checking, as every client
does, that the socket is served by this user), then copies in both directions without
reading what passes: garbage in gets the host's error answers, like on any connection.

At stdin's end it half-closes its side of the socket (``shutdown(SHUT_WR)``), as the
client would have: what was asked is still answered, and the service closes a
connection with nothing left to answer and no stream going, so ``printf ... | ssh HOST
agenthost bridge ID`` gets its answers and an attach piped in streams on. It ends when
the socket closes, or when its stdout is gone: it polls stdout for the hang-up
(``POLLERR`` on a pipe whose reader went, ``POLLHUP`` on a closed socket or terminal),
so a dropped SSH link leaves nothing behind even while an attach is idle and nothing is
written that would fail. Nothing but the socket's bytes is ever written to stdout. One
plain thread copies stdin: no event loop to start for every remote connection.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from agenthost.errors import AgentHostError, Forbidden
from agenthost.wire.peer import check_server_socket

CHUNK: Final = 1 << 16
CONNECT_TIMEOUT: Final = 5.0


def connect_local(
    path: Path,
    service: str,
    not_found: Callable[[OSError | TimeoutError], AgentHostError],
    *,
    timeout: float = CONNECT_TIMEOUT,
) -> socket.socket:
    """A blocking connection to the ``service`` socket at ``path``, its server checked.

    Raise Forbidden (no permission, or a server of another user), or what
    ``not_found`` makes of the OSError of a failed connect (nobody listens).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)  # a full listen backlog makes connect wait: not forever
    try:
        sock.connect(str(path))
    except PermissionError as exc:
        sock.close()
        raise Forbidden(f"not allowed to connect to {path}") from exc
    except (OSError, TimeoutError) as exc:
        sock.close()
        raise not_found(exc) from exc
    try:
        check_server_socket(sock, path, service)
    except Forbidden:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def relay(sock: socket.socket, stdin: int = 0, stdout: int = 1) -> str:
    """Copy ``stdin`` to ``sock`` (half-closing ``sock`` at stdin's end) and ``sock`` to
    ``stdout``, until the socket closes or stdout is gone; return which (``"socket"``,
    ``"stdout"``). Closes nothing.

    stdin is copied by a thread of its own, blocking on its side: a side that does not
    read (a client pipelining requests, a host pausing its reads) never holds up the
    other direction, and nothing has to change the blocking mode of the stdio we were
    given.
    """
    # a daemon thread: when the relay ends it may still be blocked reading stdin, and is
    # left to the process's exit
    threading.Thread(target=_upstream, args=(stdin, sock), name="bridge-stdin", daemon=True).start()
    return _downstream(sock, stdout)


def _upstream(stdin: int, sock: socket.socket) -> None:
    try:
        while data := _read(stdin):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)  # the client is done asking: the answers still come
    except OSError:
        pass  # the socket closed: the other direction reads its end


def _downstream(sock: socket.socket, stdout: int) -> str:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    # no event asked of stdout: poll reports only its hang-up (POLLERR, POLLHUP; POLLNVAL
    # when it is not open), which nothing else would reveal while no bytes come
    poller.register(stdout, 0)
    while True:
        ready = dict(poller.poll())
        if stdout in ready:
            return "stdout"
        try:
            data = sock.recv(CHUNK)
        except OSError:
            return "socket"
        if not data:
            return "socket"
        if not _write_all(stdout, data):
            return "stdout"


def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:  # a non-blocking stdin (as sshd may hand over)
            select.select([fd], [], [])
        except OSError:
            return b""


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # a non-blocking stdout: wait until it takes more
            select.select([], [fd], [])
        except OSError:
            return False
    return True


def bridge(
    path: Path, service: str, not_found: Callable[[OSError | TimeoutError], AgentHostError]
) -> str:
    """Connect to ``path`` and relay stdio until one side ends (see the module)."""
    sock = connect_local(path, service, not_found)
    try:
        return relay(sock)
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the stdin thread if a send blocks it
        sock.close()
