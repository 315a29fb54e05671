"""The daemon process: its life cycle, its requests, its periodic chores.

Start-up order: take ``<home>/daemon.lock`` (one daemon per home), open the registry,
reconcile (every live host reattached), *then* bind ``<home>/daemon.sock`` and tell
systemd ``READY=1``. Shutdown (SIGTERM, SIGINT): stop accepting, stop following,
write the last stream positions, release the lock. Hosts are never signalled: they
outlive the daemon by design, whatever way it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import structlog
from pydantic import BaseModel

from agenthost._version import __version__
from agenthost.aio import cancel_all
from agenthost.attention.notifier import Notifier
from agenthost.daemon import commands
from agenthost.daemon.backfill import Backfills, open_source
from agenthost.daemon.fanout import DEFAULT_BUFFER_BYTES, DEFAULT_BUFFER_EVENTS, Held, Hub
from agenthost.daemon.files import daemon_lock_path, daemon_socket_path, registry_path
from agenthost.daemon.limits import Limits
from agenthost.daemon.protocol import (
    DAEMON_PROTOCOL_VERSION,
    DaemonListResponse,
    DaemonMessageType,
    DaemonPingResponse,
    DaemonStopRequest,
    ForgetRequest,
    ReconcileReport,
    SpawnSpec,
    SwitchRequest,
    WatchRequest,
)
from agenthost.daemon.registry import Registry
from agenthost.daemon.server import DaemonConnection, DaemonServer
from agenthost.daemon.spawner import HostScope, Spawner
from agenthost.daemon.startup import reconcile, scan_once
from agenthost.daemon.supervisor import Supervisor

if TYPE_CHECKING:
    from agenthost.daemon.automation import Automation
from agenthost.errors import DaemonAlreadyRunning, HostAlreadyRunning, RegistryError
from agenthost.lockfile import HostLock, read_lock_info
from agenthost.paths import check_socket_path, ensure_private_dir, hosts_dir
from agenthost.protocol import Request, encode_response
from agenthost.sdnotify import sd_notify
from agenthost.timefmt import go_duration
from agenthost.wire.connection import Reply

log = structlog.get_logger("agenthost.daemon")

WATCH_SOURCE_ROUNDS: Final = 4
"""How often a backfilled watch asks again for agents whose position fell out of their
buffer while it waited for the first sources (after that: ``truncated``, honestly)."""


@dataclass(frozen=True)
class DaemonConfig:
    """Everything a daemon needs. Times are seconds, sizes bytes or events."""

    home: Path
    probe_timeout: float = 1.0
    """Per-host timeout of the start-up probes (and of reconnect attempts)."""
    attach_timeout: float = 10.0
    """How long the reconcile waits for every live host to be reattached."""
    scan_interval: float = 5.0
    """Rescan of the hosts directory (adopt, clean, wake); 0 disables it."""
    flush_interval: float = 0.25
    """Batched writes of the stream positions to the registry."""
    host_scope: HostScope = "auto"
    watch_buffer: int = DEFAULT_BUFFER_EVENTS
    watch_buffer_bytes: int = DEFAULT_BUFFER_BYTES
    watch_queue: int = 8 << 20
    log_level: str = "info"
    notify_flush: float = 2.0
    """At shutdown, how long notices being delivered get before they are cancelled."""
    limits: Limits = Limits()
    """``--max-agents``, ``--queue``, ``--idle-stop``."""


class Daemon:
    """Create it, then ``await run()`` on a uvloop event loop."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.home = config.home
        self.socket_path = daemon_socket_path(config.home)
        check_socket_path(self.socket_path)
        self.lock = HostLock(daemon_lock_path(config.home))
        self.hub = Hub(config.watch_buffer, config.watch_buffer_bytes, config.watch_queue)
        self.backfills = Backfills(self.hub)
        self.spawner = Spawner(config.home, scope=config.host_scope, log_level=config.log_level)
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        self.report: ReconcileReport | None = None
        self.registry: Registry | None = None
        self.supervisor: Supervisor | None = None
        self.server: DaemonServer | None = None
        self.notifier: Notifier | None = None
        self.automation: Automation | None = None
        self._stop: asyncio.Event | None = None
        self._chores: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Reconcile, serve until SIGTERM/SIGINT, shut down (hosts untouched)."""
        self._stop = asyncio.Event()
        ensure_private_dir(self.home)
        ensure_private_dir(hosts_dir(self.home))
        self._take_lock()
        try:
            self.registry = open_registry(registry_path(self.home))
            await self.spawner.resolve_scope()
            self.supervisor = Supervisor(
                self.home,
                self.registry,
                self.spawner,
                self.hub,
                probe_timeout=self.config.probe_timeout,
            )
            self.supervisor.limits = self.config.limits
            supervisor = self.supervisor
            self.supervisor.start_queued = lambda agent: commands.launch_queued(supervisor, agent)
            self.notifier = Notifier(self.home)
            self.notifier.start()
            self.supervisor.notifier = self.notifier
            log.info("daemon.starting", pid=os.getpid(), home=str(self.home), version=__version__)
            self.report = await reconcile(
                self.supervisor, attach_timeout=self.config.attach_timeout
            )
            self.supervisor.dequeue_soon()  # places may have freed while no daemon ran
            self.server = DaemonServer(self.socket_path, self, max_queue=self.hub.max_queue)
            await self.server.start()
            self._chore(self._flush_loop())
            if self.config.scan_interval > 0:
                self._chore(self._scan_loop())
            sd_notify(f"READY=1\nMAINPID={os.getpid()}")
            self.start_automation()  # after the reconcile: it knows which agents run
            log.info(
                "daemon.ready", socket=str(self.socket_path), agents=len(self.supervisor.agents)
            )
            await self._stop.wait()
        finally:
            await self._shutdown()

    def start_automation(self) -> Automation:
        """The schedules and runs (:mod:`agenthost.daemon.automation`), started once:
        after READY (their imports are not the daemon's start-up), or by the first
        request for them if one comes sooner."""
        if self.automation is None:
            from agenthost.daemon.automation import Automation
            from agenthost.daemon.runagents import SupervisedAgents
            from agenthost.daemon.runstore import RunStore

            assert self.registry is not None and self.supervisor is not None
            self.automation = Automation(RunStore(self.registry), SupervisedAgents(self.supervisor))
            self.supervisor.observer = self.automation
            self.automation.start()
        return self.automation

    def _take_lock(self) -> None:
        try:
            self.lock.acquire()
        except HostAlreadyRunning:
            pid = (read_lock_info(self.lock.path) or {}).get("pid")
            raise DaemonAlreadyRunning(
                "a daemon is already running for this home"
                + (f" (pid {pid})" if isinstance(pid, int) else ""),
                hint="`agenthost list` talks to it; stop it with SIGTERM",
            ) from None
        self.lock.write_info(
            {
                "pid": os.getpid(),
                "version": __version__,
                "protocol_version": DAEMON_PROTOCOL_VERSION,
                "started_at": self.started_at,
                "socket": str(self.socket_path),
            }
        )

    def on_signal(self, sig: int) -> None:
        """SIGTERM or SIGINT (installed by :mod:`agenthost.daemon.run`): shut down."""
        log.info("daemon.signal", signal=signal.Signals(sig).name)
        if self._stop is not None:
            self._stop.set()

    async def _shutdown(self) -> None:
        if self.server is not None:
            self.server.stop_accepting()
        await cancel_all(list(self._chores))
        if self.automation is not None:
            await self.automation.close()
        if self.supervisor is not None:
            with contextlib.suppress(RegistryError):
                await self.supervisor.close()
        if self.notifier is not None:
            await self.notifier.close(self.config.notify_flush)
        if self.server is not None:
            await self.server.close()
        await self.backfills.close()
        self.spawner.close()
        if self.registry is not None:
            self.registry.close()
        self.lock.release()
        log.info("daemon.exited")

    def _chore(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _flush_loop(self) -> None:
        assert self.supervisor is not None
        while True:
            await asyncio.sleep(self.config.flush_interval)
            try:
                self.supervisor.flush()
            except RegistryError as exc:  # e.g. disk full: keep running, retry later
                log.error("registry.flush_failed", error=exc.message)

    async def _scan_loop(self) -> None:
        assert self.supervisor is not None
        while True:
            await asyncio.sleep(self.config.scan_interval)
            try:
                await scan_once(self.supervisor)
            except Exception:  # the next scan may do better; never end the daemon
                log.exception("daemon.scan_failed")

    # --- requests -----------------------------------------------------------------------

    def dispatch(
        self,
        conn: DaemonConnection,
        mtype: DaemonMessageType,
        payload: BaseModel,
        request: Request,
    ) -> Reply:
        """Serve one validated request (in order per connection)."""
        sup = self.supervisor
        assert sup is not None
        if mtype is DaemonMessageType.PING:
            return encode_response(mtype, request.id, self.ping())
        if mtype is DaemonMessageType.LIST:
            return encode_response(mtype, request.id, DaemonListResponse(agents=sup.list()))
        if mtype is DaemonMessageType.SPAWN:
            assert isinstance(payload, SpawnSpec)
            return self._later(mtype, request, commands.spawn(sup, payload))
        if mtype is DaemonMessageType.STOP:
            assert isinstance(payload, DaemonStopRequest)
            return self._later(mtype, request, commands.stop(sup, payload))
        if mtype is DaemonMessageType.FORGET:
            assert isinstance(payload, ForgetRequest)
            return self._later(mtype, request, commands.forget(sup, payload))
        if mtype is DaemonMessageType.SWITCH:
            from agenthost.daemon import switching  # with the first switch

            assert isinstance(payload, SwitchRequest)
            return self._later(mtype, request, switching.switch(sup, payload))
        if mtype.startswith(("daemon.run", "daemon.schedule.")):
            from agenthost.daemon.automation import automation_request

            work = automation_request(self.start_automation(), mtype, payload)
            return self._later(mtype, request, work)
        if mtype is DaemonMessageType.WATCH:
            assert isinstance(payload, WatchRequest)
            self.unwatch(conn)
            needs = self.hub.backfill_needs(payload)
            if needs:
                return self._watch_backfilled(conn, payload, request, needs)
            self.hub.watch(conn, payload, request.id)
            return None
        assert mtype is DaemonMessageType.UNWATCH
        conn.unwatch()
        return encode_response(mtype, request.id)

    def unwatch(self, conn: DaemonConnection) -> None:
        """A connection stopped watching (asked to, or went away)."""
        self.hub.unwatch(conn)
        self.backfills.cancel(conn)

    def resume(self, conn: DaemonConnection) -> None:
        """A lagging watcher's transport drained: serve it from the buffers, and let its
        backfills read on."""
        self.hub.pump(conn)
        self.backfills.drained(conn)

    async def _watch_backfilled(
        self,
        conn: DaemonConnection,
        payload: WatchRequest,
        request: Request,
        needs: dict[str, tuple[str, int, int]],
    ) -> bytes:
        """Answer a watch whose positions are older than the buffers. Only how far back
        each host (or journal) goes is asked before the answer; the events follow in
        slices, each agent on its own (see :mod:`agenthost.daemon.backfill`)."""
        timeout = self.config.probe_timeout * 5
        held: dict[str, Held] = {}
        sources = {}
        asked: set[str] = set()
        for _ in range(WATCH_SOURCE_ROUNDS):
            # While we wait for the sources, other agents' buffers evict on: a position
            # that was inside its buffer may have fallen out of it. Ask again for those
            # (the last check and the registration run in one step, with no await).
            agents = sorted(set(needs) - asked)
            if not agents:
                break
            asked.update(agents)
            found = await asyncio.gather(
                *(open_source(self.home, a, *needs[a][:2], timeout=timeout) for a in agents)
            )
            if conn.closed:
                return b""
            for agent_id, source in zip(agents, found, strict=True):
                if source is not None:
                    held[agent_id], sources[agent_id] = source
            needs = self.hub.backfill_needs(payload)
        filling = self.hub.watch(conn, payload, request.id, held)
        self.backfills.start(conn, {a: sources[a] for a in filling})
        return b""  # the response went out with the replay

    async def _later(self, mtype: DaemonMessageType, request: Request, work: Any) -> bytes:
        return encode_response(mtype, request.id, await work)

    def ping(self) -> DaemonPingResponse:
        """The daemon's versions, uptime and what its start-up reconcile did."""
        uptime = time.monotonic() - self._started_mono
        return DaemonPingResponse(
            version=__version__,
            protocol_version=DAEMON_PROTOCOL_VERSION,
            min_protocol_version=DAEMON_PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime=go_duration(uptime),
            uptime_seconds=round(uptime, 3),
            started_at=datetime.fromtimestamp(self.started_at, UTC),
            agents=len(self.supervisor.agents) if self.supervisor else 0,
            host_scope=self.spawner.scope,
            limits=self.config.limits.describe(),
            reconcile=self.report,
        )


def open_registry(path: Path) -> Registry:
    """Open the registry; a file that is not a usable database is moved aside (the
    reconcile rebuilds what matters from the live hosts) rather than stop the daemon."""
    try:
        registry = Registry(path)
        if registry.integrity() == "ok":
            return registry
        registry.close()
        problem = "failed its integrity check"
    except RegistryError as exc:
        cause = exc.__cause__
        if not isinstance(cause, sqlite3.DatabaseError) or isinstance(
            cause, sqlite3.OperationalError
        ):
            raise
        problem = str(cause)
    aside = path.with_name(f"{path.name}.broken-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    log.error("registry.moved_aside", path=str(path), to=str(aside), problem=problem)
    return Registry(path)
