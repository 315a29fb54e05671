"""The socket servers of the host and the daemon, in one process on uvloop: the listen
backlog, a client that half-closes and then closes, and the order of a close.

The real servers and connections over real Unix sockets; only what answers the
requests is a small stand-in (the daemon's watch is the real :class:`Hub`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from pydantic import BaseModel

from agenthost.daemon.fanout import Hub
from agenthost.daemon.protocol import DaemonMessageType, WatchRequest
from agenthost.daemon.server import DaemonConnection, DaemonServer
from agenthost.host.server import Connection, HostServer
from agenthost.protocol import MessageType, Request, encode_response
from agenthost.ringbuffer import RingBuffer

from hosttools import wait_until as until

DEADLINE = 10.0


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main`` on uvloop, the loop the host and the daemon run on."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ah-", dir="/tmp") as path:
        yield Path(path)


class Daemon:
    """Answers like the daemon: watch through the real hub, ping at once, the rest
    when ``release``d."""

    def __init__(self) -> None:
        self.hub = Hub(buffer_events=100, buffer_bytes=1 << 20, max_queue=1 << 20)
        self.release = asyncio.Event()
        self.in_flight: list[Any] = []

    def dispatch(
        self, conn: DaemonConnection, mtype: DaemonMessageType, payload: BaseModel, request: Request
    ) -> bytes | None | Awaitable[bytes]:
        if mtype is DaemonMessageType.WATCH:
            assert isinstance(payload, WatchRequest)
            self.hub.watch(conn, payload, request.id)
            return None
        if mtype is DaemonMessageType.PING:
            return encode_response(mtype, request.id, {})
        return self._later(mtype, request)

    async def _later(self, mtype: DaemonMessageType, request: Request) -> bytes:
        self.in_flight.append(request.id)
        await self.release.wait()
        return encode_response(mtype, request.id, {})

    def unwatch(self, conn: DaemonConnection) -> None:
        self.hub.unwatch(conn)

    def resume(self, conn: DaemonConnection) -> None:
        self.hub.pump(conn)


class Host:
    """Answers every request at once."""

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel, request: Request
    ) -> bytes:
        return encode_response(mtype, request.id, {})


def daemon_server(path: Path) -> DaemonServer:
    return DaemonServer(path, Daemon(), max_queue=1 << 20)


def host_server(path: Path) -> HostServer:
    return HostServer(path, RingBuffer(100, 1 << 20), Host())


class Client:
    """A raw client socket driven by the test's own loop."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    @classmethod
    async def connect(cls, path: Path) -> Client:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, str(path))
        except OSError:
            sock.close()
            raise
        return cls(sock)

    async def request(self, mtype: str, rid: Any, payload: Any = None) -> None:
        line = json.dumps({"type": mtype, "id": rid, "payload": payload or {}}).encode() + b"\n"
        await asyncio.get_running_loop().sock_sendall(self.sock, line)

    async def frame(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while (end := self.buf.find(b"\n")) < 0:
            chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 65536), DEADLINE)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line = bytes(self.buf[:end])
        del self.buf[: end + 1]
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    async def eof(self) -> bool:
        loop = asyncio.get_running_loop()
        return not self.buf and not await asyncio.wait_for(loop.sock_recv(self.sock, 1), DEADLINE)


def only(connections: set[Any]) -> Any:
    assert len(connections) == 1, connections
    return next(iter(connections))


@pytest.mark.parametrize("make", [daemon_server, host_server], ids=["daemon", "host"])
def test_the_listen_backlog_is_512(
    sock_dir: Path, make: Callable[[Path], DaemonServer | HostServer]
) -> None:
    """Clients that connect while the server is busy wait in the backlog that the bind
    set. (uvloop's own server listened again with its default of 100, so the 101st
    client of a burst got EAGAIN.)"""

    async def main() -> None:
        server = make(sock_dir / "s.sock")
        await server.start()
        pending: list[socket.socket] = []
        try:
            # the loop does not run meanwhile: nothing is accepted
            while len(pending) < 1000:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setblocking(False)
                pending.append(sock)
                try:
                    sock.connect(str(server.path))
                except BlockingIOError:  # AF_UNIX: the backlog is full
                    break
            assert len(pending) - 1 >= 512
        finally:
            for sock in pending:
                sock.close()
            await server.close()

    run(main)


def test_a_watcher_that_half_closes_then_closes_is_freed(sock_dir: Path) -> None:
    """connect, daemon.watch, read the answer, shutdown(SHUT_WR), close(): once the
    daemon has seen the EOF, nothing more is read, and an idle stream writes nothing,
    so only a check for the hang-up frees the connection and its descriptor."""

    async def main() -> None:
        server = daemon_server(sock_dir / "d.sock")
        server.hangup_poll = 0.01
        await server.start()
        client = await Client.connect(server.path)
        try:
            await client.request("daemon.watch", "w")
            assert (await client.frame())["id"] == "w"
            conn = only(server.connections)
            client.sock.shutdown(socket.SHUT_WR)
            await until(lambda: conn.requests.eof, "the daemon to see the EOF")
            assert server.connections == {conn}  # still watching: the stream goes on
            client.sock.close()
            await until(lambda: not server.connections, "the connection to be freed")
            assert conn.closed and conn.watch is None
        finally:
            client.sock.close()
            await server.close()

    run(main)


def test_a_request_in_flight_at_close_is_answered_before_anything_is_cancelled(
    sock_dir: Path,
) -> None:
    """The order of a close: stop accepting, let the connections finish what they
    were asked (within the timeout), close them, and only then cancel what is left."""

    async def main() -> None:
        daemon = Daemon()
        server = DaemonServer(sock_dir / "d.sock", daemon, max_queue=1 << 20)
        await server.start()
        client = await Client.connect(server.path)
        try:
            await client.request("daemon.list", "slow")
            await until(lambda: daemon.in_flight == ["slow"], "the request to be in flight")
            closing = asyncio.get_running_loop().create_task(server.close(timeout=DEADLINE))
            await until(lambda: not server.path.exists(), "the socket to be removed")
            with pytest.raises(OSError):  # no new client
                await Client.connect(server.path)
            assert not closing.done()
            daemon.release.set()
            answer = await client.frame()
            assert answer["id"] == "slow" and answer["success"], answer
            assert await client.eof()
            await closing
            assert not server.connections and not server.tasks
        finally:
            client.sock.close()
            await server.close()

    run(main)


def test_a_request_that_outlives_the_close_timeout_is_cancelled(sock_dir: Path) -> None:
    async def main() -> None:
        daemon = Daemon()
        server = DaemonServer(sock_dir / "d.sock", daemon, max_queue=1 << 20)
        await server.start()
        client = await Client.connect(server.path)
        try:
            await client.request("daemon.list", "never")
            await until(lambda: daemon.in_flight == ["never"], "the request to be in flight")
            await server.close(timeout=0.01)
            assert not server.tasks
            with contextlib.suppress(ConnectionResetError):
                assert await client.eof()  # aborted, no answer
        finally:
            client.sock.close()
            await server.close()

    run(main)


def test_the_socket_file_is_private_and_removed_at_close(sock_dir: Path) -> None:
    async def main() -> None:
        server = daemon_server(sock_dir / "d.sock")
        await server.start()
        assert os.stat(server.path).st_mode & 0o777 == 0o600
        await server.close()
        assert not server.path.exists()

    run(main)


@pytest.mark.parametrize("make", [daemon_server, host_server], ids=["daemon", "host"])
def test_rebind_recreates_a_deleted_socket_file(
    sock_dir: Path, make: Callable[[Path], DaemonServer | HostServer]
) -> None:
    """What the host does on SIGUSR1, either service can do: a deleted socket file is
    bound again, and one that is still ours is left alone."""

    async def main() -> None:
        server = make(sock_dir / "s.sock")
        await server.start()
        try:
            assert not await server.rebind()
            server.path.unlink()
            assert await server.rebind()
            client = await Client.connect(server.path)
            try:
                await client.request(f"{server.connection().service}.ping", "p")
                assert (await client.frame())["id"] == "p"
            finally:
                client.sock.close()
        finally:
            await server.close()

    run(main)
