"""The gateway under hostile load, against a real gateway process on real sockets:
connections that send nothing or trickle a request are closed at a deadline, a flood
of them under a 1024-descriptor limit leaves room for an authorised request, and event
streams are capped per token (429) and in all (503)."""

from __future__ import annotations

import json
import selectors
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from agenthost.web.limits import caps_for

from hosttools import DEADLINE, PY, wait_for
from webtools import Gateway, GatewayFactory, HostFactory

NOFILE = 1024
"""The descriptor limit (soft and hard) the gateway gets: systemd's soft default."""
IDLE = 1100
"""Connections that send nothing: more than the gateway has descriptors."""


def address(gw: Gateway) -> tuple[str, int]:
    host, port = gw.url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    return host, int(port)


def connect(gw: Gateway) -> socket.socket:
    return socket.create_connection(address(gw), timeout=DEADLINE)


def request_head(gw: Gateway, method: str, path: str, token: str | None, **headers: str) -> bytes:
    host, port = address(gw)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(sock: socket.socket, *, body: bool = True) -> tuple[int, dict[str, str], bytes]:
    """The status, headers (lower-case names) and body (by Content-Length; none when
    ``body`` is False, e.g. for a stream) of the next answer on ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection ended before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if body:
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, "the connection ended within the body"
            rest += chunk
    return int(status_line.split()[1]), headers, rest


def ended(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (it is readable: only an end can come)."""
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, ssl.SSLEOFError):  # TLS: closed without close_notify
        return True


def wait_closed(
    socks: list[socket.socket], trickle: dict[socket.socket, bytes] | None = None
) -> None:
    """Wait until the server has closed each of ``socks`` (fail after DEADLINE); while
    waiting, send the next byte of ``trickle[sock]`` on each such socket about twice a
    second (a client that keeps its request coming, one byte at a time)."""
    trickle = dict(trickle)
    open_ = set(socks)
    deadline = time.monotonic() + DEADLINE
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            sel.register(sock, selectors.EVENT_READ)
        while open_:
            left = deadline - time.monotonic()
            assert left > 0, f"{len(open_)} of {len(socks)} connections still open"
            ready = sel.select(min(left, 0.5))  # the trickle's pace, and a wait for ends
            for key, _ in ready:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                assert ended(sock), "the server sent something to a silent connection"
                sel.unregister(sock)
                open_.discard(sock)
            if not ready:
                for sock, rest in trickle.items():
                    if sock in open_ and rest:
                        try:
                            sock.send(rest[:1])
                        except (BrokenPipeError, ConnectionResetError):
                            continue  # closed: the select says so next
                        trickle[sock] = rest[1:]


# Deadlines shorter than the defaults (5 s, 10 s, 30 s), so that a test that waits for
# one to pass takes seconds, not half a minute; long enough for a loaded machine to
# send a whole request at once well within them.
HEAD = "2"
BODY = "2"
WRITE = 3.0


def test_garbage_deadlines_are_usage_errors(home: Path) -> None:
    for option, value in (
        ("--head-timeout", "0"),
        ("--body-timeout", "-1"),
        ("--write-timeout", "nan"),
        ("--head-timeout", "inf"),
        ("--write-timeout", "soon"),
    ):
        done = subprocess.run(
            [PY, "-m", "agenthost", "web", "--home", str(home), option, value],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        assert done.returncode == 2 and option in done.stderr, (option, value, done.stderr)
    assert not (home / "web").exists()  # refused before anything was created


def test_a_request_must_come_whole_within_the_deadline(gateway_factory: GatewayFactory) -> None:
    """Silent, trickling head, trickling body, a trickle after a first answer: each is
    closed by the gateway, however regularly its bytes come."""
    gw = gateway_factory("--head-timeout", HEAD, "--body-timeout", BODY)
    endless = b"X-Slow: " + b"a" * 4000  # a header line that never ends
    with ExitStack() as stack:
        silent, head, body, second = (stack.enter_context(connect(gw)) for _ in range(4))
        head.sendall(b"GET /api/me HTTP/1.1\r\n")
        body.sendall(request_head(gw, "POST", "/api/login", None, Content_Length="4000"))
        second.sendall(request_head(gw, "GET", "/api/me", gw.token))
        assert read_answer(second)[0] == 200  # a whole request is answered
        second.sendall(b"GET /api/me HTTP/1.1\r\n")  # the next one never ends
        wait_closed(
            [silent, head, body, second],
            trickle={head: endless, body: b"x" * 4000, second: endless},
        )
    assert gw.client().get("/api/me").status_code == 200
    assert "Traceback" not in gw.log()  # a body cut short is a client's doing, not ours
    (caps,) = (json.loads(line) for line in gw.log().splitlines() if '"web.caps"' in line)
    assert (caps["head_timeout"], caps["body_timeout"], caps["write_timeout"]) == (2, 2, 30)


MESSAGES = 32
"""Of 250 kB each: an answer of 8 MB, more than the kernel buffers of a connection
(up to 4 MiB to send on Linux by default), so that the gateway holds the rest."""


@pytest.mark.slow
def test_a_large_answer_on_a_slow_link_arrives_whole(
    gateway_factory: GatewayFactory, host_factory: HostFactory
) -> None:
    """The deadline of the next request does not cut the answer still going out: a
    client that reads a large answer slowly, for longer than the head deadline, gets it
    all."""
    gateway = gateway_factory("--head-timeout", HEAD)
    host_factory("big")
    api = gateway.client()
    words = "word " * 50_000  # 250 kB a message: the history holds them all (16 MiB)
    for _ in range(MESSAGES):
        assert api.post("/api/agents/big/send", json={"input": words}).status_code == 200
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window
    sock.settimeout(DEADLINE)
    with sock:
        sock.connect(address(gateway))
        sock.sendall(request_head(gateway, "GET", "/api/agents/big/history", gateway.token))
        status, headers, body = read_answer(sock, body=False)
        assert status == 200
        length = int(headers["content-length"])
        assert length > MESSAGES * len(words)
        ticks = 0
        while len(body) < length:  # a twentieth five times a second: some 4 s, twice HEAD
            ticks += 1
            wanted = min(length * ticks // 20, length)
            time.sleep(0.2)  # the slow link's pace, not a synchronisation
            while len(body) < wanted:
                chunk = sock.recv(min(65536, wanted - len(body)))
                assert chunk, f"the answer was cut at {len(body)} of {length} bytes"
                body += chunk
    entries = json.loads(body)["entries"]
    assert sum(e.get("content") == words for e in entries) == MESSAGES


def test_under_tls_the_handshake_and_the_head_have_the_deadline_too(
    gateway_factory: GatewayFactory, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    gw = gateway_factory("--tls-cert", str(cert), "--tls-key", str(key), "--head-timeout", HEAD)
    trust = ssl.create_default_context(cafile=str(cert))
    with ExitStack() as stack:
        no_hello = stack.enter_context(connect(gw))  # not even a TLS ClientHello
        no_head = stack.enter_context(trust.wrap_socket(connect(gw), server_hostname="127.0.0.1"))
        wait_closed([no_hello, no_head], trickle={})


def test_idle_connections_under_a_1024_descriptor_limit_leave_room(
    gateway_factory: GatewayFactory,
) -> None:
    gw = gateway_factory(nofile=NOFILE)
    api = gw.client()
    with ExitStack() as stack:
        slow = [stack.enter_context(connect(gw)) for _ in range(5)]
        for sock in slow:
            sock.sendall(b"GET /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        idle = [stack.enter_context(connect(gw)) for _ in range(IDLE)]
        answer = api.get("/api/agents")  # a new connection: the gateway must take it
        assert answer.status_code == 200, answer.text
        assert answer.json() == []
        wait_closed(slow + idle, trickle={s: b"X-Slow: " + b"a" * 4000 for s in slow})
    # a new connection: ``api``'s kept-alive one idled as long as the others, and the
    # gateway may close it just as a request goes out on it
    assert gw.client().get("/api/me").status_code == 200
    log = gw.log()
    assert '"web.descriptors"' in log and f'"soft": {NOFILE}' in log


def tcp_reset(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock``, asked without reading what it sent: a
    byte sent to a closed socket is answered with a reset."""
    try:
        sock.send(b"\r\n", socket.MSG_DONTWAIT)  # blank lines between requests are allowed
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


@pytest.mark.slow
def test_a_client_that_reads_no_answer_is_closed(gateway_factory: GatewayFactory) -> None:
    """Requests sent in a row (pipelined) whose answers are never read: the gateway
    cannot write them, and gives up after the write deadline instead of waiting for
    good."""
    gateway = gateway_factory("--write-timeout", str(WRITE))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(DEADLINE)
    with sock:
        sock.connect(address(gateway))
        one = request_head(gateway, "GET", "/static/conversation.js", None)
        sock.sendall(one * 400)  # some 7 MB of answers, far more than the socket buffers
        wait_for(lambda: tcp_reset(sock), WRITE + DEADLINE, "the gateway to give up")
    assert gateway.client().get("/api/me").status_code == 200
    assert '"write_timeout": 3.0' in gateway.log()  # the deadline in force


# --- event streams ---------------------------------------------------------------------


@contextmanager
def open_stream(gw: Gateway, token: str, path: str = "/api/agents/c1/events") -> Iterator[Any]:
    """A stream asked for on a socket of its own: yields (status, headers, body)."""
    with connect(gw) as sock:
        sock.sendall(request_head(gw, "GET", path, token))
        status, headers, body = read_answer(sock, body=False)
        if status != 200:
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                body += sock.recv(65536)
        yield status, headers, body


def refused(answer: tuple[int, dict[str, str], bytes], status: int, code: str) -> None:
    got, headers, body = answer
    assert got == status, (got, body)
    assert json.loads(body)["code"] == code and set(json.loads(body)) == {"error", "code"}
    assert headers["retry-after"].isdigit() and int(headers["retry-after"]) > 0
    assert headers["content-type"] == "application/json"


def test_streams_are_capped_per_token_and_in_all(
    gateway_factory: GatewayFactory, host_factory: HostFactory
) -> None:
    host_factory("c1")
    gw = gateway_factory(nofile=NOFILE)
    caps = caps_for(NOFILE)
    assert caps.streams_per_token < caps.streams < caps.connections
    tokens = [
        gw.add_token(f"reader-{n}", "read")
        for n in range(caps.streams // caps.streams_per_token + 2)
    ]
    with ExitStack() as stack:

        def stream(token: str, path: str = "/api/agents/c1/events") -> Any:
            return stack.enter_context(open_stream(gw, token, path))

        first, *others = tokens
        for _ in range(caps.streams_per_token):
            assert stream(first)[0] == 200
        refused(stream(first), 429, "too_many_streams")
        refused(stream(first, "/api/events"), 429, "too_many_streams")  # the overview counts
        opened = caps.streams_per_token
        for token in others:  # another token gets its streams, up to the cap in all
            for _ in range(min(caps.streams_per_token, caps.streams - opened)):
                assert stream(token)[0] == 200
                opened += 1
        assert opened == caps.streams
        refused(stream(others[-1]), 503, "overloaded")
        refused(stream(others[-1], "/api/events"), 503, "overloaded")
        # still answered: what is not a stream
        assert gw.client().get("/api/agents").status_code == 200

    def reopens() -> bool:  # every stream ended: their slots come free
        with open_stream(gw, first) as again:
            return bool(again[0] == 200)

    wait_for(reopens, what="a stream of the first token again")
