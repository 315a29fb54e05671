"""The sandbox's proxy against hostile clients: the real server on a temporary Unix
socket, on uvloop (the host's loop), real upstream servers on 127.0.0.1.

Each test ends by checking that the proxy still serves a good request and logged no
error of its own: a failure ends its connection only.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from structlog.testing import capture_logs

from agenthost.errors import SandboxError
from agenthost.sandbox.allowlist import AllowList
from agenthost.sandbox.proxy import Proxy, start_proxy

from hosttools import wait_until as until
from proxytools import Upstreams, free_port, stalled_listener

DEADLINE = 10.0


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ah-", dir="/tmp") as path:
        os.chmod(path, 0o700)
        yield Path(path)


class World:
    """A proxy, its upstreams, and what it refused."""

    def __init__(self, proxy: Proxy, up: Upstreams, refused: list[tuple[str, int, str]]) -> None:
        self.proxy = proxy
        self.up = up
        self.refused = refused
        self.path = proxy.path

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_unix_connection(os.fspath(self.path))

    async def exchange(self, data: bytes, *, half_close: bool = False) -> bytes:
        """Send ``data`` and read until the proxy closes (within the deadline)."""
        reader, writer = await self.open()
        try:
            writer.write(data)
            await writer.drain()
            if half_close:
                writer.write_eof()
            return await asyncio.wait_for(reader.read(), DEADLINE)
        finally:
            writer.close()

    async def still_serves(self) -> None:
        port = self.up.http_port
        reply = await self.exchange(
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        )
        assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b"hello"), reply


Scenario = Callable[[World], Coroutine[Any, Any, None]]


def run(
    sock_dir: Path,
    scenario: Scenario,
    entries: Callable[[Upstreams], list[str]] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Run ``scenario`` on uvloop against a fresh proxy; its log entries."""

    async def main() -> None:
        up = await Upstreams().start()
        allow = AllowList.parse(
            entries(up)
            if entries
            else [
                f"127.0.0.1:{up.echo_port}",
                f"127.0.0.1:{up.early_port}",
                f"127.0.0.1:{up.http_port}",
                f"localhost:{up.echo_port}",
            ]
        )
        refused: list[tuple[str, int, str]] = []
        proxy = await start_proxy(
            sock_dir / "proxy.sock", allow, on_refused=lambda *a: refused.append(a), **options
        )
        world = World(proxy, up, refused)
        try:
            await scenario(world)
            await world.still_serves()
        finally:
            await proxy.close()
            await up.stop()

    with capture_logs() as logs:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    errors = [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert not errors, errors
    return logs


def connect(target: str) -> bytes:
    """A CONNECT head for ``target``, with the Host header HTTP/1.1 requires."""
    return f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def body_of(reply: bytes) -> bytes:
    return reply.split(b"\r\n\r\n", 1)[1]


# --- refusals ------------------------------------------------------------------------


def test_a_connect_to_a_host_not_allowed_is_refused_and_logged(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reply = await w.exchange(b"CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(reply) == 403
        body = body_of(reply).decode()
        assert "evil.example:443" in body and "sandbox.allow_hosts" in body
        assert "'evil.example'" in body  # the entry to add
        reply = await w.exchange(connect("127.0.0.1:22"))
        assert status_of(reply) == 403 and "'127.0.0.1:22'" in body_of(reply).decode()
        assert w.refused == [
            ("evil.example", 443, "not on the sandbox's allow list"),
            ("127.0.0.1", 22, "not on the sandbox's allow list"),
        ]
        assert w.proxy.stats.refused == 2

    logs = run(sock_dir, scenario)
    refusals = [e for e in logs if e["event"] == "sandbox.proxy_refused"]
    assert [(e["host"], e["port"], e["log_level"]) for e in refusals] == [
        ("evil.example", 443, "warning"),
        ("127.0.0.1", 22, "warning"),
    ]


def test_an_address_of_an_allowed_name_is_not_allowed(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        port = w.up.echo_port
        for target in (f"127.0.0.1:{port}", f"[::ffff:127.0.0.1]:{port}", f"127.1:{port}"):
            reply = await w.exchange(connect(f"{target}"))
            assert status_of(reply) in (400, 403), (target, reply)
        reply = await w.exchange(
            connect(f"localhost:{port}"),
            half_close=True,
        )
        assert status_of(reply) == 200 and reply.endswith(b"\r\n\r\n[eof]")
        assert w.up.connections["echo"] == 1  # only the allowed name got through

    run(sock_dir, scenario, lambda up: [f"localhost:{up.echo_port}", f"127.0.0.1:{up.http_port}"])


def test_user_names_and_other_tricks_in_targets_reach_nobody(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        echo, http = w.up.echo_port, w.up.http_port
        bad = [
            connect(f"127.0.0.1:{echo}@evil.example:443").decode(),
            connect(f"evil.example@127.0.0.1:{echo}").decode(),
            connect("127.0.0.1").decode(),
            connect(f"127.0.0.1:{echo}/x").decode(),
            connect(f"http://127.0.0.1:{echo}").decode(),
            connect(f"127.0.0.1:{echo}:{echo}").decode(),
            connect(f"127.0.0.1:0{echo}0").decode(),
            f"GET http://127.0.0.1:{http}@evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            f"GET http://user:pw@127.0.0.1:{http}/ HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n",
            f"GET http://127.0.0.1:{http}#@evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n",
            f"GET http://127.0.0.1:{http}\\@evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n",
            f"GET http://%31%32%37.0.0.1:{http}/ HTTP/1.1\r\nHost: x\r\n\r\n",
            f"GET https://127.0.0.1:{http}/ HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n",
            f"GET ftp://127.0.0.1:{http}/ HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n",
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n",  # not a proxy request
            f"GET //127.0.0.1:{http}/ HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n",
        ]
        for request in bad:
            reply = await w.exchange(request.encode())
            assert status_of(reply) in (400, 403), (request, reply)
        assert w.up.connections == {"echo": 0, "early": 0, "http": 0}
        # each refusal that named a host was reported (the rest had no host to name)
        assert all(port > 0 for _, port, _ in w.refused) and len(w.refused) >= 4

    run(sock_dir, scenario)


def test_a_host_header_that_disagrees_with_the_target_is_refused(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        http = w.up.http_port
        for host in ("evil.example", f"127.0.0.1:{w.up.echo_port}", "127.0.0.1", "", "a@b"):
            reply = await w.exchange(
                f"GET http://127.0.0.1:{http}/ HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            )
            assert status_of(reply) == 400, (host, reply)
            assert b"Host header" in body_of(reply)
        assert w.up.connections["http"] == 0
        # the same host, spelled otherwise, is the same host
        reply = await w.exchange(
            f"GET http://127.0.0.1:{http}/ HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n\r\n".encode()
        )
        assert status_of(reply) == 200

    run(sock_dir, scenario)


# --- tunnels -------------------------------------------------------------------------


def test_an_allowed_connect_tunnels_any_bytes_both_ways(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reader, writer = await w.open()
        # the first bytes of the tunnel come with the head, before the 200 (TLS clients
        # that do not wait): they must reach the upstream first, in order
        writer.write(connect(f"127.0.0.1:{w.up.echo_port}") + b"\x16\x03\x01 not http \x00\xff")
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
        assert answer == b"HTTP/1.1 200 Connection established\r\n\r\n"
        payload = os.urandom(3 << 20)  # more than every buffer on the way: backpressure
        expected = b"\x16\x03\x01 not http \x00\xff" + payload

        async def send() -> None:
            writer.write(payload)
            await writer.drain()
            writer.write_eof()

        sender = asyncio.create_task(send())
        received = await asyncio.wait_for(reader.read(), DEADLINE)
        await sender
        writer.close()
        assert received == expected + b"[eof]"  # all of it, then the end passed on
        await until(lambda: w.proxy.stats.active == 0, "the tunnel to end")
        assert w.proxy.stats.bytes_up == len(expected)
        assert w.proxy.stats.bytes_down == len(expected) + 5

    run(sock_dir, scenario)


def test_a_tunnel_keeps_the_other_direction_open_after_a_half_close(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reader, writer = await w.open()
        writer.write(connect(f"127.0.0.1:{w.up.early_port}"))
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
        # the upstream has said all it will and ended its side ...
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b"hello"
        # ... and still reads what the client sends, until the client's end
        for _ in range(3):
            writer.write(b"more ")
            await writer.drain()
        writer.write_eof()
        await asyncio.wait_for(w.up.early_ended.wait(), DEADLINE)
        assert b"".join(w.up.early_received) == b"more more more "
        writer.close()

    run(sock_dir, scenario)


def test_a_client_that_resets_a_tunnel_ends_it(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reader, writer = await w.open()
        writer.write(connect(f"127.0.0.1:{w.up.echo_port}"))
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
        writer.write(b"x" * 100_000)  # never read back
        writer.transport.abort()
        await until(lambda: w.proxy.stats.active == 0, "the tunnel to end")

    run(sock_dir, scenario)


def test_many_tunnels_at_once(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        async def one(i: int) -> bytes:
            reader, writer = await w.open()
            writer.write(connect(f"127.0.0.1:{w.up.echo_port}"))
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"%d" % i * 1000)
            writer.write_eof()
            data = await reader.read()
            writer.close()
            return data

        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), 30)
        assert results == [b"%d" % i * 1000 + b"[eof]" for i in range(200)]
        assert w.up.connections["echo"] == 200

    run(sock_dir, scenario)


def test_past_the_connection_cap_a_client_gets_503(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        tunnels = []
        for _ in range(4):
            reader, writer = await w.open()
            writer.write(connect(f"127.0.0.1:{w.up.echo_port}"))
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
            tunnels.append(writer)
        reply = await w.exchange(connect("127.0.0.1:1"))
        assert status_of(reply) == 503
        for writer in tunnels:
            writer.close()
        await until(lambda: w.proxy.stats.active == 0, "the tunnels to end")

    run(sock_dir, scenario, max_connections=4)


# --- plain HTTP ----------------------------------------------------------------------


def test_plain_http_is_forwarded_in_origin_form_without_hop_headers(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        http = w.up.http_port
        reply = await w.exchange(
            f"GET HTTP://127.0.0.1:{http}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
            "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nX-Keep: yes\r\n"
            "\r\n".encode()
        )
        assert status_of(reply) == 200 and body_of(reply) == b"hello"
        head = reply.split(b"\r\n\r\n")[0].lower()
        assert b"connection: close" in head
        for hop in (b"keep-alive", b"x-secret"):  # the upstream's hop headers
            assert hop not in head.replace(b"connection: close", b"")
        seen = w.up.requests[-1]
        assert seen.method == b"GET" and seen.target == b"/path?q=1"
        headers = dict(seen.headers)
        assert headers[b"host"] == f"127.0.0.1:{http}".encode()
        assert headers[b"connection"] == b"close" and headers[b"x-keep"] == b"yes"
        for hop in (b"proxy-authorization", b"proxy-connection", b"x-hop", b"te"):
            assert hop not in headers
        reply = await w.exchange(f"GET http://127.0.0.1:{http} HTTP/1.0\r\n\r\n".encode())
        assert status_of(reply) == 200 and w.up.requests[-1].target == b"/"

    run(sock_dir, scenario)


def test_plain_http_bodies_chunked_or_not_stream_both_ways(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        http = w.up.http_port
        base = f"http://127.0.0.1:{http}"
        host = f"Host: 127.0.0.1:{http}\r\n"
        # a chunked request body (with a Content-Length beside it: dropped, not smuggled)
        reply = await w.exchange(
            f"POST {base}/echo HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n"
            "Content-Length: 3\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".encode()
        )
        assert status_of(reply) == 200 and body_of(reply) == b"hello world"
        assert w.up.requests[-1].body == b"hello world"
        assert b"content-length" not in dict(w.up.requests[-1].headers)
        # a chunked response, re-chunked to the client
        reply = await w.exchange(f"GET {base}/chunked HTTP/1.1\r\n{host}\r\n".encode())
        assert status_of(reply) == 200 and b"x-up: 1" in reply.lower()
        assert b"transfer-encoding: chunked" in reply.lower()
        assert _dechunk(body_of(reply)) == b"first second third"
        # a body ended by the upstream's close
        reply = await w.exchange(f"GET {base}/close HTTP/1.1\r\n{host}\r\n".encode())
        assert _dechunk(body_of(reply)) == b"until the end"
        # a big body with a length, and 100-continue answered by the proxy
        big = os.urandom(1 << 20)
        reader, writer = await w.open()
        writer.write(
            f"PUT {base}/echo HTTP/1.1\r\n{host}Expect: 100-continue\r\n"
            f"Content-Length: {len(big)}\r\n\r\n".encode()
        )
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 \r\n\r\n"
        writer.write(big)
        reply = await asyncio.wait_for(reader.read(), DEADLINE)
        writer.close()
        assert status_of(reply) == 200 and body_of(reply) == big
        assert b"expect" not in dict(w.up.requests[-1].headers)
        # HEAD: a length, no body
        reply = await w.exchange(f"HEAD {base}/big?100 HTTP/1.1\r\n{host}\r\n".encode())
        assert status_of(reply) == 200 and body_of(reply) == b""

    run(sock_dir, scenario)


def _dechunk(body: bytes) -> bytes:
    out = b""
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return out
        out, body = out + body[:size], body[size + 2 :]


# --- garbage, slow and big clients ---------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\xff\x16\x03\x01garbage\r\n\r\n",
        b"GET\r\n\r\n",
        b"CONNECT\r\n\r\n",
        b"CONNECT  HTTP/1.1\r\n\r\n",
        b"GET http://a/ HTTP/9.9\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\nBad Header: x\r\n\r\n",
        b"GET http://a/\x7f HTTP/1.1\r\n\r\n",
        b"\r\n\r\n\r\n",
        "GET http://allowed.é/ HTTP/1.1\r\n\r\n".encode(),
    ],
)
def test_garbage_gets_an_error_and_a_close(sock_dir: Path, garbage: bytes) -> None:
    async def scenario(w: World) -> None:
        reply = await w.exchange(garbage)
        assert 400 <= status_of(reply) < 600, reply
        assert w.up.connections == {"echo": 0, "early": 0, "http": 0}

    run(sock_dir, scenario)


def test_silence_and_an_early_close_end_quietly(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        assert await w.exchange(b"", half_close=True) == b""
        # half a head, then the end: an error answer (h11: the message is incomplete)
        reply = await w.exchange(b"CONNECT 127.0.0", half_close=True)
        assert status_of(reply) == 400
        await until(lambda: w.proxy.stats.active == 0, "both connections to end")

    run(sock_dir, scenario)


def test_a_huge_head_is_refused(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reader, writer = await w.open()
        writer.write(b"GET http://127.0.0.1/ HTTP/1.1\r\n")
        with_filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        try:
            for _ in range(100):  # 100 KB of headers, never ended
                writer.write(with_filler)
                await writer.drain()
        except OSError:
            pass  # the proxy closed on us: what it answered is still to be read
        reply = await asyncio.wait_for(reader.read(), DEADLINE)
        writer.close()
        assert status_of(reply) == 431
        assert w.up.connections["http"] == 0

    run(sock_dir, scenario)


def test_a_slow_client_is_closed_after_the_head_deadline(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        reader, writer = await w.open()
        started = time.monotonic()
        closed = asyncio.Event()
        got: list[bytes] = []

        async def read() -> None:
            got.append(await reader.read())
            closed.set()

        reading = asyncio.create_task(read())
        # slowloris: a byte of the head at a time, never its end
        for byte in b"GET http://127.0.0.1/ HTTP/1.1\r\nX-A: " + b"a" * 1000:
            if closed.is_set():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except OSError:
                break
            await asyncio.sleep(0.05)  # the attacker's pace, not a synchronisation
        await asyncio.wait_for(reading, DEADLINE)
        elapsed = time.monotonic() - started
        writer.close()
        assert status_of(got[0]) == 408
        assert elapsed >= 0.5  # not before the deadline

    run(sock_dir, scenario, head_timeout=0.5)


# --- upstreams that fail -------------------------------------------------------------


def test_an_upstream_that_refuses_or_hangs_gets_502_or_504(sock_dir: Path) -> None:
    dead = free_port()
    with stalled_listener() as stalled:

        async def scenario(w: World) -> None:
            reply = await w.exchange(connect(f"127.0.0.1:{dead}"))
            assert status_of(reply) == 502 and b"refused" in body_of(reply).lower()
            reply = await w.exchange(f"GET http://127.0.0.1:{dead}/ HTTP/1.1\r\n\r\n".encode())
            assert status_of(reply) in (400, 502)  # 1.1 without Host: 400 first
            reply = await w.exchange(connect(f"127.0.0.1:{stalled}"))
            assert status_of(reply) == 504
            reply = await w.exchange(connect("does-not-exist.invalid:443"))
            assert status_of(reply) in (502, 504)

        run(
            sock_dir,
            scenario,
            lambda up: [
                f"127.0.0.1:{dead}",
                f"127.0.0.1:{stalled}",
                f"127.0.0.1:{up.http_port}",
                "does-not-exist.invalid",
            ],
            connect_timeout=0.5,
        )


def test_an_upstream_that_speaks_garbage_gets_502(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        # the echo server answers the request with the request itself: not a response
        echo = w.up.echo_port
        reply = await w.exchange(
            f"GET http://127.0.0.1:{echo}/ HTTP/1.1\r\nHost: 127.0.0.1:{echo}\r\n\r\n".encode()
        )
        assert status_of(reply) == 502

    run(sock_dir, scenario)


# --- the socket and its lifetime -----------------------------------------------------


def test_the_socket_is_private_and_removed_by_close(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        mode = os.stat(w.path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600

    run(sock_dir, scenario)
    assert not (sock_dir / "proxy.sock").exists()


def test_close_ends_open_tunnels(sock_dir: Path) -> None:
    async def main() -> None:
        up = await Upstreams().start()
        proxy = await start_proxy(
            sock_dir / "p.sock", AllowList.parse([f"127.0.0.1:{up.echo_port}"])
        )
        reader, writer = await asyncio.open_unix_connection(os.fspath(sock_dir / "p.sock"))
        writer.write(connect(f"127.0.0.1:{up.echo_port}"))
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
        await proxy.close()
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""
        writer.close()
        await up.stop()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_a_callback_that_raises_does_not_break_the_proxy(sock_dir: Path) -> None:
    def boom(host: str, port: int, reason: str) -> None:
        raise RuntimeError("a bug of the caller")

    async def main() -> None:
        proxy = await start_proxy(sock_dir / "p.sock", AllowList.parse([]), on_refused=boom)
        for _ in range(2):
            reader, writer = await asyncio.open_unix_connection(os.fspath(sock_dir / "p.sock"))
            writer.write(connect("a.example:443"))
            assert status_of(await asyncio.wait_for(reader.read(), DEADLINE)) == 403
            writer.close()
        await proxy.close()

    with capture_logs() as logs:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    assert [e["event"] for e in logs].count("sandbox.proxy_callback_failed") == 2


def test_a_socket_that_cannot_be_made_is_a_sandbox_error(sock_dir: Path) -> None:
    async def main() -> None:
        with pytest.raises(SandboxError, match="proxy socket"):
            await start_proxy(sock_dir / "missing" / "p.sock", AllowList.parse([]))

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_a_raw_socket_client_that_sends_and_vanishes(sock_dir: Path) -> None:
    async def scenario(w: World) -> None:
        for _ in range(20):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(os.fspath(w.path))
            sock.sendall(connect(f"127.0.0.1:{w.up.echo_port}") + b"abc")
            sock.close()
        await until(lambda: w.proxy.stats.connections >= 20, "the connections")
        await until(lambda: w.proxy.stats.active == 0, "every connection to end")

    run(sock_dir, scenario)
