"""The other end of a Unix socket connection: who it is, and whether it is still there.

Shared by the host's and the daemon's servers: both admit only their owner's uid (or
root) and both must notice a client that closed after a half-close.
"""

from __future__ import annotations

import os
import select
import socket
import struct
from typing import TYPE_CHECKING, Final

import structlog

from agenthost.errors import ErrorCode
from agenthost.protocol import encode_error

if TYPE_CHECKING:
    from asyncio import Transport

log = structlog.get_logger("agenthost.peer")

_CRED: Final = struct.Struct("3i")


def admit_peer(transport: Transport, service: str) -> tuple[int, int] | None:
    """The peer's (pid, uid) if it may use this ``service`` (the owner's uid or root).

    Otherwise answer ``forbidden``, close the transport and return None.
    """
    pid, uid = 0, -1
    sock = transport.get_extra_info("socket")
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
        pid, uid, _ = _CRED.unpack(raw)
    except OSError:  # pragma: no cover - not AF_UNIX
        pass
    if uid in (os.getuid(), 0):
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
