"""``agenthost acp ID``: an ACP editor on stdio, bridged to the host of agent ID.

The I/O around :class:`agenthost.acp.bridge.Bridge`: what the editor writes on stdin
goes to the bridge; the host's stream comes from a follow (it reconnects and resumes
after the last offset by itself, across host restarts); the bridge's effects are done
here: lines to stdout, a follow started, host requests sent one at a time in the order
the editor asked (so an interrupt never overtakes the prompt it cancels). Logs go to
stderr: stdout is the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import uuid
from pathlib import Path
from typing import Any, Final

import structlog

from agenthost._version import __version__
from agenthost.acp.bridge import Bridge
from agenthost.acp.effects import (
    Effect,
    Interrupt,
    ListSessions,
    Respond,
    Send,
    StartFollow,
    Write,
)
from agenthost.agents import structured_output
from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError, NotConnected, UnknownRequest
from agenthost.follow import Attached, Backoff, Follow, Gap, Lost, from_tail
from agenthost.remote import Remote

log = structlog.get_logger("agenthost.acp")

READ_SIZE: Final = 1 << 16
RETRY: Final = Backoff(first=0.05, max=2.0)  # reconnection pauses while the host is away


def describe(exc: AgentHostError) -> str:
    """An error as the editor shows it: the message, and what to do when known."""
    return f"{exc.message} ({exc.hint})" if exc.hint else exc.message


class EditorBridge:
    """Serve agent ``agent_id`` (of ``home``) to the editor on ``stdin``/``stdout``
    (file descriptors) until the editor closes stdin. :meth:`run` returns the exit
    status (0)."""

    def __init__(
        self,
        agent_id: str,
        *,
        home: Path | None = None,
        stdin: int = 0,
        stdout: int = 1,
        request_timeout: float = 10.0,
        remote: Remote | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.home = home
        self.remote = remote
        self.bridge = Bridge(agent_id, version=__version__)
        self.requests = AsyncClient(
            agent_id, home=home, request_timeout=request_timeout, remote=remote
        )
        self._stdin = stdin
        self._stdout = stdout
        self._out: _Output | None = None
        self._host_requests: asyncio.Queue[Effect] = asyncio.Queue()
        self._follow_task: asyncio.Task[None] | None = None
        self._sends = 0
        self._key = uuid.uuid4().hex[:12]  # makes our sends' idempotency keys unique

    async def run(self) -> int:
        """Bridge until the editor closes stdin (or stdout); return 0."""
        loop = asyncio.get_running_loop()
        self._out = await _Output.open(loop, self._stdout)
        worker = asyncio.create_task(self._serve_host_requests(), name="acp-host-requests")
        log.info("acp.started", agent_id=self.agent_id)
        reading = asyncio.create_task(self._read_editor(loop), name="acp-editor")
        gone = asyncio.create_task(self._out.lost.wait(), name="acp-stdout")
        try:
            # the editor closes stdin, or its end of stdout: either ends the bridge
            await asyncio.wait((reading, gone), return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                reading.result()  # (what it raised)
        finally:
            tasks = [t for t in (reading, gone, worker, self._follow_task) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.requests.close()
            self._out.close()
        log.info("acp.ended", agent_id=self.agent_id)
        return 0

    async def _read_editor(self, loop: asyncio.AbstractEventLoop) -> None:
        read = await _input(loop, self._stdin)
        assert self._out is not None
        while True:
            data = await read()
            if not data:
                self._do(self.bridge.end_of_input())
                # what the editor asked before it left is still done (a session/list,
                # a permission answer), within each request's own timeout
                await self._host_requests.join()
                break
            self._do(self.bridge.feed(data))
            await self._out.drain()
        await self._out.drain()

    # --- effects --------------------------------------------------------------------

    def _do(self, effects: list[Effect]) -> None:
        assert self._out is not None
        for effect in effects:
            if isinstance(effect, Write):
                self._out.write(effect.data)
            elif isinstance(effect, StartFollow):
                if self._follow_task is not None:
                    self._follow_task.cancel()
                self._follow_task = asyncio.create_task(self._follow(effect), name="acp-follow")
            else:
                self._host_requests.put_nowait(effect)

    async def _serve_host_requests(self) -> None:
        while True:
            effect = await self._host_requests.get()
            try:
                await self._host_request(effect)
            except AgentHostError as exc:
                self._failed(effect, exc)
            finally:
                self._host_requests.task_done()
            if self._out is not None:
                await self._out.drain()

    async def _host_request(self, effect: Effect) -> None:
        if isinstance(effect, Send):
            self._sends += 1
            key = f"acp-{self._key}-{self._sends}"  # a retry after a lost connection is safe
            sent = await self._retrying(lambda c: c.send(effect.text, key=key))
            log.info("acp.sent", offset=sent.offset)
            self._do(self.bridge.sent(effect.rid, sent.offset))
        elif isinstance(effect, Interrupt):
            reply = await self._retrying(lambda c: c.interrupt())
            log.info("acp.interrupted", sent=reply.sent)
        elif isinstance(effect, Respond):
            try:
                await self._retrying(
                    lambda c: c.respond(
                        effect.request_id,
                        effect.behavior,
                        option_id=effect.option_id,
                        actor="acp",
                    )
                )
            except UnknownRequest:  # answered elsewhere first: the editor's answer is moot
                log.info("acp.respond_late", request_id=effect.request_id)
            else:
                log.info("acp.responded", request_id=effect.request_id, behavior=effect.behavior)
        elif isinstance(effect, ListSessions):
            status = await self._retrying(lambda c: c.status())
            self._do(self.bridge.listed(effect.rid, effect.cwd, status.agent))

    def _failed(self, effect: Effect, exc: AgentHostError) -> None:
        log.warning("acp.host_request_failed", request=type(effect).__name__, error=str(exc))
        if isinstance(effect, Send | ListSessions):
            self._do(self.bridge.failed(effect.rid, describe(exc)))

    async def _retrying(self, call: Any) -> Any:
        """``call(client)`` on the requests connection, connecting again first when it
        was lost (the host restarted), and once more if it is lost meanwhile."""
        client = self.requests
        if not client.connected:
            await client.close()  # (nothing to close before the first request)
        try:
            return await call(client)
        except NotConnected:
            await client.close()
            return await call(client)

    # --- the host's stream ----------------------------------------------------------

    async def _follow(self, start: StartFollow) -> None:
        client = AsyncClient(self.agent_id, home=self.home, remote=self.remote)
        follow = Follow(
            client,
            start.after,
            start=from_tail(0) if start.from_head else None,  # a session/new starts there
            keep_trying=self._keep_trying,
            on_attached=lambda attached: self._attached(follow, attached),
            backoff=RETRY,
        )
        assert self._out is not None
        try:
            async for item in follow:
                if isinstance(item, Gap):
                    log.warning("acp.gap", gap=str(item))
                    self._do(self.bridge.gap(item))
                else:
                    self._do(self.bridge.event(item))
                await self._out.drain()
        except AgentHostError as exc:  # before the first attach: the load fails
            log.warning("acp.follow_failed", error=str(exc))
            self._do(self.bridge.follow_failed(describe(exc)))
        finally:
            await follow.aclose()
            await client.close()

    async def _attached(self, follow: Follow, attached: Attached) -> None:
        response, agent = attached.response, attached.status.agent
        log.info(
            "acp.attached",
            epoch=response.epoch,
            after=follow.position.offset,
            head=response.stream_offset,
            pending=len(response.pending),
        )
        effects = self.bridge.attached(
            epoch=response.epoch,
            head=response.stream_offset,
            position=follow.position.offset,
            new_epoch=attached.new_epoch,
            pending=list(response.pending),
            structured=structured_output(agent.backend),
        )
        self._do(effects)
        assert self._out is not None
        await self._out.drain()

    def _keep_trying(self, lost: Lost) -> bool:
        if lost.attaches == 0:
            raise lost.error  # never reached the host: say why
        if lost.failures <= 1:
            log.warning("acp.host_lost", error=str(lost.error))
        return True  # the host may come back (a restart, the daemon): resume then


# --- stdio --------------------------------------------------------------------------


class _Output(asyncio.Protocol):
    """stdout: writes never block the loop; :meth:`drain` waits while the editor is
    behind. A regular file (no pipe) is written to directly."""

    def __init__(self) -> None:
        self.closed = False
        self.lost = asyncio.Event()
        """Set when the editor's end of stdout is gone."""
        self._transport: asyncio.WriteTransport | None = None
        self._fd = -1
        self._resumed = asyncio.Event()
        self._resumed.set()

    @classmethod
    async def open(cls, loop: asyncio.AbstractEventLoop, fd: int) -> _Output:
        out = cls()
        if not _streams(fd):  # a file: written to directly
            out._fd = fd
            return out
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
        transport, _ = await loop.connect_write_pipe(lambda: out, pipe)
        out._transport = transport
        return out

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self._transport is not None:
            self._transport.write(data)
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            self.closed = True
            self.lost.set()

    async def drain(self) -> None:
        await self._resumed.wait()

    def pause_writing(self) -> None:
        self._resumed.clear()

    def resume_writing(self) -> None:
        self._resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True  # the editor is gone
        self.lost.set()
        self._resumed.set()

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


async def _input(loop: asyncio.AbstractEventLoop, fd: int) -> Any:
    """A coroutine function giving stdin's next bytes (b"" at its end)."""
    if not _streams(fd):  # a file: read in a thread
        return lambda: loop.run_in_executor(None, os.read, fd, READ_SIZE)
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return lambda: reader.read(READ_SIZE)


def _streams(fd: int) -> bool:
    """Whether ``fd`` is a pipe, socket or terminal (what the loop's pipe transports
    take: uvloop aborts the process when given a regular file)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def run(agent_id: str, home: Path | None = None, remote: Remote | None = None) -> int:
    """Run ``agenthost acp`` on this process's stdio; return the exit status (``remote``:
    the agent runs on that machine, ``home`` is its home there)."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        with contextlib.suppress(KeyboardInterrupt):
            return runner.run(EditorBridge(agent_id, home=home, remote=remote).run())
    return 0


__all__ = ["EditorBridge", "describe", "run"]
