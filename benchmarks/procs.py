"""Processes of a benchmark run: hosts, relays, client processes, and their cleanup.

Every process is started in its own session and registered, and :meth:`Procs.close`
kills whatever is still running (hosts first with SIGTERM so they stop their agents,
then SIGKILL for the stragglers, agents included), also on Ctrl-C or an exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

PY = sys.executable
HERE = Path(__file__).resolve().parent
FLOOD = str(HERE / "agents" / "flood.py")
PR_SET_CHILD_SUBREAPER = 36


class BenchError(RuntimeError):
    """A process did not start or answer as expected."""


@dataclass
class Host:
    """A running host: its process, socket, and the agent processes under it."""

    proc: subprocess.Popen[bytes]
    home: Path
    agent_id: str
    started_ns: int
    ready_ns: int
    agents: list[psutil.Process] = field(default_factory=list)

    @property
    def socket(self) -> str:
        return str(self.home / "hosts" / f"{self.agent_id}.sock")

    @property
    def ps(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)


class Procs:
    """A registry of started processes and temporary homes, cleaned up by :meth:`close`."""

    def __init__(self) -> None:
        self.popens: list[subprocess.Popen[bytes]] = []
        self.hosts: list[Host] = []
        self.dirs: list[Path] = []

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tempdir(self) -> Path:
        """A fresh short directory under /tmp (AF_UNIX paths are limited to 107 bytes)."""
        path = Path(tempfile.mkdtemp(prefix="ahb-", dir="/tmp"))
        self.dirs.append(path)
        return path

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start a process in a session of its own and remember it."""
        proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        self.popens.append(proc)
        return proc

    def start_host(
        self,
        kind: str,
        command: Sequence[str] = (),
        options: Sequence[str] = (),
        timeout: float = 30,
    ) -> Host:
        """``agenthost serve`` in a new home; return once READY=1 was received.

        ``options`` are extra ``serve`` options (e.g. ``--ring-size``).
        """
        home = self.tempdir()
        agent_id = kind
        argv = [PY, "-m", "agenthost", "serve", "--agent-id", agent_id, "--home", str(home)]
        argv += ["--agent", kind, "--linger", "0", "--stop-timeout", "2", *options, "--", *command]
        env = dict(os.environ, AGENTHOST_DEMO_PACE="0")
        name = f"ahb-{secrets.token_hex(6)}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind("\0" + name)
            env["NOTIFY_SOCKET"] = "@" + name
            with open(home / "host.log", "wb") as log:
                started = time.monotonic_ns()
                proc = self.popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
            wait_ready(notify, proc, timeout, home / "host.log")
            ready = time.monotonic_ns()
        host = Host(proc, home, agent_id, started, ready)
        self.hosts.append(host)
        with contextlib.suppress(psutil.Error):
            host.agents = host.ps.children(recursive=True)
        return host

    def stop_host(self, host: Host, timeout: float = 10) -> None:
        """Stop a host (and its agent) with ``host.stop``; kill it if that fails."""
        with contextlib.suppress(OSError, BenchError):
            request(host.socket, "host.stop", {"force": True}, timeout=timeout)
        try:
            host.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(host.proc, signal.SIGKILL)
        kill_all(host.agents)
        self.hosts.remove(host)

    def close(self) -> None:
        """Kill everything still running and remove the temporary homes."""
        for proc in self.popens:
            if proc.poll() is None:
                kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.popens:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            if proc.poll() is None:
                kill_group(proc, signal.SIGKILL)
                proc.wait()
        for host in self.hosts:
            kill_all(host.agents)
        self.popens.clear()
        self.hosts.clear()
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)
        self.dirs.clear()


def wait_ready(
    notify: socket.socket, proc: subprocess.Popen[bytes], timeout: float, log: Path
) -> None:
    """Wait for ``READY=1`` on ``notify``; raise BenchError if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([notify], [], [], 0.05)
        if ready and "READY=1" in notify.recv(4096).decode(errors="replace").split("\n"):
            return
        if proc.poll() is not None:
            raise BenchError(f"host exited ({proc.returncode}): {tail(log)}")
    raise BenchError(f"host not ready within {timeout:g}s: {tail(log)}")


def tail(path: Path, size: int = 2000) -> str:
    """The end of a log file."""
    try:
        return path.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """Make this process the reaper of the orphans of its descendants while in the block.

    Hosts outlive the daemon that started them (and a double-forked host is an orphan
    from its start): as init or the service manager would, this process reaps them, so
    that none is left a zombie when the measurement is over.
    """
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def process_cpu_ns(pid: int) -> int:
    """CPU time (user + system, ns) a running process has used since it was forked:
    every thread it has or had, not its children.

    Read from the kernel's per-process CPU clock (``clock_getcpuclockid``: the clock id
    is ``~pid << 3 | CPUCLOCK_SCHED``), the same nanosecond count as
    ``/proc/PID/schedstat`` but for the whole thread group (schedstat is one thread's:
    it would miss a host's journal thread). Falls back to the sum of the live threads'
    schedstat; raises OSError if the process is gone.
    """
    try:
        return int(time.clock_gettime_ns((~pid << 3) | 2))
    except OSError:
        pass
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


def kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process group of ``proc`` (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL processes that still run (psutil checks they are the same processes)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def request(
    path: str, mtype: str, payload: dict[str, Any] | None = None, timeout: float = 10
) -> Any:
    """One request on a fresh connection; return the response payload."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(
            json.dumps({"type": mtype, "id": "r", "payload": payload or {}}).encode() + b"\n"
        )
        reply = read_line(sock)
    response = json.loads(reply)
    if not response.get("success"):
        raise BenchError(f"{mtype} failed: {response.get('error')}")
    return response.get("payload", {})


def read_line(sock: socket.socket) -> bytes:
    """Read up to and including the first newline (no bytes past it are expected)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise BenchError("connection closed before a full line")
        data += chunk
    return data


def cpu(proc: psutil.Process) -> float:
    """The CPU seconds (user + system) ``proc`` has used so far."""
    times = proc.cpu_times()
    return float(times.user + times.system)


def pss_mib(proc: psutil.Process) -> float:
    """``proc``'s proportional set size, in MiB."""
    return float(proc.memory_full_info().pss) / (1 << 20)
