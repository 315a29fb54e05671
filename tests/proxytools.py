"""Real upstream servers on 127.0.0.1 for the sandbox proxy's tests, and the proxy with
them on a loop of its own thread (for tests whose client is a real program).

- the echo server: sends back what it reads; at the client's end (a half-close) it
  sends ``[eof]`` and closes, which shows that the end got through;
- the early-closer: sends ``hello``, ends its side, and keeps reading what comes;
- the HTTP server (h11): answers by path (``/chunked``, ``/echo``, ``/close``,
  ``/big?N``, anything else ``hello``) and keeps each request head it received.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import uvloop

from agenthost.sandbox.allowlist import AllowList
from agenthost.sandbox.proxy import Proxy, start_proxy


@dataclass
class Seen:
    """What the HTTP server received: one request head and body per request."""

    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


@dataclass
class Upstreams:
    """The servers, their ports, and what they saw."""

    echo_port: int = 0
    early_port: int = 0
    http_port: int = 0
    connections: dict[str, int] = field(default_factory=lambda: {"echo": 0, "early": 0, "http": 0})
    early_received: list[bytes] = field(default_factory=list)
    early_ended: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[Seen] = field(default_factory=list)
    servers: list[asyncio.AbstractServer] = field(default_factory=list)

    async def start(self) -> Upstreams:
        for name, handler in (("echo", self._echo), ("early", self._early), ("http", self._http)):
            server = await asyncio.start_server(handler, "127.0.0.1", 0)
            self.servers.append(server)
            setattr(self, f"{name}_port", server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for server in self.servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections["echo"] += 1
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.write(b"[eof]")
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _early(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections["early"] += 1
        try:
            writer.write(b"hello")
            writer.write_eof()
            while data := await reader.read(65536):
                self.early_received.append(data)
        except OSError:
            pass
        finally:
            self.early_ended.set()
            writer.close()

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections["http"] += 1
        conn = h11.Connection(h11.SERVER)
        try:
            request: Any = None
            body = b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            self.requests.append(Seen(request.method, request.target, list(request.headers), body))
            path = request.target.decode()
            if path == "/close":  # no length: the end of the connection ends the body
                writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
                return
            if path == "/chunked":
                headers = [(b"transfer-encoding", b"chunked"), (b"x-up", b"1")]
                parts = [b"first ", b"second ", b"third"]
            elif path == "/echo":
                headers = [(b"content-length", str(len(body)).encode())]
                parts = [body]
            elif path.startswith("/big?"):
                size = int(path[5:])
                headers = [(b"content-length", str(size).encode())]
                parts = [b"x" * size]
            else:
                headers = [
                    (b"content-length", b"5"),
                    (b"keep-alive", b"timeout=5"),
                    (b"connection", b"keep-alive, x-secret"),
                    (b"x-secret", b"hop"),
                ]
                parts = [b"hello"]
            writer.write(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
            for part in parts:
                writer.write(conn.send(h11.Data(data=part)) or b"")
                await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
        except (OSError, h11.ProtocolError):
            pass
        finally:
            writer.close()


class ProxyThread:
    """The proxy and the upstreams on a uvloop loop in a thread of their own, for
    tests and benchmarks whose client is a blocking program (curl, a bridge)."""

    def __init__(self, path: Path, entries: list[str] | None = None) -> None:
        self.path = path
        self.entries = entries
        self.refused: list[tuple[str, int, str]] = []
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.upstreams = Upstreams()
        self.proxy: Proxy | None = None

    def __enter__(self) -> ProxyThread:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.upstreams.start(), self.loop).result(10)
        entries = self.entries or [
            f"127.0.0.1:{self.upstreams.echo_port}",
            f"127.0.0.1:{self.upstreams.http_port}",
        ]
        allow = AllowList.parse(entries)

        async def start() -> Proxy:
            return await start_proxy(
                self.path, allow, on_refused=lambda *args: self.refused.append(args)
            )

        self.proxy = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self.proxy is not None:
                await self.proxy.close()
            await self.upstreams.stop()

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nobody listens on (just now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def stalled_listener() -> Iterator[int]:
    """A port whose connects hang: a listener with a full backlog that never accepts
    (Linux drops the further SYNs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # the backlog of listen(0) holds one or two
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()
