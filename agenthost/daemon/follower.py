"""Following one host's stream, with :mod:`agenthost.follow`, until the host is gone.

The follower resumes after the (epoch, offset) the daemon recorded; the follow
attaches from the new stream's start when the host's epoch is another (offsets of
different epochs are not comparable). When the connection ends it looks at the host's
lock: held means the host lives (it dropped us as too slow, is restarting its socket,
or is stopped with SIGSTOP): the follow resumes, with a growing pause between failed
attempts; free means the host is gone and :meth:`Follower.run` returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Protocol

import structlog

from agenthost.client import AsyncClient
from agenthost.daemon.discovery import wait_for_socket, wake
from agenthost.follow import Attached, Backoff, Follow, Lost
from agenthost.lockfile import is_lock_held
from agenthost.paths import lock_path, socket_path
from agenthost.protocol import StatusResponse, StreamEvent

log = structlog.get_logger("agenthost.daemon.follower")

RETRY_FIRST: Final = 0.05
RETRY_MAX: Final = 2.0
WAKE_AFTER: Final = 3  # failed attempts without a socket file before SIGUSR1

__all__ = ["Attached", "Follower", "FollowerSink", "host_client"]


class FollowerSink(Protocol):
    """Where a follower reports (all called on the event loop, never blocking)."""

    def on_attached(self, agent_id: str, attached: Attached) -> None: ...

    def on_event(self, agent_id: str, event: StreamEvent, frame: bytes) -> None:
        """One new event; ``frame`` is its line as the host sent it, newline excluded."""

    def on_unreachable(self, agent_id: str, error: str) -> None: ...


class Follower:
    """Follows the stream of ``agent_id``'s host; ``epoch``/``offset`` say where from
    (no ``epoch``: from the oldest event the host keeps). ``status`` and ``client``:
    a probe's answer and the connection it came on, if the host was just probed; the
    follower then owns that connection (:meth:`run` closes it)."""

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
        client: AsyncClient | None = None,
    ) -> None:
        self.home = home
        self.agent_id = agent_id
        self.sink = sink
        self.timeout = timeout
        if client is None:
            client = host_client(home, agent_id, timeout)
        else:  # the probe's connection, still open: the first attach goes on it
            client.connect_timeout = client.request_timeout = timeout
        self._follow = Follow(
            client,
            (epoch, offset) if epoch else None,
            status=status,  # a fresh probe's answer: saves a round trip on the first attach
            keep_trying=self._keep_trying,
            on_attached=self._attached,
            backoff=Backoff(RETRY_FIRST, RETRY_MAX),
        )

    @property
    def attaches(self) -> int:
        """Successful attaches so far."""
        return self._follow.attaches

    @property
    def epoch(self) -> str:
        """The stream followed ("" before the first attach)."""
        return self._follow.position.epoch

    @property
    def offset(self) -> int:
        """The last offset received."""
        return self._follow.position.offset

    async def run(self) -> None:
        """Follow until the host is gone (its lock is free). Cancel to stop following
        (the host is not affected). Raise VersionUnsupported for a host of another
        major protocol version."""
        follow = self._follow
        try:
            async for item in follow:
                if isinstance(item, StreamEvent):
                    self.sink.on_event(self.agent_id, item, follow.frame)
                # a Gap needs nothing here: the hub sees the offsets jump and says so
        finally:
            await follow.client.close()

    def _attached(self, attached: Attached) -> None:
        self.sink.on_attached(self.agent_id, attached)

    async def _keep_trying(self, lost: Lost) -> bool:
        if not is_lock_held(lock_path(self.home, self.agent_id)):
            return False  # the host is gone
        if lost.failures == 0:
            return True  # the stream ended after it delivered: again at once
        if lost.failures > 1:  # once may be a host dying: its lock goes a moment later
            self.sink.on_unreachable(self.agent_id, str(lost.error))
        if lost.failures >= WAKE_AFTER and not socket_path(self.home, self.agent_id).exists():
            # still alive, still no socket file: a cleanup job deleted it
            if wake(self.home, self.agent_id):
                log.info("host.woken", agent_id=self.agent_id)
                await wait_for_socket(self.home, self.agent_id, self.timeout)
        return True


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
