"""Starting hosts that outlive the daemon.

A host is ``python -m agenthost serve --agent-id ID --home HOME ...`` run

* in a session of its own (``setsid``), stdio on ``/dev/null`` and its log file
  ``<home>/logs/<id>.log``, never on a pipe to the daemon, so neither the daemon's
  death nor its terminal reaches it;
* and, when the daemon itself runs under systemd, in a transient scope of its own
  (``systemd-run --user --scope``): stopping or restarting the daemon's unit kills the
  unit's cgroup, and the host must not be in it.

Readiness uses the host's own ``READY=1`` on a private ``NOTIFY_SOCKET`` (as
:mod:`agenthost.launch` does, but awaited on the event loop); then the socket must
answer a ping. The daemon stays the parent of the hosts it started and reaps them when
they exit (a pidfd per child, watched by the loop), so no zombie is left while it runs;
after its death they are adopted by init or the service manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import structlog

from agenthost.client import AsyncClient
from agenthost.daemon.protocol import SpawnSpec
from agenthost.errors import AgentHostError, ConfigError, HostAlreadyRunning
from agenthost.hostoptions import DEFAULTS, HostOptions
from agenthost.launch import HostStartError, log_tail, start_logged
from agenthost.lockfile import is_lock_held
from agenthost.paths import ensure_private_dir, lock_path, log_path, logs_dir, socket_path

log = structlog.get_logger("agenthost.daemon.spawner")

HostScope = Literal["auto", "systemd", "session"]
_T = TypeVar("_T")

# What belongs to the daemon's service manager, not to the hosts it starts.
_PRIVATE_ENV: Final = (
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "INVOCATION_ID",
    "JOURNAL_STREAM",
    "MANAGERPID",
    "SYSTEMD_EXEC_PID",
)


@dataclass(frozen=True, slots=True)
class SpawnedHost:
    """A host the daemon started."""

    agent_id: str
    pid: int
    socket_path: Path
    log_path: Path
    unit: str | None = None


def host_options(
    spec: SpawnSpec, home: Path, *, resume: str | None = None, log_level: str = "info"
) -> HostOptions:
    """The options of the host that runs ``spec`` (``resume`` overrides the spec's);
    what the spec leaves unset keeps the host's default."""
    return HostOptions(
        agent_id=spec.agent_id,
        home=home,
        agent=spec.agent,
        command=tuple(spec.command),
        cwd=Path(spec.cwd) if spec.cwd is not None else None,
        env=dict(spec.env),
        project=spec.project,
        task=spec.task,
        description=spec.description,
        agent_opts=dict(spec.agent_opts),
        resume=resume if resume is not None else spec.resume,
        linger=_given(spec.linger, DEFAULTS.linger),
        stop_timeout=_given(spec.stop_timeout, DEFAULTS.stop_timeout),
        ring_size=_given(spec.ring_size, DEFAULTS.ring_size),
        ring_bytes=_given(spec.ring_bytes, DEFAULTS.ring_bytes),
        log_level=log_level,
    )


def _given(value: _T | None, default: _T) -> _T:
    return default if value is None else value


class Spawner:
    """Starts hosts, and reaps the ones it started."""

    def __init__(
        self,
        home: Path,
        *,
        scope: HostScope = "auto",
        log_level: str = "info",
        ready_timeout: float = 30.0,
        ping_timeout: float = 5.0,
    ) -> None:
        self.home = home
        self.requested_scope: HostScope = scope
        self.scope: Literal["systemd", "session"] = "session"
        self.log_level = log_level
        self.ready_timeout = ready_timeout
        self.ping_timeout = ping_timeout
        self._children: dict[int, tuple[subprocess.Popen[bytes], int, asyncio.Future[int]]] = {}

    async def resolve_scope(self) -> str:
        """Decide how hosts are started: in a systemd scope when asked, or when ``auto``
        and the daemon runs under systemd (``INVOCATION_ID``) with a working
        ``systemd-run --user``; else in a session of their own."""
        want = self.requested_scope
        if want == "session" or (want == "auto" and not os.environ.get("INVOCATION_ID")):
            self.scope = "session"
            return self.scope
        tool = shutil.which("systemd-run")
        ok = False
        if tool is not None:
            proc = await asyncio.create_subprocess_exec(
                tool,
                "--user",
                "--scope",
                "--quiet",
                "--collect",
                "true",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            ok = await proc.wait() == 0
        if not ok:
            if want == "systemd":
                raise ConfigError(
                    "cannot start hosts in systemd scopes: `systemd-run --user --scope` fails",
                    hint="run the daemon with --host-scope session, or fix the user manager",
                )
            log.warning("spawner.no_systemd_scope", fallback="session")
        self.scope = "systemd" if ok else "session"
        return self.scope

    @property
    def children(self) -> int:
        """Hosts started by this daemon that have not exited yet."""
        return len(self._children)

    async def spawn(self, spec: SpawnSpec, *, resume: str | None = None) -> SpawnedHost:
        """Start a host for ``spec``; return once it reported READY=1 and answers a ping.

        Raise HostAlreadyRunning if a live host holds the agent's lock, HostStartError
        (with the end of its log) if it exits or is not ready in time.
        """
        agent_id = spec.agent_id
        if is_lock_held(lock_path(self.home, agent_id)):
            raise HostAlreadyRunning(f"a host for agent {agent_id!r} is already running")
        ensure_private_dir(logs_dir(self.home))
        log_file = log_path(self.home, agent_id)
        options = host_options(spec, self.home, resume=resume, log_level=self.log_level)
        argv = options.command_line()
        unit = None
        if self.scope == "systemd":
            unit = f"agenthost-host-{agent_id}-{secrets.token_hex(3)}"
            argv = [
                "systemd-run",
                "--user",
                "--scope",
                "--quiet",
                "--collect",
                f"--unit={unit}",
                f"--description=agenthost host for agent {agent_id}",
                "--",
                *argv,
            ]
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        # the agent's environment never goes on the host's command line (world-readable)
        env.update(options.to_env())
        name = f"agenthost-daemon-{secrets.token_hex(8)}"
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            notify.bind("\0" + name)
            notify.setblocking(False)
            env["NOTIFY_SOCKET"] = "@" + name
            start_offset = log_file.stat().st_size if log_file.exists() else 0
            proc = self._start(argv, env, log_file, spec)
            exited = self._watch(proc)
            try:
                await self._wait_ready(notify, exited)
            except HostStartError as exc:
                raise HostStartError(
                    f"the host for {agent_id!r} {exc.message}", log_tail(log_file, start_offset)
                ) from None
        finally:
            notify.close()
        try:
            async with AsyncClient(
                agent_id,
                home=self.home,
                connect_timeout=self.ping_timeout,
                request_timeout=self.ping_timeout,
            ) as client:
                await client.ping()
        except AgentHostError as exc:
            raise HostStartError(f"the host for {agent_id!r} does not answer: {exc}") from exc
        log.info("host.spawned", agent_id=agent_id, pid=proc.pid, unit=unit)
        return SpawnedHost(agent_id, proc.pid, socket_path(self.home, agent_id), log_file, unit)

    def _start(
        self, argv: list[str], env: dict[str, str], log_file: Path, spec: SpawnSpec
    ) -> subprocess.Popen[bytes]:
        cwd = spec.cwd if spec.cwd and os.path.isdir(spec.cwd) else str(self.home)
        try:
            return start_logged(argv, log_file, env=env, cwd=cwd)
        except OSError as exc:
            raise ConfigError(f"cannot start a host: {exc}") from exc

    def _watch(self, proc: subprocess.Popen[bytes]) -> asyncio.Future[int]:
        """Reap ``proc`` when it exits (the returned future gets its status)."""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int] = loop.create_future()
        pidfd = os.pidfd_open(proc.pid)
        self._children[proc.pid] = (proc, pidfd, exited)
        loop.add_reader(pidfd, self._reap, proc.pid)
        return exited

    def _reap(self, pid: int) -> None:
        entry = self._children.get(pid)
        if entry is None:
            return
        proc, pidfd, exited = entry
        code = proc.poll()
        if code is None:
            return
        asyncio.get_running_loop().remove_reader(pidfd)
        os.close(pidfd)
        del self._children[pid]
        if not exited.done():
            exited.set_result(code)
        log.info("host.reaped", pid=pid, status=code)

    async def _wait_ready(self, notify: socket.socket, exited: asyncio.Future[int]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        while True:
            recv = loop.create_task(loop.sock_recv(notify, 4096))
            waiters: set[asyncio.Future[Any]] = {recv, exited}
            try:
                remaining = deadline - loop.time()
                done, _ = await asyncio.wait(
                    waiters,
                    timeout=max(0.0, remaining),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                if not recv.done():
                    recv.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await recv
            if recv in done and "READY=1" in recv.result().decode(errors="replace").split("\n"):
                return
            if exited.done():
                raise HostStartError(f"exited with status {exited.result()} before it was ready")
            if not done:
                self._kill_starting(exited)
                raise HostStartError(f"was not ready within {self.ready_timeout:g}s")

    def _kill_starting(self, exited: asyncio.Future[int]) -> None:
        for pid, (_, _, future) in self._children.items():
            if future is exited:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)  # it leads its own session and group

    def close(self) -> None:
        """Stop watching the children (they keep running; init or systemd reaps them)."""
        loop = asyncio.get_running_loop()
        for proc, pidfd, _ in self._children.values():
            loop.remove_reader(pidfd)
            os.close(pidfd)
            # Popen would reap on garbage collection: mark it handled, it is not ours now
            proc.returncode = proc.returncode if proc.returncode is not None else 0
        self._children.clear()
