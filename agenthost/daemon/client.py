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
import contextlib
import itertools
import os
import sys
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError

from agenthost.daemon.files import daemon_lock_path, daemon_log_path, daemon_socket_path
from agenthost.daemon.protocol import (
    DaemonAgent,
    DaemonListResponse,
    DaemonMessageType,
    DaemonPingResponse,
    DaemonStopResponse,
    ForgetResponse,
    Notice,
    SpawnResponse,
    SpawnSpec,
    WatchCursor,
    WatchResponse,
    decode_daemon_frame,
)
from agenthost.errors import (
    AgentHostError,
    DaemonNotRunning,
    DaemonStartError,
    Forbidden,
    NotConnected,
    ProtocolError,
    RegistryError,
    RequestTimeout,
    error_from_code,
)
from agenthost.lockfile import is_lock_held
from agenthost.paths import ensure_private_dir, logs_dir, resolve_home
from agenthost.protocol import (
    CLIENT_FRAME_LIMIT,
    FrameDecoder,
    Response,
    StreamEvent,
    encode_request,
)
from agenthost.wire.peer import check_server

M = TypeVar("M", bound=BaseModel)
FRAME_QUEUE: Final = 4096
_END: Final = object()


class DaemonClient:
    """An asyncio connection to the daemon of ``home``."""

    def __init__(
        self,
        home: str | Path | None = None,
        *,
        socket_path: str | Path | None = None,
        connect_timeout: float = 2.0,
        request_timeout: float = 120.0,
    ) -> None:
        self.home = resolve_home(home)
        self.socket_path = Path(socket_path) if socket_path else daemon_socket_path(self.home)
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: deque[asyncio.Future[Response]] = deque()
        self._frames: asyncio.Queue[StreamEvent | Notice | object] = asyncio.Queue(FRAME_QUEUE)
        self._ids = itertools.count(1)
        self._closed_error: AgentHostError | None = None

    async def connect(self) -> None:
        """Connect; raise DaemonNotRunning if nothing answers on the socket."""
        if self._writer is not None:
            return
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.socket_path, limit=1 << 16),
                self.connect_timeout,
            )
        except PermissionError as exc:
            raise Forbidden(f"not allowed to connect to {self.socket_path}") from exc
        except (OSError, TimeoutError) as exc:
            raise DaemonNotRunning(
                f"no daemon answers on {self.socket_path}",
                hint="start one with `agenthost daemon` (or `agenthost run` starts it)",
            ) from exc
        try:
            check_server(writer.transport, self.socket_path, "daemon")
        except Forbidden:
            writer.close()
            raise
        self._reader, self._writer = reader, writer
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def close(self) -> None:
        """Close the connection (pending requests fail with NotConnected)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._read_task
            self._read_task = None
        self._fail(NotConnected("connection closed"))

    async def __aenter__(self) -> DaemonClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _read_loop(self) -> None:
        assert self._reader is not None
        decoder = FrameDecoder(CLIENT_FRAME_LIMIT)
        error: AgentHostError = NotConnected("the daemon closed the connection")
        try:
            while data := await self._reader.read(1 << 16):
                for frame in decoder.feed(data):
                    if isinstance(frame, AgentHostError):
                        raise frame
                    message = decode_daemon_frame(frame)
                    if isinstance(message, Response):
                        if self._pending:
                            future = self._pending.popleft()
                            if not future.done():
                                future.set_result(message)
                        elif message.code:  # refused as the connection opened
                            self._closed_error = error_from_code(message.code, message.error or "")
                    else:
                        await self._frames.put(message)
        except AgentHostError as exc:
            error = exc
        except OSError as exc:
            error = NotConnected(f"connection lost: {exc}")
        self._fail(error)

    def _fail(self, error: AgentHostError) -> None:
        if self._closed_error is None:
            self._closed_error = error
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(self._closed_error)
        with contextlib.suppress(asyncio.QueueFull):
            self._frames.put_nowait(_END)

    async def request(
        self, mtype: str, payload: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one request; return the response payload or raise the typed error."""
        if self._writer is None:
            await self.connect()
        if self._closed_error is not None or self._writer is None:
            raise self._closed_error or NotConnected("not connected")
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._pending.append(future)
        try:
            self._writer.write(encode_request(mtype, payload, request_id=f"d{next(self._ids)}"))
        except (OSError, RuntimeError) as exc:
            raise NotConnected(f"cannot write to the daemon: {exc}") from exc
        wait = self.request_timeout if timeout is None else timeout
        try:
            response = await asyncio.wait_for(asyncio.shield(future), wait)
        except TimeoutError:
            future.cancel()  # stays queued, so a late answer is matched to it
            raise RequestTimeout(f"the daemon did not answer {mtype} within {wait:g}s") from None
        if not response.success:
            raise error_from_code(response.code, response.error or "request failed")
        return response.payload or {}

    async def _typed(self, model: type[M], mtype: str, payload: dict[str, Any] | None = None) -> M:
        data = await self.request(mtype, payload)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise ProtocolError(f"malformed {mtype} response: {exc.error_count()} errors") from None

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
        payload: dict[str, Any] = {"live_only": live_only}
        if agents is not None:
            payload["agents"] = agents
        if since:
            payload["since"] = {k: v.model_dump() for k, v in since.items()}
        return await self._typed(WatchResponse, DaemonMessageType.WATCH, payload)

    async def next_frame(self, timeout: float | None = None) -> StreamEvent | Notice:
        """The next frame of the watch stream. Raise NotConnected when it ended."""
        if self._frames.empty() and self._closed_error is not None:
            raise self._closed_error
        try:
            item = await asyncio.wait_for(self._frames.get(), timeout)
        except TimeoutError:
            raise RequestTimeout(f"no frame within {timeout:g}s") from None
        if item is _END:
            self._frames.put_nowait(_END)
            raise self._closed_error or NotConnected("stream ended")
        assert isinstance(item, StreamEvent | Notice)
        return item


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
    argv = [sys.executable, "-m", "agenthost", "daemon", "--home", str(home), *(args or [])]
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


def known_agents(home: Path, *, timeout: float = 1.0) -> tuple[list[DaemonAgent], str]:
    """What the daemon knows, and from where: ``"daemon"`` (asked the running daemon),
    ``"registry"`` (read its database: no daemon answers) or ``"none"`` (no daemon, no
    readable registry). Blocking."""
    import uvloop

    from agenthost.daemon.files import registry_path
    from agenthost.daemon.registry import Registry

    async def ask() -> list[DaemonAgent]:
        async with DaemonClient(home, connect_timeout=timeout, request_timeout=timeout * 5) as c:
            return await c.list()

    if daemon_alive(home):
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(ask()), "daemon"
        except AgentHostError:
            pass  # reconciling, or stuck: what it wrote is the next best thing
    path = registry_path(home)
    if not path.exists():
        return [], "none"
    try:
        with Registry(path, readonly=True) as registry:
            return [r.to_wire() for r in registry.load().values()], "registry"
    except RegistryError:
        return [], "none"  # listing the hosts matters more than what the daemon knew


def forget_agent(
    home: Path, agent_id: str, *, purge: bool = False, timeout: float = 60.0
) -> ForgetResponse:
    """Forget an agent that does not run: through the daemon when one runs, else in the
    registry directly (holding the daemon lock meanwhile, so no daemon starts on a
    half-edited view). Raise Busy for a live agent. Blocking."""
    import uvloop

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
        path = registry_path(home)
        if path.exists():
            with Registry(path) as registry:
                forgotten = registry.forget(agent_id)
        return ForgetResponse(agent_id=agent_id, forgotten=forgotten, purged=purged)
    finally:
        lock.release()
