"""Test tooling for the web gateway: a real ``python -m agenthost web`` process on
127.0.0.1 (port 0), its printed admin token and address, httpx clients, and an SSE
reader. Nothing sleeps to synchronise: lines are read with a deadline."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemontools import DaemonWorld
from hosttools import DEADLINE, PY, HostProc, wait_for

HostFactory = Callable[..., HostProc]


def read_line(proc: subprocess.Popen[bytes], timeout: float = DEADLINE) -> str:
    """The next line of ``proc``'s stdout; fail after ``timeout`` or at its end."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"no line from the gateway within {timeout}s: {buf!r}")
            byte = os.read(proc.stdout.fileno(), 1)
            if not byte:
                raise AssertionError(f"the gateway ended its output (exit {proc.wait()})")
            buf += byte
    return buf.decode().rstrip("\n")


@dataclass
class Gateway:
    """A running ``agenthost web``: ``url`` (ends with ``/``), the ``token`` of the
    first start (None when the home had a store already), its stderr in ``log_path``."""

    home: Path
    proc: subprocess.Popen[bytes]
    url: str
    token: str | None
    log_path: Path
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def origin(self) -> str:
        """The gateway's own origin (what its page's requests carry)."""
        return self.url.rstrip("/")

    def client(self, token: str | None = "admin", **kw: Any) -> httpx.Client:
        """An httpx client of the gateway with ``Authorization: Bearer`` (``"admin"``:
        the first token; None: no credentials). Closed at teardown."""
        headers = dict(kw.pop("headers", {}))
        bearer = self.token if token == "admin" else token
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        base_url = kw.pop("base_url", self.url)
        client = httpx.Client(
            base_url=base_url, headers=headers, timeout=DEADLINE, verify=False, **kw
        )
        self.clients.append(client)
        return client

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``agenthost web ARGS...`` on this gateway's home (e.g. ``token add x``)."""
        done = subprocess.run(
            [PY, "-m", "agenthost", "web", *args, "--home", str(self.home)],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def add_token(self, name: str, *scopes: str) -> str:
        """A new token (``agenthost web token add``)."""
        args = [a for s in scopes for a in ("--scope", s)]
        return self.cli("token", "add", name, *args).stdout.strip()

    def log(self) -> str:
        """What the gateway wrote on stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the gateway and wait for its exit status."""
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(DEADLINE)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


GatewayFactory = Callable[..., Gateway]
"""The ``gateway_factory`` fixture: ``gateway_factory(*args, env=None, listen=...,
nofile=None)``."""


def start_gateway(
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    listen: str = "127.0.0.1:0",
    nofile: int | None = None,
) -> Gateway:
    """Start ``agenthost web`` on ``home`` and wait for its listening line. ``nofile``:
    its soft and hard limit of open descriptors (set by ``prlimit``, so the gateway
    cannot raise it; the test is skipped without prlimit)."""
    log = home / f"web-{time.monotonic_ns()}.log"
    prefix: list[str] = []
    if nofile is not None:
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            pytest.skip("prlimit (util-linux) is not installed")
        prefix = [prlimit, f"--nofile={nofile}:{nofile}", "--"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*prefix, PY, "-m", "agenthost", "web", "--listen", listen, "--home", str(home), *args],
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    token = None
    try:
        line = read_line(proc)
        if line.startswith("token admin: "):
            token = line.removeprefix("token admin: ")
            line = read_line(proc)
        assert line.startswith("listening on "), line
    except BaseException:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the gateway did not start: {log.read_text()}") from None
    return Gateway(home, proc, line.removeprefix("listening on "), token, log)


@dataclass(frozen=True)
class SseEvent:
    """One Server-Sent Event as a browser sees it (comments not included)."""

    event: str
    data: str
    id: str | None

    def json(self) -> Any:
        return json.loads(self.data)


def sse_events(response: httpx.Response) -> Iterator[SseEvent]:
    """The events of a streaming SSE response, as the EventSource spec parses them."""
    event, data, ident = "message", [], None
    for line in response.iter_lines():
        if line == "":
            if data:
                yield SseEvent(event, "\n".join(data), ident)
            event, data, ident = "message", [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            ident = value


def take(events: Iterator[SseEvent], count: int) -> list[SseEvent]:
    """The next ``count`` events."""
    return [next(events) for _ in range(count)]


def until(events: Iterator[SseEvent], predicate: Any) -> list[SseEvent]:
    """Events up to and including the first for which ``predicate`` holds."""
    out = []
    for event in events:
        out.append(event)
        if predicate(event):
            return out
    raise AssertionError(f"the stream ended before the condition: {out[-3:]}")


def offsets(events: Sequence[SseEvent]) -> list[int]:
    """The offsets (SSE ids) of the stream events among ``events``."""
    return [int(e.id) for e in events if e.event == "message" and e.id is not None]


def say(api: httpx.Client, agent: str, text: str) -> int:
    """``POST /api/agents/AGENT/send``: the offset the host recorded the input at."""
    answer = api.post(f"/api/agents/{agent}/send", json={"input": text})
    assert answer.status_code == 200, answer.text
    offset: int = answer.json()["offset"]
    return offset


def echoed(text: str) -> Callable[[SseEvent], bool]:
    """Whether an event is the echo of ``text`` (hosttools.ECHO's)."""
    return lambda e: e.event == "message" and e.json().get("data") == f"echo {text}"


def head(host: HostProc) -> int:
    """The host's newest offset."""
    with host.raw() as conn:
        offset: int = conn.request("host.history", {"limit": 1})["payload"]["offset"]
    return offset


@contextlib.contextmanager
def gateway_of(world: DaemonWorld) -> Iterator[tuple[str, str, Path]]:
    """A gateway on ``world``'s home, started under its reaper: its URL, an admin token,
    and its log. Stopped with SIGTERM at the end, which it must survive cleanly."""
    added = world.cli("web", "token", "add", "ops", "--scope", "admin")
    assert added.returncode == 0, added.stderr
    log = world.home / "web.log"
    argv = [PY, "-m", "agenthost", "web", "--listen", "127.0.0.1:0"]
    gateway = world.reaper.spawn(argv, world.env, log)
    try:
        found = wait_for(
            lambda: re.search(r"listening on (\S+)", log.read_text()), what="the gateway"
        )
        yield found.group(1), added.stdout.strip(), log
    finally:
        os.kill(gateway, signal.SIGTERM)
        assert world.reaper.wait_exit(gateway, DEADLINE) == 0
