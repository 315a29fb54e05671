"""Following one host's stream, through client.py, until the host is gone.

The follower attaches from the last offset it has when the host's epoch is the one it
recorded, and from 0 when it is not (a new stream: offsets of different epochs are not
comparable). When the connection ends it looks at the host's lock: held means the host
lives (it dropped us as too slow, is restarting its socket, or is stopped with
SIGSTOP): reattach from the last offset, with a growing pause between failed attempts;
free means the host is gone and :meth:`Follower.run` returns.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import structlog

from agenthost.client import AsyncClient
from agenthost.daemon.discovery import check_versions, wait_for_socket, wake
from agenthost.errors import AgentHostError, NotConnected, VersionUnsupported
from agenthost.lockfile import is_lock_held
from agenthost.paths import lock_path, socket_path
from agenthost.protocol import AttachResponse, StatusResponse, StreamEvent

log = structlog.get_logger("agenthost.daemon.follower")

RETRY_FIRST: Final = 0.05
RETRY_MAX: Final = 2.0
WAKE_AFTER: Final = 3  # failed attempts without a socket file before SIGUSR1


@dataclass(frozen=True, slots=True)
class Attached:
    """One successful (re)attach."""

    response: AttachResponse
    status: StatusResponse
    from_offset: int
    """The offset attached after (events from ``from_offset + 1`` follow)."""
    new_epoch: bool


class FollowerSink(Protocol):
    """Where a follower reports (all called on the event loop, never blocking)."""

    def on_attached(self, agent_id: str, attached: Attached) -> None: ...

    def on_event(self, agent_id: str, event: StreamEvent) -> None: ...

    def on_unreachable(self, agent_id: str, error: str) -> None: ...


class Follower:
    """Follows the stream of ``agent_id``'s host; ``epoch``/``offset`` say where from."""

    def __init__(
        self,
        home: Path,
        agent_id: str,
        sink: FollowerSink,
        *,
        epoch: str = "",
        offset: int = 0,
        timeout: float = 2.0,
        status: StatusResponse | None = None,
    ) -> None:
        self.home = home
        self.agent_id = agent_id
        self.sink = sink
        self.epoch = epoch
        self.offset = offset
        self.timeout = timeout
        self._status = status  # a fresh probe's answer: saves a round trip on the first attach
        self.attaches = 0

    async def run(self) -> None:
        """Follow until the host is gone (its lock is free). Cancel to stop following
        (the host is not affected)."""
        failures = 0
        while True:
            error = await self._follow_once()
            if not is_lock_held(lock_path(self.home, self.agent_id)):
                return
            if error is None:
                failures = 0  # the stream ended normally: try again at once
            else:
                failures += 1
                if failures > 1:  # once may be a host dying: its lock goes a moment later
                    self.sink.on_unreachable(self.agent_id, error)
                if failures >= WAKE_AFTER and not socket_path(self.home, self.agent_id).exists():
                    # still alive, still no socket file: a cleanup job deleted it
                    if wake(self.home, self.agent_id):
                        log.info("host.woken", agent_id=self.agent_id)
                        await wait_for_socket(self.home, self.agent_id, self.timeout)
                        continue
                # a pause between attempts (not a synchronisation): the host lives but
                # does not answer (stopped, overloaded) or is between two sockets
                await asyncio.sleep(min(RETRY_FIRST * 2 ** (failures - 1), RETRY_MAX))

    async def _follow_once(self) -> str | None:
        """One connection: attach and consume the stream. Return an error text, or None
        when an attached stream ended."""
        client = self._client()
        try:
            status = self._status
            self._status = None
            await client.connect()
            if status is None:
                status = await client.status()
            if not check_versions(status).compatible:
                raise VersionUnsupported(
                    f"host protocol {status.host.protocol_version} cannot be followed"
                )
            start = self.offset if self.epoch else 0
            sub = await client.attach(start)
            if self.epoch and sub.response.epoch != self.epoch and start > 0:
                # another stream: its offsets say nothing about ours; start it from 0
                await client.close()
                client = self._client()
                await client.connect()
                start = 0
                sub = await client.attach(0)
            new_epoch = sub.response.epoch != self.epoch
            if new_epoch:
                self.offset = 0
            self.epoch = sub.response.epoch
            self.attaches += 1
            self.sink.on_attached(self.agent_id, Attached(sub.response, status, start, new_epoch))
            received = 0
            while True:
                try:
                    event = await client.recv_event()
                except NotConnected as exc:
                    # the host closed the stream (it exits, or dropped us as too slow):
                    # reattach at once, unless it closed before sending anything
                    return None if received else f"the stream ended at once: {exc}"
                received += 1
                if event.offset <= self.offset:
                    continue  # already seen (a replay overlapping what we had)
                self.offset = event.offset
                self.sink.on_event(self.agent_id, event)
        except VersionUnsupported:
            raise
        except AgentHostError as exc:
            return str(exc)
        finally:
            await client.close()

    def _client(self) -> AsyncClient:
        return host_client(self.home, self.agent_id, self.timeout)


def host_client(home: Path, agent_id: str, timeout: float) -> AsyncClient:
    """A client of an agent's host as the daemon uses one: ``timeout`` for the connect
    and every request, and no version check (the daemon follows hosts of any 1.x)."""
    return AsyncClient(
        agent_id,
        home=home,
        connect_timeout=timeout,
        request_timeout=timeout,
        check_version=False,
    )
