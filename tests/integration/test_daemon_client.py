"""DaemonClient on the shared client core: a full listen backlog is waited for, and a
watch whose frames nobody reads never holds up a response."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from agenthost.daemon.client import DaemonClient


@contextlib.contextmanager
def full_backlog(path: Path) -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A socket that listens with a backlog of 0 and never accepts, filled with
    connections until the kernel answers EAGAIN."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(0)
    fillers: list[socket.socket] = []
    try:
        while True:
            sock = socket.socket(socket.AF_UNIX)
            sock.setblocking(False)
            fillers.append(sock)
            try:
                sock.connect(str(path))
            except BlockingIOError:
                fillers.pop().close()
                break
        yield server, fillers
    finally:
        for sock in fillers:
            sock.close()
        server.close()


def test_a_full_listen_backlog_is_waited_for_not_reported_as_no_daemon(home: Path) -> None:
    path = home / "daemon.sock"
    with full_backlog(path) as (server, _):

        async def main() -> None:
            client = DaemonClient(home, socket_path=path, connect_timeout=30)
            connecting = asyncio.ensure_future(client.connect())
            # EAGAIN used to fail at once with "no daemon answers"
            done, _ = await asyncio.wait({connecting}, timeout=0.3)
            assert not done, connecting.exception()
            server.setblocking(False)
            accepted = []
            with contextlib.suppress(BlockingIOError):
                while True:  # make room in the backlog: the client gets in
                    accepted.append(server.accept()[0])
            await asyncio.wait_for(connecting, 30)
            assert client.connected
            await client.close()
            for conn in accepted:
                conn.close()

        uvloop.run(main())


def test_connect_to_no_socket_still_says_no_daemon_at_once(home: Path) -> None:
    from agenthost.errors import DaemonNotRunning

    async def main() -> None:
        with pytest.raises(DaemonNotRunning, match="no daemon answers") as info:
            await DaemonClient(home, connect_timeout=30).connect()
        assert info.value.hint

    uvloop.run(asyncio.wait_for(main(), 5))
