"""systemd readiness notification (``sd_notify``), without a libsystemd dependency."""

from __future__ import annotations

import os
import socket


def sd_notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to ``$NOTIFY_SOCKET``; False if not under systemd.

    Failures are ignored: readiness is a courtesy to the service manager, never a
    reason for the service itself to fail.
    """
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True
