"""Talking to the daemon: :class:`DaemonClient`, and starting a daemon in the background.

::

    from agenthost.daemon.client import DaemonClient

    async with DaemonClient(home) as daemon:
        await daemon.spawn(SpawnSpec(agent_id="w1", agent="demo"))
        await daemon.watch()
        while True:
            frame = await daemon.next_frame()   # a host's StreamEvent, or a Notice

Responses arrive in request order; the frames of a watch stream are queued
separately, so requests may be sent while watching.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import time
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agenthost.automation.model import (
    RunRecord,
    RunResponse,
    RunsResponse,
    RunTarget,
    ScheduleInfo,
    ScheduleListResponse,
    ScheduleSpec,
)
from agenthost.daemon.files import daemon_lock_path, daemon_log_path, daemon_socket_path
from agenthost.daemon.protocol import (
    DAEMON_MESSAGES,
    DaemonAgent,
    DaemonListResponse,
    DaemonMessageType,
    DaemonPingResponse,
    DaemonStopResponse,
    ForgetResponse,
    Notice,
    NoticeType,
    ScheduleRemoved,
    SpawnResponse,
    SpawnSpec,
    SwitchResponse,
    WatchCursor,
    WatchResponse,
)
from agenthost.errors import (
    AgentHostError,
    DaemonNotRunning,
    DaemonStartError,
)
from agenthost.lockfile import is_lock_held
from agenthost.paths import ensure_private_dir, logs_dir, resolve_home
from agenthost.protocol import (
    StreamEvent,
)
from agenthost.pyargv import module_argv
from agenthost.remote import Remote, as_remote
from agenthost.wire.client import ClientCore, ServiceClient, StreamLimit
from agenthost.wire.ssh import SshLink

M = TypeVar("M", bound=BaseModel)
FRAME_QUEUE: Final = StreamLimit().items


class DaemonClient(ServiceClient[StreamEvent | Notice]):
    """An asyncio connection to the daemon of ``home``.

    Requests raise, besides the errors they name: DaemonNotRunning (nothing answers on
    the socket within ``connect_timeout``; a full listen backlog is waited for),
    Forbidden, NotConnected, RequestTimeout, ProtocolError.

    The frames of a watch stream (host events and notices) never hold up a response.
    Unread frames are queued up to ``stream_limit`` (default 4096 frames or 32 MiB);
    past it the frames that follow are discarded and, once :meth:`next_frame` has
    given everything queued, the client watches again on the same connection (an
    unwatch, then a watch of the same agents with ``since`` set to the position it
    delivered of each agent: the epoch from the watch response and ``host_attached``
    notices, the offset of the last event), so the daemon replays the events and
    reading continues, each event once. Notices discarded meanwhile are not replayed
    (the daemon does not keep them); the new watch's positions are those of
    :attr:`watch_response`.

    ``remote`` (a :class:`~agenthost.remote.Remote` or ``"[USER@]HOST[:PORT]"``): the
    daemon of that machine, reached with ``ssh ... agenthost bridge --daemon``
    (``home``, when given, is the home on that machine); with ``autostart`` the
    bridge starts that daemon if none runs there. Connecting raises RemoteError when
    ssh fails or agenthost is not there, DaemonNotRunning when no daemon answers
    there. See docs/remote.md.
    """

    def __init__(
        self,
        home: str | Path | None = None,
        *,
        socket_path: str | Path | None = None,
        connect_timeout: float = 2.0,
        request_timeout: float = 120.0,
        stream_limit: StreamLimit | None = None,
        remote: Remote | str | None = None,
        autostart: bool = False,
    ) -> None:
        self.remote = as_remote(remote)
        """The machine of the daemon (None: this one)."""
        opener: SshLink | None = None
        if self.remote is not None:
            if socket_path is not None:
                raise ValueError("give no socket_path with a remote")
            args = ["bridge", "--daemon", *(["--start"] if autostart else [])]
            if home is not None:
                args += ["--home", str(home)]
            opener = SshLink(self.remote, args, target="the daemon", not_found=DaemonNotRunning)
            # names for messages: the home and the socket are the remote's
            self.home = Path(home) if home is not None else Path("~")
            socket_path = f"{self.remote}:daemon.sock"
        else:
            self.home = resolve_home(home)
        self.socket_path = Path(socket_path) if socket_path else daemon_socket_path(self.home)
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.watch_response: WatchResponse | None = None
        """The response of the last watch (replaced when the client watches again)."""
        self._core: ClientCore[StreamEvent | Notice] = ClientCore(
            self.socket_path,
            service="daemon",
            peer="the daemon",
            decode=DAEMON_MESSAGES.decode_frame,
            connect_error=self._connect_error,
            connect_timeout=connect_timeout,
            id_prefix="d",
            stream_limit=stream_limit,
            opener=opener,
        )
        self._watching: builtins.list[str] | None = None  # agents of the watch, if any
        self._watch_all = False
        self._positions: dict[str, WatchCursor] = {}  # what next_frame delivered

    @property
    def frames_queued(self) -> int:
        """Watch frames received and not yet read (at most ``stream_limit.items``)."""
        return self._core.queued

    async def connect(self) -> None:
        """Connect; raise DaemonNotRunning if nothing answers on the socket, Forbidden
        if the socket or its server is another user's."""
        await super().connect()

    def _connect_error(self, exc: OSError | TimeoutError) -> AgentHostError:
        if self.remote is not None:
            return DaemonNotRunning(f"no daemon answers on {self.remote}: {exc}")
        return DaemonNotRunning(
            f"no daemon answers on {self.socket_path}",
            hint="start one with `agenthost daemon` (or `agenthost run` starts it)",
        )

    def _closing(self) -> None:
        self._watching = None

    async def request(
        self, mtype: str, payload: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one request; return the response payload or raise the typed error."""
        return await self._request(mtype, payload, timeout=timeout)

    async def _request(
        self,
        mtype: str,
        payload: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        resume_stream: bool = False,
    ) -> dict[str, Any]:
        data = await super()._request(mtype, payload, timeout=timeout, resume_stream=resume_stream)
        if mtype == DaemonMessageType.UNWATCH:
            self._watching = None
            self._core.end_overflow()
        return data

    async def ping(self) -> DaemonPingResponse:
        """The daemon's versions, uptime and start-up reconcile report."""
        return await self._typed(DaemonPingResponse, DaemonMessageType.PING)

    async def spawn(self, spec: SpawnSpec) -> SpawnResponse:
        """Start an agent in a new host; answers once the host serves."""
        payload = spec.model_dump(mode="json", exclude_none=True)
        return await self._typed(SpawnResponse, DaemonMessageType.SPAWN, payload)

    async def list(self) -> list[DaemonAgent]:
        """Every agent the daemon knows."""
        return (await self._typed(DaemonListResponse, DaemonMessageType.LIST)).agents

    async def stop(
        self, agent_id: str, *, force: bool = False, timeout: float = 0, reason: str = ""
    ) -> DaemonStopResponse:
        """Stop an agent's host (never restarted); answers after the agent exited."""
        payload = {"agent_id": agent_id, "force": force, "timeout": timeout, "reason": reason}
        return await self._typed(DaemonStopResponse, DaemonMessageType.STOP, payload)

    # --- automation (1.8): docs/automation.md -------------------------------------------

    async def run(
        self,
        name: str,
        target: RunTarget,
        message: str,
        *,
        source: str = "hook",
        key: str | None = None,
        detail: dict[str, str] | None = None,
    ) -> RunResponse:
        """Start a run now (a webhook's delivery): send ``message`` to the target agent, or
        start a new one with it. A run with the same source, name and ``key`` is not
        started twice: the answer is then the first run, with ``duplicate``."""
        payload: dict[str, Any] = {
            "source": source,
            "name": name,
            "target": target.model_dump(mode="json", exclude_none=True),
            "message": message,
            "detail": detail or {},
        }
        if key is not None:
            payload["key"] = key
        return await self._typed(RunResponse, DaemonMessageType.RUN, payload)

    async def runs(
        self, *, source: str | None = None, name: str | None = None, limit: int = 20
    ) -> builtins.list[RunRecord]:
        """The newest runs of schedules and webhooks, newest first."""
        payload: dict[str, Any] = {"limit": limit}
        if source is not None:
            payload["source"] = source
        if name is not None:
            payload["name"] = name
        return (await self._typed(RunsResponse, DaemonMessageType.RUNS, payload)).runs

    async def schedule_add(self, spec: ScheduleSpec) -> ScheduleInfo:
        """Add (or with ``spec.replace``, replace) a cron schedule of runs."""
        payload = spec.model_dump(mode="json", exclude_none=True)
        return await self._typed(ScheduleInfo, DaemonMessageType.SCHEDULE_ADD, payload)

    async def schedules(self) -> builtins.list[ScheduleInfo]:
        """Every schedule, with its last run and next due time."""
        answer = await self._typed(ScheduleListResponse, DaemonMessageType.SCHEDULE_LIST)
        return answer.schedules

    async def schedule_rm(self, name: str) -> bool:
        """Remove a schedule (its runs stay in the record)."""
        payload = {"name": name}
        return (await self._typed(ScheduleRemoved, DaemonMessageType.SCHEDULE_RM, payload)).removed

    async def schedule_run(self, name: str) -> RunRecord:
        """Start a schedule's run now (refused while its previous run goes)."""
        payload = {"name": name}
        return (await self._typed(RunResponse, DaemonMessageType.SCHEDULE_RUN, payload)).run

    async def switch(self, agent_id: str, to: str, *, timeout: float = 30) -> SwitchResponse:
        """(1.7) Run a structured Claude Code or Codex agent in its CLI's own TUI on the
        same session (``to="tui"``), or return to the structured agent (``"structured"``);
        answers once the new host serves. Busy while a turn runs or a request waits."""
        payload = {"agent_id": agent_id, "to": to, "timeout": timeout}
        return await self._typed(SwitchResponse, DaemonMessageType.SWITCH, payload)

    async def forget(self, agent_id: str, *, purge: bool = False) -> ForgetResponse:
        """Remove an agent that is not running from the registry (``purge``: and delete
        its journal). A live agent is refused with Busy."""
        payload = {"agent_id": agent_id, "purge": purge}
        return await self._typed(ForgetResponse, DaemonMessageType.FORGET, payload)

    async def watch(
        self,
        agents: builtins.list[str] | None = None,
        since: dict[str, WatchCursor] | None = None,
        *,
        live_only: bool = False,
    ) -> WatchResponse:
        """Start the merged stream; read it with :meth:`next_frame`."""
        response = await self._watch(agents, since, live_only=live_only)
        self._watch_all = agents is None
        self._watching = list(agents or ())
        return response

    async def _watch(
        self,
        agents: builtins.list[str] | None,
        since: dict[str, WatchCursor] | None,
        *,
        live_only: bool = False,
        resume_stream: bool = False,
    ) -> WatchResponse:
        payload: dict[str, Any] = {"live_only": live_only}
        if agents is not None:
            payload["agents"] = agents
        if since:
            payload["since"] = {k: v.model_dump() for k, v in since.items()}
        response = await self._typed(
            WatchResponse, DaemonMessageType.WATCH, payload, resume_stream=resume_stream
        )
        self.watch_response = response
        # Where each agent's stream starts: what is delivered from here on follows it.
        self._positions = {
            agent_id: WatchCursor(epoch=start.epoch, offset=start.from_offset)
            for agent_id, start in response.agents.items()
        }
        return response

    async def next_frame(self, timeout: float | None = None) -> StreamEvent | Notice:
        """The next frame of the watch stream. Raise NotConnected when it ended,
        RequestTimeout when none came within ``timeout`` seconds."""
        while True:
            item = await self._core.next_stream(timeout, "frame")
            if item is None:
                await self._rewatch()
                continue
            frame = item[0]
            self._advance(frame)
            return frame

    def _advance(self, frame: StreamEvent | Notice) -> None:
        if isinstance(frame, StreamEvent):
            position = self._positions.get(frame.agent_id)
            epoch = position.epoch if position else ""
            self._positions[frame.agent_id] = WatchCursor(epoch=epoch, offset=frame.offset)
        elif frame.type == NoticeType.HOST_ATTACHED:
            epoch = str(getattr(frame, "epoch", ""))
            position = self._positions.get(frame.agent_id)
            if position is None or position.epoch != epoch:  # another stream: its start
                offset = getattr(frame, "from_offset", 0)
                start = offset if isinstance(offset, int) else 0
                self._positions[frame.agent_id] = WatchCursor(epoch=epoch, offset=start)

    async def _rewatch(self) -> None:
        # The queue overflowed and everything before the overflow was read: watch
        # again after what was delivered. No frame of the old watch follows the
        # unwatch response; the replay follows the new watch response.
        if self._watching is None:  # unwatched meanwhile: nothing to resume
            return
        agents = None if self._watch_all else self._watching
        since = {k: v for k, v in self._positions.items() if v.epoch}
        await self._request(DaemonMessageType.UNWATCH)
        self._watching = agents or []
        await self._watch(agents, since, resume_stream=True)


# --- the daemon process ------------------------------------------------------------------


def daemon_alive(home: Path) -> bool:
    """Whether a daemon holds the home's daemon lock."""
    return is_lock_held(daemon_lock_path(home))


def start_daemon(home: Path, *, args: list[str] | None = None, timeout: float = 60.0) -> int:
    """Start ``agenthost daemon`` in the background (own session, stdio on its log file);
    return its pid once it said READY=1, after its start-up reconcile.

    Raise DaemonStartError (with the end of its log) if it exits or is not ready in
    time.
    """
    from agenthost.launch import HostStartError, start_in_background

    ensure_private_dir(home)
    ensure_private_dir(logs_dir(home))
    argv = module_argv("agenthost", "daemon", "--home", str(home), *(args or []))
    try:
        return start_in_background(
            argv,
            daemon_log_path(home),
            env=dict(os.environ),
            timeout=timeout,
            what="the daemon",
            log_name="daemon",
            cwd=home,
        )
    except OSError as exc:
        raise DaemonStartError(f"cannot start the daemon: {exc}") from exc
    except HostStartError as exc:
        raise DaemonStartError(exc.message) from None


async def wait_for_daemon(home: Path, timeout: float) -> None:
    """Wait until the daemon of ``home`` answers a ping (it may still be reconciling)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            async with DaemonClient(home, connect_timeout=1.0) as client:
                await client.ping()
            return
        except DaemonNotRunning:
            if time.monotonic() > deadline or not daemon_alive(home):
                raise
        await asyncio.sleep(delay)  # a bounded poll: the daemon binds after its reconcile
        delay = min(delay * 2, 0.2)


def ensure_daemon(home: Path, *, timeout: float = 60.0, args: list[str] | None = None) -> int:
    """Make sure a daemon serves ``home``: return 0 if one was already there, else the
    pid of the one started (see :func:`start_daemon`). Blocking."""
    import uvloop

    def wait() -> None:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(wait_for_daemon(home, timeout))

    if daemon_alive(home):
        wait()
        return 0
    try:
        return start_daemon(home, args=args, timeout=timeout)
    except DaemonStartError:
        if daemon_alive(home):  # another `agenthost run` started it first: use that one
            wait()
            return 0
        raise


def forget_agent(
    home: Path, agent_id: str, *, purge: bool = False, timeout: float = 60.0
) -> ForgetResponse:
    """Forget an agent that does not run: through the daemon when one runs, else in the
    registry directly (holding the daemon lock meanwhile, so no daemon starts on a
    half-edited view). Raise Busy for a live agent. Blocking."""
    import uvloop

    from agenthost.daemon import worktrees
    from agenthost.daemon.files import purge_journal, refuse_if_running, registry_path
    from agenthost.daemon.registry import Registry
    from agenthost.errors import HostAlreadyRunning
    from agenthost.lockfile import HostLock

    async def ask() -> ForgetResponse:
        async with DaemonClient(home, connect_timeout=timeout, request_timeout=timeout) as c:
            return await c.forget(agent_id, purge=purge)

    def through_daemon() -> ForgetResponse:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(ask())

    if daemon_alive(home):
        return through_daemon()
    if not home.is_dir():  # no home: nothing was ever recorded in it
        return ForgetResponse(agent_id=agent_id, forgotten=False)
    lock = HostLock(daemon_lock_path(home))
    try:
        lock.acquire()
    except HostAlreadyRunning:  # a daemon started meanwhile: it holds the registry
        return through_daemon()
    try:
        refuse_if_running(home, agent_id)
        purged = purge_journal(home, agent_id) if purge else False
        forgotten = False
        removal = None
        path = registry_path(home)
        if path.exists():
            with Registry(path) as registry:
                record = registry.load().get(agent_id)
                if record is not None and record.spec is not None:
                    removal = worktrees.remove(record.spec)
                forgotten = registry.forget(agent_id)
        return worktrees.forget_response(agent_id, forgotten, purged, removal)
    finally:
        lock.release()


def stop_daemon(home: Path, *, timeout: float = 30.0) -> int | None:
    """Stop the daemon of ``home`` gracefully (SIGTERM, as systemd would) and wait until
    it exited; its pid, or None when no daemon runs. Its hosts keep running (a daemon's
    end never reaches them). Raise RequestTimeout if it still runs after ``timeout``
    seconds. Blocking.

    The pid is the one the daemon wrote into its lock, and it is signalled through a
    pidfd taken while the lock is still held by that pid: never another process that
    got the number after the daemon ended.
    """
    import select
    import signal

    from agenthost.errors import RequestTimeout
    from agenthost.lockfile import read_lock_info

    lock = daemon_lock_path(home)
    if not is_lock_held(lock):
        return None
    pid = (read_lock_info(lock) or {}).get("pid")
    if not isinstance(pid, int) or pid <= 0:
        raise DaemonNotRunning(f"the daemon lock {lock} is held but names no pid")
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return pid  # it ended between the two reads: stopped all the same
    try:
        if not is_lock_held(lock) or (read_lock_info(lock) or {}).get("pid") != pid:
            return pid  # ended meanwhile (the number may already be another process's)
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)  # readable once the process has exited
        if not poller.poll(max(0, int(timeout * 1000))):
            raise RequestTimeout(
                f"the daemon (pid {pid}) did not exit within {timeout:g}s of SIGTERM",
                hint=f"see {daemon_log_path(home)}; `kill -9 {pid}` ends it (hosts stay)",
            )
    except ProcessLookupError:
        pass  # it exited before the signal: as good
    finally:
        os.close(pidfd)
    return pid
