"""Server-Sent Events: what every stream shares (:class:`Watch`: when it ends, when it
pings), the bytes of what a follow yields (:func:`item_bytes`), and the overview of all
agents (:class:`Overview`, one shared poll). An agent's streams are served from one
follow per agent, :mod:`agenthost.web.fanout`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import structlog

from agenthost.errors import AgentHostError
from agenthost.follow import Follow, Gap
from agenthost.web.payloads import PING, sse_event, sse_named

log = structlog.get_logger("agenthost.web")

PING_SECONDS: Final = 15.0
CHECK_SECONDS: Final = 1.0
"""How often an open stream checks that its token still allows it (a revoked token's
streams end within this)."""
BATCH_BYTES: Final = 64 * 1024
"""Events already received are sent together, up to this many bytes per write."""


class Watch:
    """When an open stream ends, and when it pings: the gateway closes (``closing``),
    its token no longer allows it (``allowed()``, asked at most every
    ``check_seconds``), and a ping after ``ping_seconds`` without a write."""

    def __init__(
        self,
        closing: asyncio.Event,
        allowed: Callable[[], bool] | None = None,
        *,
        ping_seconds: float = PING_SECONDS,
        check_seconds: float = CHECK_SECONDS,
    ) -> None:
        self.closing = closing
        self._allowed = allowed
        self.ping_seconds = ping_seconds
        self.wake_seconds = min(ping_seconds, check_seconds)
        self.check_seconds = check_seconds
        loop = asyncio.get_running_loop()
        self._time = loop.time
        self._written = self._checked = loop.time()

    def ended(self) -> bool:
        """Whether the stream must end now."""
        if self.closing.is_set():
            return True
        now = self._time()
        if self._allowed is not None and now - self._checked >= self.check_seconds:
            self._checked = now
            if not self._allowed():
                log.info("web.stream_refused")
                return True
        return False

    def ping(self) -> bytes:
        """A ping if one is due (as if written), else nothing."""
        if self._time() - self._written < self.ping_seconds:
            return b""
        self.wrote()
        return PING

    def wrote(self) -> None:
        """Something was just written."""
        self._written = self._time()


def item_bytes(item: Any, follow: Follow) -> bytes:
    """The SSE bytes of what a follow yielded (an event, or a gap as ``truncated``)."""
    if isinstance(item, Gap):
        return sse_named(
            "truncated",
            {
                "epoch": item.epoch,
                "after": item.after,
                "before": item.before,
                "reason": item.reason,
            },
        )
    return sse_event(item.offset, follow.frame)


class Overview:
    """The list of agents for every ``GET /api/events``: one poll of ``gather`` every
    ``interval`` seconds while someone listens, each change sent to all of them."""

    def __init__(
        self, gather: Callable[[], Awaitable[list[dict[str, Any]]]], interval: float = 1.0
    ) -> None:
        self._gather = gather
        self.interval = interval
        self.snapshot: bytes | None = None
        self.version = 0
        self._changed = asyncio.Condition()
        self._listeners = 0
        self._poller: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            try:
                items = await self._gather()
            except AgentHostError as exc:  # e.g. an unreadable hosts directory: say so, go on
                log.warning("web.list_failed", error=exc.message)
                await asyncio.sleep(self.interval)  # the poll's period
                continue
            data = sse_named("agents", items)
            if data != self.snapshot:
                async with self._changed:
                    self.snapshot = data
                    self.version += 1
                    self._changed.notify_all()
            await asyncio.sleep(self.interval)  # the poll's period, not a synchronisation

    async def stream(self, watch: Watch) -> AsyncIterator[bytes]:
        """The SSE body: the list at once, then each change of it, until ``watch``
        says the stream ends."""
        self._listeners += 1
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        seen = 0  # version 0: no list yet

        def news() -> bool:
            return self.version != seen or watch.closing.is_set()

        try:
            while not watch.ended():
                async with self._changed:
                    try:
                        await asyncio.wait_for(self._changed.wait_for(news), watch.wake_seconds)
                    except TimeoutError:
                        pass
                if watch.ended():
                    return
                if self.version == seen or self.snapshot is None:  # a quiet while
                    if ping := watch.ping():
                        yield ping
                    continue
                seen = self.version
                yield self.snapshot
                watch.wrote()
        finally:
            self._listeners -= 1
            if self._listeners == 0 and self._poller is not None:
                self._poller.cancel()
                self._poller = None
                # what a next listener gets first must be fresh, not this old list
                self.snapshot, self.version = None, 0
