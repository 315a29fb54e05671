"""The other end of a Unix socket connection: who it is, and whether it is still there.

Shared by the host's and the daemon's servers: both admit only their owner's uid (or
root) and both must notice a client that closed after a half-close. And by their
clients: a socket served by another user is not talked to, whatever its path says
(a home another user can write to would let them plant one).
"""

from __future__ import annotations

import os
import select
import socket
import struct
from typing import TYPE_CHECKING, Final

import structlog

from agenthost.errors import ErrorCode, foreign_server
from agenthost.wire.codec import encode_error

if TYPE_CHECKING:
    from asyncio import BaseTransport, Transport

log = structlog.get_logger("agenthost.peer")

_CRED: Final = struct.Struct("3i")


def peer_credentials(sock: socket.socket | None) -> tuple[int, int]:
    """The (pid, uid) of the process at the other end of an AF_UNIX socket, as the
    kernel recorded them at connect (``SO_PEERCRED``); (0, -1) when unknown."""
    if sock is None:
        return 0, -1
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    except OSError:  # pragma: no cover - not AF_UNIX
        return 0, -1
    pid, uid, _ = _CRED.unpack(raw)
    return pid, uid


def trusted_uid(uid: int) -> bool:
    """Whether a peer of ``uid`` is ours to deal with: this user, or root."""
    return uid in (os.getuid(), 0)


def check_server(transport: BaseTransport, path: object, service: str) -> None:
    """Raise Forbidden unless the server at the other end of a client's fresh
    connection runs as this user (or root). Called before anything is sent."""
    check_server_socket(transport.get_extra_info("socket"), path, service)


def check_server_socket(sock: socket.socket | None, path: object, service: str) -> None:
    """:func:`check_server` for a plain connected socket (``agenthost bridge``)."""
    pid, uid = peer_credentials(sock)
    if trusted_uid(uid):
        return
    raise foreign_server(service, path, pid, uid, os.getuid())


def admit_peer(transport: Transport, service: str) -> tuple[int, int] | None:
    """The peer's (pid, uid) if it may use this ``service`` (the owner's uid or root).

    Otherwise answer ``forbidden``, close the transport and return None.
    """
    pid, uid = peer_credentials(transport.get_extra_info("socket"))
    if trusted_uid(uid):
        return pid, uid
    log.warning("client.forbidden", peer_uid=uid, peer_pid=pid)
    transport.write(
        encode_error(
            "",
            None,
            ErrorCode.FORBIDDEN,
            f"uid {uid} may not use this {service} (owner uid {os.getuid()})",
        )
    )
    transport.close()
    return None


def peer_hung_up(transport: Transport | None) -> bool:
    """True if the peer closed both directions (AF_UNIX reports POLLHUP only then;
    after a mere ``shutdown(SHUT_WR)`` it does not)."""
    sock = transport.get_extra_info("socket") if transport else None
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), 0)
    return any(mask & select.POLLHUP for _, mask in poller.poll(0))
