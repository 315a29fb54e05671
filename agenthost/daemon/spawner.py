"""Starting hosts that outlive the daemon.

A host is ``python -P -m agenthost serve --agent-id ID --home HOME ...`` run

* in a session of its own (``setsid``), stdio on ``/dev/null`` and its log file
  ``<home>/logs/<id>.log``, never on a pipe to the daemon, so neither the daemon's
  death nor its terminal reaches it;
* and, when the daemon itself runs under systemd, in a transient scope of its own
  (``systemd-run --user --scope``): stopping or restarting the daemon's unit kills the
  unit's cgroup, and the host must not be in it.

With a host factory (:mod:`agenthost.hostfactory`, started by ``agenthost daemon``),
a host in a session of its own is forked from the factory's pre-imported process
instead of exec'd: the same ``serve`` command with the same arguments, environment and
log, at a fraction of the CPU and memory. If the factory is gone or refuses, the host is
exec'd; if it dies in the middle of an order, the host it may have forked and the exec'd
one race for the agent's lock, and the spawn takes whichever gets ready (the other one
exits: the lock is held). Systemd scopes are always exec'd (``systemd-run`` must start
the process it puts in the scope).

Readiness uses the host's own ``READY=1`` on a private ``NOTIFY_SOCKET`` (as
:mod:`agenthost.launch` does, but awaited on the event loop); then the socket must
answer a ping. The daemon stays the parent of the hosts it exec'd and reaps them when
they exit (a pidfd per child, watched by the loop); the factory reaps the ones it
forked and reports their end. No zombie is left while they run; after their death the
hosts are adopted by init or the service manager.
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
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import structlog

from agenthost.client import AsyncClient
from agenthost.daemon import resources
from agenthost.daemon.protocol import SpawnSpec
from agenthost.errors import AgentHostError, ConfigError, FactoryError, HostAlreadyRunning
from agenthost.hostfactory.handle import Factory
from agenthost.hostfactory.messages import Order
from agenthost.hostoptions import DEFAULTS, HostOptions
from agenthost.launch import HostStartError, log_tail, open_log, start_failure, start_logged
from agenthost.lockfile import is_lock_held, read_lock_info
from agenthost.paths import ensure_private_dir, lock_path, log_path, logs_dir, socket_path
from agenthost.terminal.sizes import parse_size

log = structlog.get_logger("agenthost.daemon.spawner")

HostScope = Literal["auto", "systemd", "session"]

FACTORY_RESTART_INTERVAL: Final = 30.0
"""Seconds between two restarts of a host factory that went away (hosts are exec'd in
between), so that a factory that cannot live is not restarted at every spawn."""
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
    how: Literal["fork", "exec"] = "exec"
    """Forked by the host factory, or exec'd."""


def host_options(
    spec: SpawnSpec, home: Path, *, resume: str | None = None, log_level: str = "info"
) -> HostOptions:
    """The options of the host that runs ``spec`` (``resume`` overrides the spec's, and
    its ``fork``: a forked agent's restart resumes its own session); what the spec
    leaves unset keeps the host's default."""
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
        # a fork's first start forks; a restart resumes the fork's own session
        fork=spec.fork.session_id if spec.fork and resume is None and not spec.resume else None,
        fork_at=spec.fork.point if spec.fork and resume is None and not spec.resume else None,
        forked_from=spec.fork.from_agent if spec.fork else None,
        budget_usd=spec.budget_usd,
        budget_tokens=spec.budget_tokens,
        sandbox=spec.sandbox,
        size=parse_size(spec.size) if spec.size is not None else None,
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
        self.factory: Factory | None = None
        """Where hosts are forked from (None: every host is exec'd)."""
        self._factory_restarted_at = -FACTORY_RESTART_INTERVAL
        self._children: dict[int, asyncio.Future[int]] = {}
        """Hosts started and not yet ended: pid -> their exit status to come."""
        self._execd: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
        """The exec'd ones among them (the daemon reaps those): pid -> (Popen, pidfd)."""

    def use_factory(self, factory: Factory | None) -> None:
        """Fork hosts from ``factory`` (from :meth:`resolve_scope` on, when hosts start
        in sessions of their own)."""
        self.factory = factory

    async def resolve_scope(self) -> str:
        """Decide how hosts are started: in a systemd scope when asked, or when ``auto``
        and the daemon runs under systemd (``INVOCATION_ID``) with a working
        ``systemd-run --user``; else in a session of their own (forked by the factory,
        if there is one: it is attached to the loop here, or closed if unused)."""
        self.scope = await self._resolve_scope()
        if self.factory is not None:
            if self.scope == "session":
                self.factory.attach()
            else:
                self.factory.close()
                self.factory = None
        return self.scope

    async def _resolve_scope(self) -> Literal["systemd", "session"]:
        want = self.requested_scope
        if want == "session" or (want == "auto" and not os.environ.get("INVOCATION_ID")):
            return "session"
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
        return "systemd" if ok else "session"

    @property
    def children(self) -> int:
        """Hosts started by this daemon that have not exited yet."""
        return len(self._children)

    def check_resources(self, spec: SpawnSpec) -> list[str]:
        """The scope properties that enforce the spec's memory and CPU limits; raise
        ResourceLimitUnsupported where hosts cannot be given them
        (:mod:`agenthost.daemon.resources`)."""
        if spec.memory_max is None and spec.cpu_max is None:
            return []
        return resources.plan(spec.memory_max, spec.cpu_max, resources.read_facts(self.scope))

    def check_program(self, spec: SpawnSpec) -> None:
        """Raise AgentCannotStart, before anything starts, when the agent's program is
        not there for a host of this daemon: on the daemon's PATH (its environment is
        the host's) with the spec's ``env``, from the agent's directory."""
        from agenthost.agents import AdapterOptions, make_adapter
        from agenthost.agents.programs import check_argv

        adapter = make_adapter(
            spec.agent, AdapterOptions(resume=spec.resume, params=dict(spec.agent_opts))
        )
        check_argv(
            adapter,
            adapter.build_command(spec.command),
            cwd=spec.cwd or str(self.home),  # (a host without one runs in the home)
            env={k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV},
            agent_env=spec.env,
            whose="the daemon's",
        )

    def check_sandbox(self, spec: SpawnSpec) -> None:
        """Raise SandboxUnavailable (an AgentCannotStart), before anything starts, when
        the spec's sandbox (or the home's default) cannot be given here."""
        from agenthost.sandbox.resolve import check_sandbox

        check_sandbox(self.home, spec.sandbox, spec.agent_id, spec.project)

    async def spawn(self, spec: SpawnSpec, *, resume: str | None = None) -> SpawnedHost:
        """Start a host for ``spec``; return once it reported READY=1 and serves its
        agent.

        Raise AgentCannotStart if the agent's program is not there (checked first; and
        if the host could not spawn it all the same, that host is stopped),
        HostAlreadyRunning if a live host holds the agent's lock, HostStartError (with
        the end of its log) if it exits or is not ready in time.
        """
        agent_id = spec.agent_id
        self.check_program(spec)  # (a restart too: the program may have gone meanwhile)
        self.check_sandbox(spec)  # (a restart too: bubblewrap may have gone meanwhile)
        properties = self.check_resources(spec)  # (a restart too: the scope may have changed)
        if is_lock_held(lock_path(self.home, agent_id)):
            raise HostAlreadyRunning(f"a host for agent {agent_id!r} is already running")
        ensure_private_dir(logs_dir(self.home))
        log_file = log_path(self.home, agent_id)
        # checked here, where the error reaches the caller: a forked host opens it by name
        # (in logs/, private to us, so nobody can swap it meanwhile)
        try:
            os.close(open_log(log_file))
        except OSError as exc:
            raise ConfigError(f"cannot open the host's log {log_file}: {exc.strerror}") from exc
        options = host_options(spec, self.home, resume=resume, log_level=self.log_level)
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
            started = await self._start(options, env, log_file, spec, properties)
            try:
                await self._wait_ready(notify, started)
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
                failure = start_failure(agent_id, (await client.status()).agent)
                if failure is not None:  # it serves, its agent never ran: not a start
                    with contextlib.suppress(AgentHostError):  # (ended meanwhile: as good)
                        await client.stop(force=True, reason="its agent could not be started")
        except AgentHostError as exc:
            raise HostStartError(f"the host for {agent_id!r} does not answer: {exc}") from exc
        if failure is not None:
            log.warning("host.agent_not_started", agent_id=agent_id, error=failure.message)
            raise failure
        # the lock names the host that serves (after a factory lost mid-order, it may not
        # be the one exec'd last)
        info = read_lock_info(lock_path(self.home, agent_id)) or {}
        pid = info.get("pid")
        pid = pid if isinstance(pid, int) and pid > 0 else started.pid
        log.info("host.spawned", agent_id=agent_id, pid=pid, unit=started.unit, how=started.how)
        return SpawnedHost(
            agent_id, pid, socket_path(self.home, agent_id), log_file, started.unit, started.how
        )

    async def _start(
        self,
        options: HostOptions,
        env: dict[str, str],
        log_file: Path,
        spec: SpawnSpec,
        properties: list[str],
    ) -> _Starting:
        """Fork the host from the factory, or else exec it (in a systemd scope if so,
        with ``properties``: its memory and CPU limits)."""
        cwd = self._host_cwd(spec)
        argv = options.command_line()
        lost_factory = False
        self._renew_factory()
        if self.factory is not None and self.scope == "session":
            order = Order(tuple(options.to_argv()), env, cwd, str(log_file), " ".join(argv))
            try:
                pid, exited = await self.factory.start_host(order)
            except FactoryError as exc:
                # gone before it answered: it may have forked the host all the same
                lost_factory = self.factory.gone is not None
                log.warning("spawner.factory_failed", agent_id=options.agent_id, error=str(exc))
            else:
                self._children[pid] = exited
                exited.add_done_callback(lambda _: self._children.pop(pid, None))
                return _Starting(pid, exited, "fork")
        unit = None
        if self.scope == "systemd":
            unit = f"agenthost-host-{options.agent_id}-{secrets.token_hex(3)}"
            argv = [
                "systemd-run",
                "--user",
                "--scope",
                "--quiet",
                "--collect",
                f"--unit={unit}",
                f"--description=agenthost host for agent {options.agent_id}",
                *(f"--property={p}" for p in properties),
                "--",
                *argv,
            ]
        try:
            proc = start_logged(argv, log_file, env=env, cwd=cwd)
        except OSError as exc:
            raise ConfigError(f"cannot start a host: {exc}") from exc
        lock = lock_path(self.home, options.agent_id) if lost_factory else None
        return _Starting(proc.pid, self._watch(proc), "exec", unit, rival_lock=lock)

    def _renew_factory(self) -> None:
        """Replace a factory that is gone by one started by exec (this process has a
        loop: it cannot fork one), at most once per FACTORY_RESTART_INTERVAL."""
        old = self.factory
        if old is None or old.gone is None:
            return
        now = time.monotonic()
        if now - self._factory_restarted_at < FACTORY_RESTART_INTERVAL:
            return
        self._factory_restarted_at = now
        old.close()
        try:
            new = Factory.exec_new()
        except FactoryError as exc:
            log.warning("spawner.factory_not_restarted", error=str(exc))
            return
        new.attach()
        self.factory = new
        log.info("spawner.factory_restarted", pid=new.pid, previous=old.pid, why=old.gone)

    def _host_cwd(self, spec: SpawnSpec) -> str:
        return spec.cwd if spec.cwd and os.path.isdir(spec.cwd) else str(self.home)

    def _watch(self, proc: subprocess.Popen[bytes]) -> asyncio.Future[int]:
        """Reap ``proc`` when it exits (the returned future gets its status)."""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int] = loop.create_future()
        pidfd = os.pidfd_open(proc.pid)
        self._children[proc.pid] = exited
        self._execd[proc.pid] = (proc, pidfd)
        loop.add_reader(pidfd, self._reap, proc.pid)
        return exited

    def _reap(self, pid: int) -> None:
        entry = self._execd.get(pid)
        if entry is None:
            return
        proc, pidfd = entry
        code = proc.poll()
        if code is None:
            return
        asyncio.get_running_loop().remove_reader(pidfd)
        os.close(pidfd)
        del self._execd[pid]
        exited = self._children.pop(pid)
        if not exited.done():
            exited.set_result(code)
        log.info("host.reaped", pid=pid, status=code)

    async def _wait_ready(self, notify: socket.socket, started: _Starting) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        exited = started.exited
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
                if started.rival_lock is not None and is_lock_held(started.rival_lock):
                    # the host the lost factory forked holds the lock: wait for it instead
                    log.info("spawner.forked_host_won", lock=str(started.rival_lock))
                    exited = loop.create_future()
                    started = replace(started, rival_lock=None)
                    continue
                raise HostStartError(f"exited with status {exited.result()} before it was ready")
            if not done:
                self._kill_starting(started.pid)
                raise HostStartError(f"was not ready within {self.ready_timeout:g}s")

    def _kill_starting(self, pid: int) -> None:
        if pid in self._children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # it leads its own process group

    def close(self) -> None:
        """Stop watching the children and close the factory (the hosts keep running;
        init or systemd reaps them)."""
        loop = asyncio.get_running_loop()
        for proc, pidfd in self._execd.values():
            loop.remove_reader(pidfd)
            os.close(pidfd)
            # Popen would reap on garbage collection: mark it handled, it is not ours now
            proc.returncode = proc.returncode if proc.returncode is not None else 0
        self._execd.clear()
        self._children.clear()
        if self.factory is not None:
            self.factory.close()
            self.factory = None


@dataclass(frozen=True, slots=True)
class _Starting:
    """A host on its way up."""

    pid: int
    exited: asyncio.Future[int]
    how: Literal["fork", "exec"]
    unit: str | None = None
    rival_lock: Path | None = None
    """Set when a factory was lost in the middle of this host's order: the host it may
    have forked races this one for the agent's lock (whichever wins is the host)."""
