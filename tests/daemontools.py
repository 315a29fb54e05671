"""Test tooling for the daemon: real daemon processes under a subreaper, raw requests,
process-tree checks. Nothing sleeps to synchronise: readiness is the daemon's READY=1,
everything else is waited for with :func:`hosttools.wait_for` and a deadline.

Every daemon, host and agent a test starts descends from one :class:`Reaper` (see
``tests/reaper.py``), so teardown can end them all, whatever the test did, and "no
zombie, no orphan" can be checked on a well-defined process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import select
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

from agenthost.lockfile import is_lock_held, read_lock_info

from hosttools import DEADLINE, PY, RawConn

TESTS = Path(__file__).resolve().parent
REAPER = TESTS / "reaper.py"
FLOOD_AGENT = str(TESTS / "fixtures" / "flood_agent.py")


def flood_command(*args: str) -> list[str]:
    """The command of a ``lines`` agent running ``tests/fixtures/flood_agent.py``."""
    return [PY, "-u", FLOOD_AGENT, *args]


class Reaper:
    """The subreaper process and what it reports (pids started, exit statuses)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [PY, str(REAPER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.exits: dict[int, int] = {}
        self._started: queue.Queue[int] = queue.Queue()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self._started.get(timeout=DEADLINE)  # its "ready" line

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                self._started.put(msg["ready"])
            elif "pid" in msg:
                self._started.put(msg["pid"])
            elif "exit" in msg:
                with self._cond:
                    self.exits[msg["exit"]] = msg["status"]
                    self._cond.notify_all()

    def spawn(
        self, argv: Sequence[str], env: dict[str, str] | None = None, log: Path | None = None
    ) -> int:
        """Start ``argv`` (in a session of its own) under the reaper; its pid."""
        assert self.proc.stdin is not None
        request = {
            "argv": list(argv),
            "env": env or dict(os.environ),
            "log": str(log or "/dev/null"),
        }
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        return self._started.get(timeout=DEADLINE)

    def exit_status(self, pid: int) -> int | None:
        with self._cond:
            return self.exits.get(pid)

    def wait_exit(self, pid: int, timeout: float = DEADLINE) -> int:
        with self._cond:
            if not self._cond.wait_for(lambda: pid in self.exits, timeout):
                raise AssertionError(f"pid {pid} did not exit within {timeout}s")
            return self.exits[pid]

    def tree(self) -> list[psutil.Process]:
        """Every process under the reaper."""
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def close(self) -> None:
        """Kill everything under the reaper, then the reaper itself."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class DaemonProc:
    """An ``agenthost daemon`` started by a test."""

    def __init__(self, world: DaemonWorld, pid: int, log: Path) -> None:
        self.world = world
        self.pid = pid
        self.log_path = log

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        return self.world.reaper.wait_exit(self.pid, timeout)

    def alive(self) -> bool:
        return self.world.reaper.exit_status(self.pid) is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, Any]]:
        """The daemon's JSON log lines whose ``event`` is ``name``."""
        out = []
        for line in self.log().splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict) and obj.get("event") == name:
                    out.append(obj)
        return out


class DaemonWorld:
    """A home directory, its reaper, and helpers to drive daemons in it."""

    def __init__(self, home: Path, reaper: Reaper) -> None:
        self.home = home
        self.reaper = reaper
        self.daemons: list[DaemonProc] = []
        self.env = {**os.environ, "AGENTHOST_HOME": str(home), "NO_COLOR": "1"}
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.pop("INVOCATION_ID", None)  # never try systemd scopes from a test

    @property
    def socket_path(self) -> Path:
        return self.home / "daemon.sock"

    @property
    def db_path(self) -> Path:
        return self.home / "daemon.db"

    def start_daemon(self, *args: str, timeout: float = DEADLINE) -> DaemonProc:
        """Start ``agenthost daemon`` under the reaper; return once it said READY=1."""
        log = self.home / f"daemon-{len(self.daemons) + 1}.log"
        name = f"ahtest-{secrets.token_hex(8)}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as notify:
            notify.bind("\0" + name)
            env = {**self.env, "NOTIFY_SOCKET": "@" + name}
            argv = [PY, "-m", "agenthost", "daemon", "--home", str(self.home)]
            argv += ["--log-level", "debug", *args]
            daemon = DaemonProc(self, self.reaper.spawn(argv, env, log), log)
            self.daemons.append(daemon)
            deadline = time.monotonic() + timeout
            while True:
                ready, _, _ = select.select([notify], [], [], 0.05)
                if ready and "READY=1" in notify.recv(4096).decode().split("\n"):
                    return daemon
                if not daemon.alive():
                    raise AssertionError(f"the daemon exited before it was ready:\n{daemon.log()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the daemon was not ready in {timeout}s:\n{daemon.log()}")

    def conn(self, timeout: float = DEADLINE) -> RawConn:
        return RawConn(self.socket_path, timeout)

    def call(self, mtype: str, payload: Any = None, timeout: float = 60) -> dict[str, Any]:
        """One request on a fresh connection; the whole response."""
        with self.conn(timeout) as conn:
            return conn.request(mtype, payload)

    def request(self, mtype: str, payload: Any = None, timeout: float = 60) -> dict[str, Any]:
        """One request; its payload (the request must succeed)."""
        response = self.call(mtype, payload, timeout)
        assert response["success"], response
        result: dict[str, Any] = response.get("payload") or {}
        return result

    def spawn(self, agent_id: str, command: Sequence[str], **spec: Any) -> dict[str, Any]:
        """``daemon.spawn`` of a ``lines`` agent."""
        payload = {"agent_id": agent_id, "agent": "lines", "command": list(command), **spec}
        return self.request("daemon.spawn", payload)

    def agents(self) -> dict[str, dict[str, Any]]:
        """``daemon.list`` by agent id."""
        return {a["agent_id"]: a for a in self.request("daemon.list")["agents"]}

    def ping(self) -> dict[str, Any]:
        return self.request("daemon.ping")

    def host_pids(self) -> dict[str, int]:
        """Agent id -> pid of every host whose lock is held."""
        out = {}
        for lock in (self.home / "hosts").glob("*.lock"):
            pid = (read_lock_info(lock) or {}).get("pid")
            if isinstance(pid, int) and is_lock_held(lock):
                out[lock.stem] = pid
        return out

    def registry(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of a query on the registry (read-only, as a second process would)."""
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``agenthost ARGS`` (for commands that start nothing in the background)."""
        return subprocess.run(
            [PY, "-m", "agenthost", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )

    def cli_bg(self, *args: str, timeout: float = 60) -> tuple[int, str]:
        """Run ``agenthost ARGS`` under the reaper (what it starts in the background is
        adopted by the reaper); its exit status and output (stdout then stderr)."""
        out = self.home / f"cli-{secrets.token_hex(4)}.out"
        pid = self.reaper.spawn([PY, "-m", "agenthost", *args], self.env, out)
        status = self.reaper.wait_exit(pid, timeout)
        return status, out.read_text()

    def close(self) -> None:
        """Kill the daemons, the hosts (their watchdogs end the agents) and the reaper,
        which kills whatever is left under it."""
        for daemon in self.daemons:
            with contextlib.suppress(ProcessLookupError):
                if daemon.alive():
                    daemon.signal(signal.SIGKILL)
        for pid in self.host_pids().values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.reaper.close()


def zombies(reaper: Reaper) -> list[psutil.Process]:
    """Zombie processes under the reaper (it reaps its own children at once, so any
    zombie that stays is a process whose live parent does not reap it)."""
    out = []
    for proc in reaper.tree():
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.status() == psutil.STATUS_ZOMBIE and proc.ppid() != reaper.proc.pid:
                out.append(proc)
    return out


def cmdline_has(proc: psutil.Process, text: str) -> bool:
    with contextlib.suppress(psutil.Error):
        return any(text in part for part in proc.cmdline())
    return False


def read_stream(conn: RawConn, frames: list[dict[str, Any]], stop: threading.Event) -> None:
    """Collect every frame of a watch connection until it closes (a thread's body)."""
    conn.sock.settimeout(0.2)
    while not stop.is_set():
        try:
            frames.append(conn.frame())
        except TimeoutError:
            continue
        except (EOFError, OSError):
            return


class StreamCollector:
    """A ``daemon.watch`` connection read by a thread: every host event kept per agent,
    every notice kept in order; :meth:`wait` waits for a condition on them."""

    def __init__(self, world: DaemonWorld, payload: dict[str, Any] | None = None) -> None:
        self.conn = world.conn()
        response = self.conn.request("daemon.watch", payload or {})
        assert response["success"], response
        self.start: dict[str, Any] = response["payload"]["agents"]
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.notices: list[dict[str, Any]] = []
        self.closed = False
        self._cond = threading.Condition()
        for frame in self.conn._stash:  # frames that came with the response
            self._add(frame)
        self.conn._stash.clear()
        self.conn.sock.settimeout(None)  # an idle stream is not an error; close() wakes it
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _add(self, frame: dict[str, Any]) -> None:
        with self._cond:
            if frame.get("kind") == "event":
                self.events.setdefault(frame["agent_id"], []).append(frame)
            elif frame.get("kind") == "notice":
                self.notices.append(frame)
            self._cond.notify_all()

    def _read(self) -> None:
        try:
            while True:
                self._add(self.conn._read_frame())
        except (EOFError, OSError, ValueError):
            pass
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def wait(self, predicate: Any, timeout: float = DEADLINE, what: str = "frames") -> None:
        """Wait until ``predicate(self)`` is true (checked on every frame)."""
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def count(self, agent_id: str) -> int:
        return len(self.events.get(agent_id, ()))

    def offsets(self, agent_id: str) -> list[int]:
        with self._cond:
            return [e["offset"] for e in self.events.get(agent_id, ())]

    def saw(self, agent_id: str, data: str) -> bool:
        events = self.events.get(agent_id)
        return bool(events) and any(e.get("data") == data for e in reversed(events[-50:]))

    def epoch(self, agent_id: str) -> str:
        """The epoch of the agent's stream, from this watch's start or its notices."""
        with self._cond:
            for notice in reversed(self.notices):
                if notice["agent_id"] == agent_id and notice["type"] == "host_attached":
                    return str(notice["epoch"])
        return str(self.start[agent_id]["epoch"])

    def close(self, timeout: float = DEADLINE) -> None:
        """Close the connection (or, after the daemon died, just collect the rest)."""
        with contextlib.suppress(OSError):
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout)
        self.conn.close()

    def drain(self, timeout: float = DEADLINE) -> None:
        """Wait until the daemon closed the stream (it died) and every byte was read."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.closed, timeout):
                raise AssertionError("the watch stream did not end")
        self._thread.join(timeout)
        self.conn.close()


def agent_status(world: DaemonWorld, agent_id: str) -> dict[str, Any]:
    """The ``agent`` of the agent's ``host.status``; {} while no host answers."""
    try:
        with RawConn(world.home / "hosts" / f"{agent_id}.sock") as conn:
            answer = conn.request("host.status")
    except OSError:
        return {}
    return answer["payload"]["agent"] if answer["success"] else {}


FAKE_CLAUDE = TESTS / "fixtures" / "fake_claude.py"


def use_fake_claude(world: DaemonWorld) -> Path:
    """Install ``tests/fixtures/fake_claude.py`` as the ``claude`` program of the world's
    daemon and hosts (``AGENTHOST_CLAUDE_BIN``); its path."""
    program = world.home / "bin" / "claude"
    program.parent.mkdir(exist_ok=True)
    program.write_text(f'#!/bin/sh\nexec {PY} {FAKE_CLAUDE} "$@"\n')
    program.chmod(0o755)
    world.env["AGENTHOST_CLAUDE_BIN"] = str(program)  # the daemon's and its hosts'
    return program


@contextlib.contextmanager
def daemon_world(home: Path) -> Iterator[DaemonWorld]:
    """A :class:`DaemonWorld` in ``home``; every daemon, host and agent started in it
    is killed on exit, however the test ended (the body of the ``world`` fixtures)."""
    world = DaemonWorld(home, Reaper())
    try:
        yield world
    finally:
        world.close()
