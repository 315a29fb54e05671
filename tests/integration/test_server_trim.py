"""The server gives the memory of drained write buffers back (agenthost.heap.trim):
once a client's buffer passed its high-water mark and every buffer drained, and when
such a client goes. A real host server on uvloop over a Unix socket; the trim itself
is counted, not measured."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop
from pydantic import BaseModel

from agenthost import heap
from agenthost.host.server import Connection, HostServer
from agenthost.protocol import MessageType, Request, encode_response
from agenthost.ringbuffer import RingBuffer
from agenthost.wire.server import HIGH_WATER

from hosttools import wait_until as until


class Host:
    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel, request: Request
    ) -> bytes:
        return encode_response(mtype, request.id, {})


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ah-", dir="/tmp") as path:
        yield Path(path)


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    done: list[int] = []

    def trim() -> bool:
        done.append(1)
        return True

    monkeypatch.setattr(heap, "trim", trim)
    return done


async def flood(server: HostServer) -> tuple[socket.socket, Connection, int]:
    """A client that does not read yet, and three high-water marks of bytes sent to it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, str(server.path))
    await until(lambda: server.connections, "the connection")
    conn = next(iter(server.connections))
    size = 3 * HIGH_WATER
    for _ in range(size // 65536):
        conn.send(b"x" * 65535 + b"\n")
    await until(lambda: conn.write_paused, "the transport to pause")
    return sock, conn, size


async def drain(sock: socket.socket, size: int) -> None:
    loop = asyncio.get_running_loop()
    got = 0
    while got < size:
        got += len(await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 10))


def test_a_trim_follows_once_the_buffers_drained(sock_dir: Path, trims: list[int]) -> None:
    async def main() -> None:
        server = HostServer(sock_dir / "h.sock", RingBuffer(10, 1 << 20), Host())
        await server.start()
        sock, conn, size = await flood(server)
        try:
            assert trims == []  # nothing was released: the buffer is full
            await drain(sock, size)
            await until(lambda: trims, "a trim")
            assert conn.buffered() == 0
        finally:
            sock.close()
            await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_a_client_dropped_with_a_full_buffer_is_trimmed_after(
    sock_dir: Path, trims: list[int]
) -> None:
    async def main() -> None:
        server = HostServer(sock_dir / "h.sock", RingBuffer(10, 1 << 20), Host())
        await server.start()
        sock, conn, _ = await flood(server)
        try:
            conn.abort()  # what a client that fell behind gets
            await until(lambda: not server.connections, "the connection to go")
            await until(lambda: trims, "a trim")
        finally:
            sock.close()
            await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
