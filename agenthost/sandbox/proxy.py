"""The sandbox's network proxy: an HTTP/1.1 proxy on a Unix socket that lets a
sandboxed agent reach the hosts of its allow list, and only those.

It runs in the host process, outside the sandbox, on the host's event loop; the socket
is bound into the sandbox, where :mod:`agenthost.sandbox.inner` bridges the agent's
TCP ``HTTP(S)_PROXY`` to it. Per connection it reads one request head (h11, at most
:data:`MAX_HEAD` bytes within :data:`HEAD_TIMEOUT`), decides on its target
(:mod:`agenthost.sandbox.proxyrules`), and then either tunnels (``CONNECT``: ``200``,
then the bytes both ways, each direction's end passed on as a half-close, with a
bounded buffer per direction) or forwards one plain HTTP request and streams its
response back (``Connection: close``). A refusal answers ``403`` with a text naming
the host and the setting that allows it, logs ``sandbox.proxy_refused`` and calls
``on_refused``. Every failure ends its own connection only; past
:data:`MAX_CONNECTIONS` at once a connection gets ``503``.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import h11
import structlog

from agenthost.aio import cancel_all
from agenthost.errors import SandboxError
from agenthost.sandbox.allowlist import AllowList
from agenthost.sandbox.proxyrules import (
    Forward,
    Refuse,
    Tunnel,
    decide,
    downstream_response,
    error_response,
    shown,
)

log = structlog.get_logger("agenthost.sandbox.proxy")

HEAD_TIMEOUT: Final = 10.0
"""Seconds a client has, from its connection, to send a whole request head."""
CONNECT_TIMEOUT: Final = 10.0
"""Seconds to resolve and connect to an upstream."""
MAX_HEAD: Final = 16 * 1024
"""Bytes of a request head (request line and headers)."""
MAX_CONNECTIONS: Final = 256
"""Connections served at once; more are answered ``503``."""
CHUNK: Final = 64 * 1024
"""Bytes read at a time; with the streams' own limits, what one direction buffers."""

LINGER: Final = 1.0
LINGER_BYTES: Final = 1 << 20
"""Seconds and bytes of a client's input dropped after an answer of the proxy's own."""

RefusedCallback = Callable[[str, int, str], None]
"""``on_refused(host, port, reason)``: called once per refused request that named a
host (the host as canonical as it could be made, the port, the reason in words)."""


@dataclass
class ProxyStats:
    """Counters since the proxy started."""

    connections: int = 0
    """Client connections accepted."""
    active: int = 0
    """Client connections open now."""
    refused: int = 0
    """Requests refused that named a host (not on the allow list, or not valid)."""
    bytes_up: int = 0
    """Bytes from clients to upstreams (tunnelled, or request bodies)."""
    bytes_down: int = 0
    """Bytes from upstreams to clients (tunnelled, or response bodies)."""


class Proxy:
    """A running proxy; from :func:`start_proxy`."""

    def __init__(
        self,
        path: Path,
        allow: AllowList,
        on_refused: RefusedCallback | None,
        *,
        head_timeout: float,
        connect_timeout: float,
        max_connections: int,
    ) -> None:
        self.path = path
        self.allow = allow
        self.stats = ProxyStats()
        self._on_refused = on_refused
        self._head_timeout = head_timeout
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._inode = 0

    async def close(self) -> None:
        """Stop accepting, end every connection (tunnels included), remove the socket."""
        if self._server is not None:
            self._server.close()
        await cancel_all(self._tasks)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        try:
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass  # gone already, or not ours to remove

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.stats.connections += 1
        self.stats.active += 1
        try:
            if self.stats.active > self._max_connections:
                _send(
                    writer, error_response(503, "agenthost sandbox proxy: too many connections\n")
                )
                await _linger(reader, writer)
            elif await self._serve(reader, writer):
                await _linger(reader, writer)
        except OSError:
            pass  # the client or the upstream went away: this connection ends
        except h11.ProtocolError as exc:  # a peer broke HTTP after the head
            log.info("sandbox.proxy_http_error", error=str(exc))
        except Exception:
            log.exception("sandbox.proxy_error")
        finally:
            self.stats.active -= 1
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; True when the proxy answered it itself (an error)."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            async with asyncio.timeout(self._head_timeout):
                request = await _read_head(conn, reader)
        except TimeoutError:
            log.info("sandbox.proxy_head_timeout")
            _send(writer, error_response(408, "agenthost sandbox proxy: request head too slow\n"))
            return True
        except h11.RemoteProtocolError as exc:
            log.info("sandbox.proxy_bad_request", error=str(exc))
            status = exc.error_status_hint
            _send(writer, error_response(status, f"agenthost sandbox proxy: {exc}\n"))
            return True
        if request is None:
            return False
        decision = decide(request, self.allow)
        if isinstance(decision, Refuse):
            self._refused(decision, request)
            _send(writer, decision.response())
            return True
        upstream = await self._connect(decision.host, decision.port, writer)
        if upstream is None:
            return True
        up_reader, up_writer = upstream
        try:
            if isinstance(decision, Tunnel):
                await self._tunnel(conn, reader, writer, up_reader, up_writer)
            else:
                await self._forward(decision, conn, reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()
        return False

    def _refused(self, refusal: Refuse, request: h11.Request) -> None:
        if refusal.host is None:
            log.info(
                "sandbox.proxy_bad_request", target=shown(request.target), error=refusal.reason
            )
            return
        self.stats.refused += 1
        log.warning(
            "sandbox.proxy_refused", host=refusal.host, port=refusal.port, reason=refusal.reason
        )
        if self._on_refused is not None:
            try:
                self._on_refused(refusal.host, refusal.port, refusal.reason)
            except Exception:
                log.exception("sandbox.proxy_callback_failed")

    async def _connect(
        self, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the upstream, or None after answering the client why not."""
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await asyncio.open_connection(host, port, limit=CHUNK)
        except TimeoutError:
            status, why = 504, "timed out"
        except OSError as exc:
            status, why = 502, exc.strerror or type(exc).__name__
        log.info("sandbox.proxy_upstream_failed", host=host, port=port, error=why)
        text = f"agenthost sandbox proxy: cannot connect to {host} port {port}: {why}\n"
        _send(writer, error_response(status, text))
        return None

    async def _tunnel(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        _send(
            writer,
            conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established"))
            or b"",
        )
        early, _ = conn.trailing_data  # what the client sent after its head, not waiting
        if early:
            _send(up_writer, early)
            self.stats.bytes_up += len(early)
        await _both_ways(
            _pipe(reader, up_writer, self._count_up), _pipe(up_reader, writer, self._count_down)
        )

    async def _forward(
        self,
        forward: Forward,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD * 4)
        _send(up_writer, upstream.send(forward.request) or b"")
        if forward.expects_continue:
            _send(writer, conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        # The request's body, as h11 reads it (chunked or not), re-framed by h11.
        while True:
            event = await _next(conn, reader)
            if isinstance(event, h11.Data):
                self.stats.bytes_up += len(event.data)
                _send(up_writer, upstream.send(h11.Data(data=event.data)) or b"")
                await up_writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                _send(up_writer, upstream.send(h11.EndOfMessage()) or b"")
                await up_writer.drain()
                break
            else:  # the client closed before the end of its body
                return
        try:
            response = await _response_head(upstream, up_reader)
        except h11.RemoteProtocolError as exc:
            text = f"agenthost sandbox proxy: {forward.host} sent no valid response ({exc})\n"
            _send(writer, error_response(502, text))
            await writer.drain()
            return
        if response is None:
            text = f"agenthost sandbox proxy: {forward.host} closed without a response\n"
            _send(writer, error_response(502, text))
            await writer.drain()
            return
        _send(writer, conn.send(downstream_response(response)) or b"")
        while True:
            event = await _next(upstream, up_reader)
            if isinstance(event, h11.Data):
                self.stats.bytes_down += len(event.data)
                _send(writer, conn.send(event) or b"")
                await writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                _send(writer, conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                return
            else:  # the upstream closed in the middle of its body: so does the client's
                return

    def _count_up(self, size: int) -> None:
        self.stats.bytes_up += size

    def _count_down(self, size: int) -> None:
        self.stats.bytes_down += size


async def start_proxy(
    path: Path,
    allow: AllowList,
    *,
    on_refused: RefusedCallback | None = None,
    head_timeout: float = HEAD_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> Proxy:
    """Listen on the Unix socket ``path`` and serve the proxy for ``allow``; the socket
    is made 0600 at once, and its directory (which the caller made, private) keeps
    others out before that. ``on_refused(host, port, reason)`` is called for each
    refused request that named a host (after the warning ``sandbox.proxy_refused`` is
    logged). Stop it with :meth:`Proxy.close`.

    Raises :class:`~agenthost.errors.SandboxError` when the socket cannot be made.
    """
    proxy = Proxy(
        path,
        allow,
        on_refused,
        head_timeout=head_timeout,
        connect_timeout=connect_timeout,
        max_connections=max_connections,
    )
    try:
        proxy._server = await asyncio.start_unix_server(
            proxy._accept, path=os.fspath(path), limit=CHUNK, backlog=max_connections * 2
        )
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        proxy._inode = os.lstat(path).st_ino
    except OSError as exc:
        if proxy._server is not None:
            proxy._server.close()
        raise SandboxError(
            f"cannot listen on the sandbox's proxy socket {path}: {exc.strerror or exc}"
        ) from exc
    return proxy


def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    """``writer.write(data)``, or ConnectionResetError when the peer is gone (uvloop
    raises a RuntimeError for a write to a closed transport)."""
    if writer.is_closing():
        raise ConnectionResetError("the connection is closed")
    writer.write(data)


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an answer of the proxy's own: end our side and read (and drop) what the
    client still sends, for a moment, before closing. Closing with unread bytes would
    reset the connection, and the client could lose the answer with them."""
    if writer.is_closing():
        return
    if writer.can_write_eof():
        writer.write_eof()
    try:
        async with asyncio.timeout(LINGER):
            for _ in range(LINGER_BYTES // CHUNK):
                if not await reader.read(CHUNK):
                    break
    except TimeoutError:
        pass


async def _read_head(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    """The request head, or None when the client closed before sending one."""
    event = await _next(conn, reader)
    if isinstance(event, h11.Request):
        return event
    return None


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Event | None:
    """The next event of ``conn`` (reading as needed); None when the peer closed.
    Raises h11.RemoteProtocolError on what is not HTTP (or too big)."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(CHUNK))
            continue
        if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
            return None
        assert isinstance(event, h11.Event)
        return event


async def _response_head(
    upstream: h11.Connection, reader: asyncio.StreamReader
) -> h11.Response | None:
    """The upstream's final response head (1xx are dropped: ``100 Continue`` was
    answered to the client by the proxy already)."""
    while True:
        event = await _next(upstream, reader)
        if isinstance(event, h11.InformationalResponse):
            continue
        return event if isinstance(event, h11.Response) else None


async def _pipe(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: Callable[[int], None]
) -> None:
    """Copy ``src`` to ``dst`` until its end, then half-close ``dst``. At most one chunk
    is in hand and ``drain`` waits for a slow reader: memory stays bounded."""
    while data := await src.read(CHUNK):
        _send(dst, data)
        count(len(data))
        await dst.drain()
    if dst.can_write_eof() and not dst.is_closing():
        dst.write_eof()


async def _both_ways(*pipes: Coroutine[Any, Any, None]) -> None:
    """Run both directions of a tunnel until both have ended, or until one fails (a
    reset: the other is then cancelled, and the connection closed)."""
    tasks = [asyncio.create_task(pipe) for pipe in pipes]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await cancel_all(tasks)
        for task in tasks:
            error = task.exception() if task.done() and not task.cancelled() else None
            if error is not None and not isinstance(error, OSError):
                log.error("sandbox.proxy_error", exc_info=error)
