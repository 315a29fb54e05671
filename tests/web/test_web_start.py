"""What ``agenthost web`` prints when it starts: the first admin token only once it
listens (a start that cannot listen spends nothing), one listening line, and a port in
use that says what to do."""

from __future__ import annotations

import os
import pty
import re
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenthost.cli.web import MORE_TOKENS
from agenthost.web.app import STATIC
from agenthost.web.tokens import TokenStore

from hosttools import DEADLINE, PY
from webtools import GatewayFactory


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def web(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agenthost web ARGS`` on ``home``, to its end (a start that fails)."""
    return subprocess.run(
        [PY, "-m", "agenthost", "web", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def test_a_port_in_use_spends_no_token_and_says_how_to_get_a_free_port(
    home: Path, taken_port: int, gateway_factory: GatewayFactory
) -> None:
    failed = web(home, "--listen", f"127.0.0.1:{taken_port}")
    assert failed.returncode != 0
    assert "token" not in failed.stdout, failed.stdout  # nothing was issued
    assert f"cannot listen on 127.0.0.1:{taken_port}: in use" in failed.stderr
    assert "--listen 127.0.0.1:0" in failed.stderr, failed.stderr
    assert not TokenStore(home).exists()
    # the next start that listens is the first: it prints the token, which works
    gateway = gateway_factory()
    assert gateway.token is not None
    me = gateway.client().get("/api/me")
    assert me.status_code == 200 and me.json()["name"] == "admin"


def test_a_port_in_use_on_ipv6_suggests_a_bracketed_address(home: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    with socket.socket(socket.AF_INET6) as sock:
        try:
            sock.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
        sock.listen()
        port = sock.getsockname()[1]
        failed = web(home, "--listen", f"[::1]:{port}")
    assert failed.returncode != 0
    assert f"cannot listen on [::1]:{port}: in use" in failed.stderr
    assert "--listen [::1]:0" in failed.stderr, failed.stderr


def test_one_listening_line_and_the_token_hint_makes_a_token_that_can_send(
    gateway_factory: GatewayFactory, home: Path
) -> None:
    gateway = gateway_factory()
    gateway.stop()
    log = gateway.log()
    # the listening line on stdout (read by start_gateway), and no other in the log
    # but the gateway's own event (not a terminal here: a service's journal keeps it)
    assert "Started server process" not in log
    assert "Uvicorn running" not in log
    assert log.count('"web.listening"') == 1, log
    assert MORE_TOKENS in log  # the first start's hint
    # the command of the hint makes a token that may send and answer
    command = MORE_TOKENS.strip("`").split()
    assert command[:4] == ["agenthost", "web", "token", "add"]
    added = web(home, *command[2:4], "phone", *command[5:])
    assert added.returncode == 0, added.stderr
    scopes = TokenStore(home).records()["phone"].scopes
    assert {"send", "respond"} <= set(scopes)
    # and the login page names the same command
    assert MORE_TOKENS.strip("`") in (STATIC / "app.js").read_text()


def test_later_starts_print_only_the_listening_line(gateway_factory: GatewayFactory) -> None:
    first = gateway_factory()
    first.stop()
    second = gateway_factory()
    assert second.token is None  # start_gateway read the listening line first
    assert httpx.get(second.url + "api/me").status_code == 401


def read_until(fd: int, pattern: str, seen: str = "", timeout: float = DEADLINE) -> str:
    """What a terminal showed on ``fd`` (after ``seen``, what it showed before) up to
    the regular expression ``pattern`` (fails after ``timeout``)."""
    data = seen.encode()
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not re.search(pattern, data.decode(errors="replace")):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"no {pattern!r} on the terminal within {timeout}s: {data!r}")
            try:
                data += os.read(fd, 4096)
            except OSError as exc:  # EIO: the terminal's other side is closed
                raise AssertionError(f"the terminal closed before {pattern!r}: {data!r}") from exc
    return data.decode(errors="replace")


def test_on_a_terminal_the_token_and_one_listening_line(home: Path) -> None:
    # a person's terminal: stdout and stderr on one pseudo-terminal
    leader, follower = pty.openpty()
    argv = [PY, "-m", "agenthost", "web", "--listen", "127.0.0.1:0", "--home", str(home)]
    proc = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env={**os.environ, "NO_COLOR": "1"}
    )
    os.close(follower)
    try:
        screen = read_until(leader, r"listening on http://127\.0\.0\.1:\d+/\r?\n")
        proc.send_signal(signal.SIGINT)
        screen = read_until(leader, "web.stopping", screen)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    lines = screen.splitlines()
    assert [line for line in lines if "listening" in line] == [
        next(line for line in lines if line.startswith("listening on http://127.0.0.1:"))
    ], screen
    assert "Started server process" not in screen and "Shutting down" not in screen, screen
    # the limits in force are for a service's log, not for a person starting it
    assert "web.descriptors" not in screen and "web.caps" not in screen, screen
    token = next(line for line in lines if line.startswith("token admin: aht_"))
    assert lines.index(token) < next(i for i, x in enumerate(lines) if x.startswith("listening"))
    assert f"(shown once: keep it; {MORE_TOKENS} makes more)" in screen
