"""``agenthost bridge``: join this process's stdin and stdout to a local host's (or the
daemon's) socket, byte for byte, for use as an SSH remote command.

A client on another machine runs ``ssh HOST agenthost bridge ID`` and speaks the
protocol through it (docs/remote.md). The bridge connects (checking, as every client
does, that the socket is served by this user), then copies in both directions without
reading what passes: garbage in gets the host's error answers, like on any connection.
It ends when its stdin ends, attached or not (a dropped SSH link must leave nothing
behind), when the socket closes, or when its stdout is gone. Nothing but the socket's
bytes is ever written to stdout. Two plain threads: no event loop to start for every
remote connection.
"""

from __future__ import annotations

import contextlib
import os
import queue
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
    """Copy ``stdin`` to ``sock`` and ``sock`` to ``stdout`` until one side ends; return
    which ended (``"stdin"``, ``"socket"``, ``"stdout"``). Closes nothing.

    One thread per direction, each blocking on its own side: a side that does not read
    (a client pipelining requests, a host pausing its reads) never holds up the other
    direction, and nothing has to change the blocking mode of the stdio we were given.
    """
    ended: queue.SimpleQueue[str] = queue.SimpleQueue()

    def upstream() -> None:
        how = "stdin"
        try:
            while data := _read(stdin):
                sock.sendall(data)
        except OSError:
            how = "socket"
        finally:
            ended.put(how)

    def downstream() -> None:
        how = "socket"
        try:
            while data := sock.recv(CHUNK):
                if not _write_all(stdout, data):
                    how = "stdout"
                    break
        except OSError:
            pass
        finally:
            ended.put(how)

    for target in (upstream, downstream):
        # daemon threads: the one still blocked when the other side ended is left to
        # the process's exit
        threading.Thread(target=target, name=f"bridge-{target.__name__}", daemon=True).start()
    return ended.get()


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
            sock.shutdown(socket.SHUT_RDWR)  # wakes the direction still reading it
        sock.close()
