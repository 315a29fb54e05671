"""Backfilling a watcher whose position is older than the daemon's buffer.

The hub (:mod:`agenthost.daemon.fanout`) decides what a watcher lacks; this module
reads it, one bounded slice at a time, and only when the watcher's transport takes
more: a watch from offset 0 over a journal of any size holds one slice in the daemon,
never the range.

Where the events come from (a :class:`Source`):

* the agent's **journal** (``<home>/journal/<agent_id>/``), read directly when its
  epoch is the watcher's: no round trip, no decoding, the host's own bytes passed
  through, and it works while the host is gone. The host journals every event before
  any client (the daemon included) sees it, so the journal has whatever the daemon
  has;
* else the **host**, through ``host.attach`` (a host without a journal keeps its ring
  only): one short attach per slice, closed once the slice is read.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import structlog

from agenthost.aio import cancel_all
from agenthost.client import AsyncClient
from agenthost.daemon.fanout import Held, Hub, Watcher, WatchState
from agenthost.daemon.follower import host_client
from agenthost.errors import AgentHostError
from agenthost.journal import JournalReader
from agenthost.paths import journal_dir

log = structlog.get_logger("agenthost.daemon.backfill")

SLICE_EVENTS: Final = 1024
SLICE_BYTES: Final = 256 << 10  # about: a journal slice ends at the record that passes it


class Source(Protocol):
    """Where a backfill reads one agent's events."""

    async def read(self, first: int, last: int) -> tuple[int, list[bytes]]:
        """Events from ``first`` towards ``last``, one slice at most: the offset of the
        first frame returned (later than ``first`` when those are gone) and the frames,
        contiguous; no frame when nothing could be read."""
        ...


@dataclass(frozen=True, slots=True)
class HostSource:
    """Reads from the host: ``host.attach`` after the slice's start, one slice, close."""

    home: Path
    agent_id: str
    epoch: str
    timeout: float

    def _client(self) -> AsyncClient:
        return host_client(self.home, self.agent_id, self.timeout)

    async def held(self, after: int) -> Held | None:
        """How far back the host goes in this epoch (None: gone, or another epoch)."""
        try:
            async with self._client() as client:
                sub = await client.attach(after)
        except AgentHostError as exc:
            log.info("backfill.unreachable", agent_id=self.agent_id, error=str(exc))
            return None
        response = sub.response
        return Held(self.epoch, response.oldest_offset) if response.epoch == self.epoch else None

    async def read(self, first: int, last: int) -> tuple[int, list[bytes]]:
        """See :meth:`Source.read`."""
        last = min(last, first + SLICE_EVENTS - 1)
        frames: list[bytes] = []
        start = first
        size = 0
        try:
            async with self._client() as client:
                sub = await client.attach(first - 1)
                if sub.response.epoch != self.epoch:
                    return first, []
                while size < SLICE_BYTES:
                    event, line = await client.recv_frame(self.timeout)
                    if event.offset > last:
                        break
                    if not frames:
                        start = event.offset
                    # the host's own bytes, as the daemon's live frames (supervisor.on_event)
                    frame = line + b"\n"
                    frames.append(frame)
                    size += len(frame)
                    if event.offset == last:
                        break
        except AgentHostError as exc:  # what was read is still good
            log.info("backfill.read_failed", agent_id=self.agent_id, error=str(exc))
        return start, frames


@dataclass(frozen=True, slots=True)
class JournalSource:
    """Reads the agent's journal (the host's bytes as they are); what it cannot give
    (a journal that stopped, a damaged record) is asked of the host."""

    reader: JournalReader
    host: HostSource

    async def read(self, first: int, last: int) -> tuple[int, list[bytes]]:
        """See :meth:`Source.read`."""
        until = min(last, first + SLICE_EVENTS - 1)
        try:
            records = await asyncio.to_thread(self.reader.read, first, until, SLICE_BYTES)
        except (OSError, AgentHostError) as exc:  # JournalCorrupt, EACCES, EIO, ...
            log.warning("backfill.journal_failed", agent_id=self.host.agent_id, error=str(exc))
            records = None
        if records:
            return first, records
        return await self.host.read(first, last)


async def open_source(
    home: Path, agent_id: str, epoch: str, after: int, *, timeout: float
) -> tuple[Held, Source] | None:
    """Find where ``agent_id``'s events after ``after`` in ``epoch`` can be read: its
    journal when it holds that epoch, else its host. None when neither can."""
    host = HostSource(home, agent_id, epoch, timeout)
    reader = JournalReader(journal_dir(home, agent_id))
    try:
        if await asyncio.to_thread(reader.epoch) == epoch:
            oldest = await asyncio.to_thread(reader.oldest_offset)
            if oldest is not None:
                return Held(epoch, oldest), JournalSource(reader, host)
    except OSError as exc:  # EACCES, EIO...: the host may still serve it
        log.warning("backfill.journal_failed", agent_id=agent_id, error=str(exc))
    held = await host.held(after)
    return (held, host) if held is not None else None


@dataclass
class _Job:
    """The backfills of one watcher: a task per agent, one wake-up for all."""

    state: WatchState
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class Backfills:
    """The running backfills, per watcher. Each agent's is its own task, so that a slow
    host holds only its own agent; a watcher that goes away (or watches anew) cancels
    its backfills."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._jobs: dict[Watcher, _Job] = {}

    def start(self, watcher: Watcher, sources: dict[str, Source]) -> None:
        """Backfill ``watcher`` (just registered by :meth:`Hub.watch`) for each agent."""
        state = watcher.watch
        if state is None or not sources:
            return
        job = self._jobs.get(watcher)
        if job is None or job.state is not state:
            self.cancel(watcher)
            job = self._jobs[watcher] = _Job(state)
        loop = asyncio.get_running_loop()
        for agent_id, source in sources.items():
            task = loop.create_task(
                self._run(watcher, job, agent_id, source), name=f"backfill {agent_id}"
            )
            job.tasks.add(task)
            task.add_done_callback(functools.partial(self._done, watcher, job))

    def drained(self, watcher: Watcher) -> None:
        """The watcher's transport takes more again: its backfills go on."""
        job = self._jobs.get(watcher)
        if job is not None:
            job.drained.set()

    def cancel(self, watcher: Watcher) -> None:
        """Stop the watcher's backfills (it stopped watching, or is gone)."""
        job = self._jobs.pop(watcher, None)
        if job is not None:
            for task in job.tasks:
                task.cancel()

    def tasks(self, watcher: Watcher) -> list[asyncio.Task[None]]:
        """The running backfills of ``watcher`` (one per agent)."""
        job = self._jobs.get(watcher)
        return list(job.tasks) if job is not None else []

    async def close(self) -> None:
        """Cancel every backfill and wait for them to end."""
        jobs = list(self._jobs.values())
        self._jobs.clear()
        await cancel_all([task for job in jobs for task in job.tasks])

    def _done(self, watcher: Watcher, job: _Job, task: asyncio.Task[None]) -> None:
        job.tasks.discard(task)
        if not job.tasks and self._jobs.get(watcher) is job:
            del self._jobs[watcher]

    async def _run(self, watcher: Watcher, job: _Job, agent_id: str, source: Source) -> None:
        hub = self.hub
        # `watcher.watch is job.state` on every step: a cancellation can be lost (see
        # aio.cancel_all), and a newer watch on the same connection is not ours to feed
        while watcher.watch is job.state:
            if not hub.fill_ready(watcher):
                job.drained.clear()
                await job.drained.wait()  # set by the transport's drain (Daemon.resume)
                continue
            span = hub.fill_range(watcher, agent_id)
            if span is None:
                return  # it reached the buffer: served from it from now on
            try:
                first, frames = await source.read(*span)
            except Exception:  # a bug must not leave the watcher waiting for ever
                log.exception("backfill.failed", agent_id=agent_id)
                first, frames = span[0], []
            if watcher.watch is job.state:
                hub.fill(watcher, agent_id, first, frames)
