"""Test tooling: real host processes, raw socket connections, condition waits.

Nothing here sleeps to synchronise: :func:`wait_for` polls a condition until a
deadline, readiness uses the host's own ``READY=1`` notification, and raw reads block
on the socket with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psutil

from agenthost.client import Client
from agenthost.launch import ReadyListener

from forkhosts import ExecdFactory, ForkedProc, fork_host

T = TypeVar("T")
DEADLINE = 30.0
PY = sys.executable


@contextlib.contextmanager
def short_tmp_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory under /tmp (AF_UNIX paths must stay under 108 bytes), removed
    with what is in it afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def wait_for(predicate: Callable[[], T], timeout: float = DEADLINE, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)  # polling interval of a condition wait, not a synchronisation
        delay = min(delay * 2, 0.05)


async def wait_until(
    predicate: Callable[[], object], what: str = "condition", timeout: float = DEADLINE
) -> None:
    """:func:`wait_for` on a running event loop: poll ``predicate`` between the loop's
    other work until it is truthy; fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.002)  # polling interval of a condition wait


def pid_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie counts as gone)."""
    try:
        proc = psutil.Process(pid)
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class RawConn:
    """A blocking raw connection to a host socket, for protocol-level tests."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock.connect(os.fspath(path))
                break
            except BlockingIOError:  # listen backlog full: AF_UNIX says EAGAIN, retry
                if time.monotonic() > deadline:
                    self.sock.close()
                    raise
                time.sleep(0.005)
            except OSError:
                self.sock.close()
                raise
        self.buf = b""
        self._ids = 0
        self._stash: list[dict[str, Any]] = []  # events read while looking for a response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, mtype: str, payload: Any = None, **envelope: Any) -> str:
        self._ids += 1
        rid = f"t{self._ids}"
        obj: dict[str, Any] = {"type": mtype, "id": rid, **envelope}
        if payload is not None:
            obj["payload"] = payload
        self.send_raw((json.dumps(obj) + "\n").encode())
        return rid

    def frame(self) -> dict[str, Any]:
        """The next frame; raises on EOF or timeout."""
        if self._stash:
            return self._stash.pop(0)
        return self._read_frame()

    def _read_frame(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("connection closed by the host")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    def read_until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Read frames (blocking, with the socket timeout) until one matches."""
        while True:
            f = self.frame()
            if predicate(f):
                return f

    def response(self, rid: Any = None) -> dict[str, Any]:
        """The next response frame (with id ``rid`` if given); frames read on the way
        are kept for ``frame()``."""

        def wanted(f: dict[str, Any]) -> bool:
            return f.get("kind") == "response" and (rid is None or f.get("id") == rid)

        for i, f in enumerate(self._stash):
            if wanted(f):
                return self._stash.pop(i)
        while True:
            f = self._read_frame()
            if wanted(f):
                return f
            self._stash.append(f)

    def request(self, mtype: str, payload: Any = None, **envelope: Any) -> dict[str, Any]:
        rid = self.send(mtype, payload, **envelope)
        return self.response(rid)

    def events(self, until_offset: int) -> list[dict[str, Any]]:
        """Events up to and including ``until_offset`` (responses are an error here)."""
        out: list[dict[str, Any]] = []
        while not out or out[-1]["offset"] < until_offset:
            f = self.frame()
            assert f["kind"] == "event", f
            out.append(f)
        return out

    def closed_by_peer(self) -> bool:
        """Read until EOF (discarding data); True if the host closed the connection."""
        try:
            while self.sock.recv(1 << 16):
                pass
        except (ConnectionResetError, BrokenPipeError):
            return True
        return True


class HostProc:
    """An ``agenthost serve`` process started by a test."""

    def __init__(
        self, home: Path, agent_id: str, proc: subprocess.Popen[bytes] | ForkedProc, log: Path
    ):
        self.home = home
        self.agent_id = agent_id
        self.proc = proc
        self.log_path = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def socket_path(self) -> Path:
        return self.home / "hosts" / f"{self.agent_id}.sock"

    @property
    def lock_path(self) -> Path:
        return self.home / "hosts" / f"{self.agent_id}.lock"

    def client(self, **kw: Any) -> Client:
        client = Client(self.agent_id, home=self.home, **kw)
        client.connect()
        return client

    def raw(self, timeout: float = 10.0) -> RawConn:
        return RawConn(self.socket_path, timeout)

    def status(self) -> dict[str, Any]:
        with self.raw() as conn:
            resp = conn.request("host.status")
        assert resp["success"], resp
        payload: dict[str, Any] = resp["payload"]
        return payload

    def agent(self) -> dict[str, Any]:
        agent: dict[str, Any] = self.status()["agent"]
        return agent

    def wait_state(self, *states: str, timeout: float = DEADLINE) -> dict[str, Any]:
        return wait_for(
            lambda: (a := self.agent())["state"] in states and a,
            timeout,
            f"state in {states}",
        )

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        return self.proc.wait(timeout)

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None


Event = dict[str, Any]
#: An offset past any journal's head: attaching there delivers live events only.
HEAD = 1 << 40


def events_until(conn: RawConn, predicate: Callable[[Event], bool]) -> list[Event]:
    """Events (responses skipped) up to and including the first matching ``predicate``."""
    out: list[Event] = []
    while True:
        frame = conn.frame()
        if frame["kind"] != "event":
            continue
        out.append(frame)
        if predicate(frame):
            return out


def is_state(state: str) -> Callable[[Event], bool]:
    """A predicate: the event is a change to ``state``."""
    return lambda e: e["type"] == "state" and e["state"] == state


def is_result(event: Event) -> bool:
    """Whether the event is a turn's result."""
    return bool(event["type"] == "result")


def entries(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The chat entries among ``events`` (the user's too)."""
    return [e["chat_entry"] for e in events if e["type"] == "chat_entry"]


def chat(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The agent's chat entries among ``events`` (not the user's)."""
    return [e for e in entries(events) if e["role"] != "user"]


def results(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The results (one per turn) among ``events``."""
    return [e["result"] for e in events if e["type"] == "result"]


def states(events: Sequence[Event]) -> list[str]:
    """The states the events change to, in order."""
    return [e["state"] for e in events if e["type"] == "state"]


def attached(host: HostProc, offset: int = HEAD, timeout: float = 10.0) -> RawConn:
    """A raw connection attached at ``offset`` (by default after the current head: live
    events only); ``timeout`` bounds each of its reads."""
    conn = host.raw(timeout=timeout)
    head = conn.request("host.attach", {"offset": offset})
    assert head["success"], head
    return conn


def turn(host: HostProc, text: str, timeout: float = 10.0) -> list[Event]:
    """Send ``text`` on a connection attached after the head; the events up to the
    turn's result."""
    with attached(host, timeout=timeout) as conn:
        assert conn.request("host.send", {"input": text})["success"]
        return events_until(conn, is_result)


def settle(conn: RawConn, count: int = 1) -> list[Event]:
    """Events up to the ``count``-th result and the ``idle`` state after it."""
    events: list[Event] = []
    while len(results(events)) < count or not is_state("idle")(events[-1]):
        events += events_until(conn, lambda e: e["type"] in ("result", "state"))
    return events


def settled_turn(conn: RawConn, text: str, count: int = 1) -> list[Event]:
    """Send ``text`` on ``conn`` (attached already); the events until :func:`settle`."""
    assert conn.request("host.send", {"input": text})["success"]
    return settle(conn, count)


def history(host: HostProc) -> list[Event]:
    """The host's chat history (``host.history`` entries)."""
    with host.raw() as conn:
        found: list[Event] = conn.request("host.history")["payload"]["entries"]
    return found


def serve_argv(
    home: Path,
    agent_id: str,
    args: Sequence[str],
    command: Sequence[str],
    wrapper: Sequence[str] = (),
) -> list[str]:
    argv = [*wrapper, PY, "-m", "agenthost", "serve", "--agent-id", agent_id, "--home", str(home)]
    argv += ["--log-level", "debug", *args]
    if command:
        argv += ["--", *command]
    return argv


def start_host(
    home: Path,
    agent_id: str = "a1",
    *args: str,
    command: Sequence[str] = (),
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    wrapper: Sequence[str] = (),
    factory: ExecdFactory | None = None,
) -> HostProc:
    """Start ``agenthost serve`` and wait for its READY=1 notification.

    ``wrapper`` is a command that execs the host (e.g. ``prlimit ... --``). With
    ``factory`` (and no wrapper), the host is forked from that host factory instead.
    """
    log = home / f"{agent_id}.host.log"
    full_env = {**os.environ, "AGENTHOST_DEMO_PACE": "0", **(env or {})}
    with ReadyListener() as listener:
        full_env["NOTIFY_SOCKET"] = listener.address
        argv = serve_argv(home, agent_id, args, command, wrapper)
        proc: subprocess.Popen[bytes] | ForkedProc
        if factory is not None and not wrapper:
            proc = fork_host(factory, argv, full_env, str(log))
        else:
            with open(log, "ab") as fh:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, env=full_env
                )
        host = HostProc(home, agent_id, proc, log)
        if wait_ready:
            try:
                listener.wait(proc, DEADLINE)
            except Exception as exc:
                raise AssertionError(f"host did not start: {exc}\n{host.log()}") from exc
    return host


def kill_tree(proc: subprocess.Popen[bytes] | ForkedProc) -> None:
    """SIGKILL a host and every process of its agent's group (test teardown)."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for p in [*children]:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``agenthost ARGS --home HOME`` (no colours), its output captured as text."""
    return subprocess.run(
        [PY, "-m", "agenthost", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )


def lines_agent(code: str) -> list[str]:
    """A ``lines`` agent command running a Python snippet."""
    return [PY, "-u", "-c", code]


ECHO = lines_agent(
    "import sys\n"
    "for line in sys.stdin:\n"
    "    if line.startswith('exit'):\n"
    "        sys.exit(0)\n"
    "    print('echo ' + line.strip(), flush=True)\n"
)
"""A ``lines`` agent that prints ``echo LINE`` for each line, and exits at ``exit``."""


def iter_offsets(events: Sequence[dict[str, Any]]) -> Iterator[int]:
    for e in events:
        yield int(e["offset"])


def assert_contiguous(offsets: Sequence[int], first: int, last: int | None = None) -> None:
    """``offsets`` is exactly first, first+1, ... (, last)."""
    expected_last = first + len(offsets) - 1 if last is None else last
    assert list(offsets) == list(range(first, expected_last + 1)), (
        f"not contiguous: first={offsets[:3]}... expected {first}..{expected_last}, "
        f"got {len(offsets)} offsets"
    )
