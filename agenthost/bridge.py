"""``agenthost bridge``: join this process's stdin and stdout to a local host's (or the
daemon's) socket, byte for byte, for use as an SSH remote command.

A client on another machine runs ``ssh HOST agenthost bridge ID`` and speaks the
protocol through it (docs/remote.md). The bridge connects (checking, as every client
does, that the socket is served by this user), then copies in both directions without
reading what passes: garbage in gets the host's error answers, like on any connection.
It ends when its stdin ends, attached or not (a dropped SSH link must leave nothing
behind), when the socket closes, or when its stdout is gone. Nothing but the socket's
bytes is ever written to stdout. A plain ``poll`` loop: no event loop to start for
every remote connection.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Final

from agenthost.errors import AgentHostError, Forbidden
from agenthost.wire.peer import check_server_socket

CHUNK: Final = 1 << 16
CONNECT_TIMEOUT: Final = 5.0
_GONE: Final = select.POLLHUP | select.POLLERR | select.POLLNVAL


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
    """Copy ``stdin`` to ``sock`` and ``sock`` to ``stdout`` until one side ends; return
    which ended (``"stdin"``, ``"socket"``, ``"stdout"``). Closes nothing."""
    poller = select.poll()
    poller.register(stdin, select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    if stdout != stdin:
        poller.register(stdout, 0)  # only its hang-up: the reader went away
    while True:
        for fd, mask in poller.poll():
            if fd == stdout and fd != stdin:
                if mask & _GONE:
                    return "stdout"
            elif fd == stdin:
                data = _read(stdin, mask)
                if not data:
                    return "stdin"
                try:
                    sock.sendall(data)
                except OSError:
                    return "socket"
            else:
                try:
                    data = sock.recv(CHUNK)
                except OSError:
                    data = b""
                if not data:
                    return "socket"
                if not _write_all(stdout, data):
                    return "stdout"


def _read(fd: int, mask: int) -> bytes:
    if mask & select.POLLNVAL:
        return b""
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
            sock.close()
