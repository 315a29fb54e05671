"""One follow of an agent's host shared by all the browsers watching it: :class:`Hub`
(the shared follows, one per agent) and :func:`shared_stream` (one browser's SSE body).

The shared follow reads each event once, makes its SSE bytes once, and appends them to
a log bounded in events and bytes (:data:`LOG`) that every stream reads at its own
browser's pace (:class:`Shared`). A stream that starts elsewhere (an old
``Last-Event-ID``, ``after=0`` past what the log still has) catches up with a follow of
its own, from the host's ring or journal as a lone stream does, and joins the shared
one when its position is one the log went through. A stream whose browser falls behind
the log (its next event gone from it) leaves the shared follow and catches up on its
own the same way: a stuck browser costs the others nothing, and the gateway's memory
for an agent is the log's, however many browsers. The last stream that leaves closes
the shared follow and its host connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog

from agenthost.client import AsyncClient
from agenthost.follow import Attached, Backoff, Follow, Lost, from_tail
from agenthost.position import Gap, Position
from agenthost.web.payloads import AgentKey
from agenthost.web.sse import BATCH_BYTES, Watch, item_bytes
from agenthost.wire.client import StreamLimit

log = structlog.get_logger("agenthost.web")

LOG: Final = StreamLimit(items=4096, bytes=2 << 20)
"""What the shared follow keeps of what it gave out, for all the agent's streams at
once: a stream reads it at its browser's pace, and one that falls further behind than
it (its next event gone from it) leaves the shared follow and catches up on its own,
from the host. It is also where a stream a little behind (one that just caught up, one
that asked for a recent offset) joins."""
BATCH_ITEMS: Final = 256
"""Events the shared follow gives out together at most (those its client has received)."""
TAKE_BYTES: Final = 256 * 1024
"""What one write to a browser takes from the log at most."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Items the shared follow gave out together: their SSE bytes, and the positions
    before and after them; ``marks``: the position before each item and where its bytes
    start (a stream at that position continues there)."""

    seq: int
    before: Position
    after: Position
    data: bytes
    marks: tuple[tuple[Position, int], ...]


class Member:
    """One stream in a shared follow: where it is in the shared log."""

    def __init__(self, position: Position, seq: int, skip: int = 0) -> None:
        self.position = position
        """After what the stream took (:meth:`Shared.take`): where it resumes if it
        falls out of the log."""
        self.seq = seq
        """The batch it reads next."""
        self.skip = skip
        """Bytes of that batch it already has (it joined in its middle)."""
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """The shared follow gave out more, or ended: the stream looks."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """A future done when the shared follow gives out more, or ends."""
        if self.waiter is None or self.waiter.done():
            self.waiter = asyncio.get_running_loop().create_future()
        return self.waiter


class Shared:
    """The follow of one agent shared by its streams (see the module docstring). It
    starts at the stream's head and runs while :class:`Hub` holds it."""

    def __init__(self, follow: Follow, client: AsyncClient) -> None:
        self.follow = follow
        self.client = client
        self.position = Position("", 0)
        """After the last item given out ("" epoch: not attached yet)."""
        self.log: deque[Batch] = deque()
        self.log_items = 0
        self.log_bytes = 0
        self.next_seq = 0
        self.members: set[Member] = set()
        self.error: BaseException | None = None
        self.ended = False
        self._moved: asyncio.Future[None] | None = None
        self.task = asyncio.create_task(self._run())

    def on_attached(self, attached: Attached) -> None:
        """The follow attached: the first time, where the shared stream starts."""
        if not self.position.epoch:  # the first attach: where the stream starts
            self.position = Position(attached.response.epoch, attached.from_offset)
            self._wake_all()

    def moved(self) -> asyncio.Future[None]:
        """A future done when the shared follow next moves (or ends)."""
        if self._moved is None or self._moved.done():
            self._moved = asyncio.get_running_loop().create_future()
        return self._moved

    def join(self, position: Position) -> Member | None:
        """A member at ``position`` (an epoch "" is the stream's current one), reading
        what the shared follow gave out after it; None when it is not a position the
        shared follow went through recently."""
        here = self.position
        if self.ended or not here.epoch:
            return None
        if not position.epoch:
            position = Position(here.epoch, position.offset)
        member: Member | None = None
        if position == here:
            member = Member(position, self.next_seq)
        elif position.epoch == here.epoch:
            for batch in reversed(self.log):
                at = next((skip for before, skip in batch.marks if before == position), None)
                if at is not None:
                    member = Member(position, batch.seq, at)
                    break
        if member is not None:
            self.members.add(member)
        return member

    def leave(self, member: Member) -> None:
        """The stream of ``member`` ended."""
        self.members.discard(member)

    def take(self, member: Member) -> bytes | None:
        """What ``member`` reads next (b"": nothing yet); None when it fell behind
        the log (it is out of the shared follow then)."""
        log = self.log
        if member.seq >= self.next_seq:
            return b""
        first = log[0].seq
        if member.seq < first:
            self.members.discard(member)
            return None
        parts: list[bytes] = []
        size = 0
        n = member.seq - first
        while n < len(log) and size < TAKE_BYTES:
            batch = log[n]
            data = batch.data[member.skip :] if member.skip else batch.data
            member.skip = 0
            parts.append(data)
            size += len(data)
            member.position = batch.after
            n += 1
        member.seq = first + n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _wake_all(self) -> None:
        if self._moved is not None and not self._moved.done():
            self._moved.set_result(None)

    def _add(self, items: list[tuple[Any, bytes]]) -> None:
        before = self.position
        marks = []
        parts = []
        at = 0
        for item, data in items:
            marks.append((self.position, at))
            parts.append(data)
            at += len(data)
            if isinstance(item, Gap):
                self.position = Position(item.epoch, item.before - 1)
            else:
                self.position = Position(self.follow.position.epoch, item.offset)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        log = self.log
        log.append(Batch(self.next_seq, before, self.position, data, tuple(marks)))
        self.next_seq += 1
        self.log_items += len(items)
        self.log_bytes += len(data)
        while len(log) > 1 and (self.log_items > LOG.items or self.log_bytes > LOG.bytes):
            gone = log.popleft()
            self.log_items -= len(gone.marks)
            self.log_bytes -= len(gone.data)
        for member in self.members:
            member.wake()
        self._wake_all()

    async def _run(self) -> None:
        follow = self.follow
        try:
            async for item in follow:
                # bytes made at once: ``follow.frame`` is the last item's
                items = [(item, item_bytes(item, follow))]
                # what the client has received already goes out in the same batch
                while self.client.events_queued and len(items) < BATCH_ITEMS:
                    item = await anext(follow)
                    items.append((item, item_bytes(item, follow)))
                self._add(items)
        except Exception as exc:  # given to each stream, as its own follow would raise it
            self.error = exc
        finally:
            self.ended = True
            for member in tuple(self.members):
                member.wake()
            self._wake_all()

    async def close(self) -> None:
        """Stop following and close the host connection."""
        self.ended = True
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        await self.follow.aclose()
        await self.client.close()


ClientOf = Callable[[AgentKey], AsyncClient]
BackoffOf = Callable[[AgentKey], Backoff]


class Hub:
    """The shared follows of a gateway, one per agent key while it has streams.
    ``client_of(key)``: a new (unconnected) client of the agent's host;
    ``backoff_of(key)``: the pauses between attempts to reach it again; ``closing()``:
    whether the gateway shuts down."""

    def __init__(
        self, client_of: ClientOf, backoff_of: BackoffOf, closing: Callable[[], bool]
    ) -> None:
        self.client_of = client_of
        self.backoff_of = backoff_of
        self.closing = closing
        self._shared: dict[AgentKey, Shared] = {}
        self._streams: dict[AgentKey, int] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def shared(self, key: AgentKey) -> Shared | None:
        """The shared follow of ``key``, if it has streams."""
        return self._shared.get(key)

    def enter(self, key: AgentKey) -> Shared:
        """A stream of ``key`` starts: its shared follow (started if none)."""
        self._streams[key] = self._streams.get(key, 0) + 1
        shared = self._shared.get(key)
        if shared is None or shared.ended:
            shared = self._start(key)
        return shared

    def _start(self, key: AgentKey) -> Shared:
        closing = self.closing

        def keep_trying(_lost: Lost) -> bool:
            return not closing()

        holder: list[Shared] = []
        client = self.client_of(key)
        follow = Follow(
            client,
            start=from_tail(0),
            keep_trying=keep_trying,
            on_attached=lambda attached: holder[0].on_attached(attached),
            backoff=self.backoff_of(key),
        )
        shared = Shared(follow, client)
        holder.append(shared)
        old = self._shared.get(key)
        if old is not None:
            self._close_later(old)
        self._shared[key] = shared
        return shared

    async def leave(self, key: AgentKey) -> None:
        """A stream of ``key`` ended: the last one closes the shared follow."""
        left = self._streams.get(key, 1) - 1
        if left > 0:
            self._streams[key] = left
            return
        self._streams.pop(key, None)
        shared = self._shared.pop(key, None)
        if shared is not None:
            await shared.close()

    def _close_later(self, shared: Shared) -> None:
        task = asyncio.create_task(shared.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def shared_stream(
    hub: Hub,
    key: AgentKey,
    watch: Watch,
    *,
    client: AsyncClient | None = None,
    after: int | None = None,
    tail: int | None = None,
) -> AsyncGenerator[bytes, None]:
    """The SSE body of one agent's stream: each offset once, in order, from where this
    browser asked (after offset ``after``, a position: events evicted after it come as
    a ``truncated`` event; else ``tail`` events before the newest; else from the oldest
    kept), across host restarts, with a ping comment when nothing happened for a while,
    until ``watch`` ends it. Served from the agent's shared follow whenever the stream
    is where it is, and from a follow of its own otherwise. ``client``: a client of the
    host already made for this stream (its first follow of its own uses it)."""
    shared = hub.enter(key)
    try:
        body = _serve(hub, key, shared, watch, client, after, tail)
        async with contextlib.aclosing(body):
            async for chunk in body:
                yield chunk
    finally:
        await hub.leave(key)


async def _serve(
    hub: Hub,
    key: AgentKey,
    shared: Shared,
    watch: Watch,
    client: AsyncClient | None,
    after: int | None,
    tail: int | None,
) -> AsyncGenerator[bytes, None]:
    member: Member | None = None
    position: Position | None = None  # where the stream is; None: from the oldest kept
    if after is not None:
        position = Position("", after)
    elif tail is not None and shared.position.epoch:
        position = Position("", max(0, shared.position.offset - tail))
    if position is not None:
        member = shared.join(position)
    if member is not None and client is not None:
        await client.close()  # the host answered; the shared follow serves the stream
        client = None
    try:
        while not watch.ended():
            if member is None:
                log.debug("web.stream_catching_up", agent=str(key), position=position, tail=tail)
                mine = client if client is not None else hub.client_of(key)
                own = _Own(
                    own_follow(mine, position, tail, hub.backoff_of(key), watch.closing),
                    mine,
                    tail_pending=position is None and tail is not None,
                )
                client = None
                async with contextlib.aclosing(_catch_up(own, shared, watch)) as caught:
                    async for chunk in caught:
                        yield chunk
                if own.error is not None:
                    raise own.error
                member = own.member
                log.debug("web.stream_joined", agent=str(key), position=list(own.follow.position))
                if member is None:
                    return
                continue
            data = shared.take(member)
            if data is None:  # its browser fell behind the log
                position, member = member.position, None
                log.info("web.stream_behind", agent=str(key))
                continue
            if not data:
                if shared.ended:
                    if shared.error is not None:
                        raise shared.error
                    return
                await _wait(member.wait(), watch)
                if member.seq >= shared.next_seq and (ping := watch.ping()):
                    yield ping
                continue
            if watch.ended():
                return
            yield data
            watch.wrote()
    finally:
        if member is not None:
            shared.leave(member)
        if client is not None:  # never used (the stream ended before it needed it)
            await client.close()


def own_follow(
    client: AsyncClient,
    position: Position | None,
    tail: int | None,
    backoff: Backoff,
    closing: asyncio.Event,
) -> Follow:
    """A stream's follow of its own: after ``position``, else ``tail`` events before
    the newest, else from the oldest kept; trying again until the gateway closes."""

    def keep_trying(_lost: Lost) -> bool:
        return not closing.is_set()

    return Follow(
        client,
        None if position is None else (position.epoch, position.offset),
        start=None if position is not None or tail is None else from_tail(tail),
        keep_trying=keep_trying,
        backoff=backoff,
    )


async def _wait(future: asyncio.Future[Any], watch: Watch) -> None:
    closed = asyncio.ensure_future(watch.closing.wait())
    try:
        await asyncio.wait(
            {future, closed}, timeout=watch.wake_seconds, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        closed.cancel()


class _Own:
    """A stream's own follow while it catches up; ``member``: where it joined the
    shared follow (None: it did not); ``error``: what ended the follow."""

    def __init__(self, follow: Follow, client: AsyncClient, *, tail_pending: bool) -> None:
        self.follow = follow
        self.client = client
        self.tail_pending = tail_pending
        self.member: Member | None = None
        self.error: BaseException | None = None

    def join(self, shared: Shared) -> bool:
        """Join ``shared`` if the follow is at a position it went through."""
        if self.tail_pending and self.follow.attaches == 0:
            return False  # where a tail starts is not known before the host says
        self.member = shared.join(self.follow.position)
        return self.member is not None


async def _catch_up(own: _Own, shared: Shared, watch: Watch) -> AsyncGenerator[bytes, None]:
    """The stream from its own follow until it joins ``shared`` (``own.member``)."""
    follow, client = own.follow, own.client
    step: asyncio.Future[Any] | None = None
    closed = asyncio.ensure_future(watch.closing.wait())
    try:
        # the follow's position is where the stream is whenever no item is in hand
        while not watch.ended() and not own.join(shared):
            if step is None:
                step = asyncio.ensure_future(anext(follow))
            done, _ = await asyncio.wait(
                {step, closed, shared.moved()},
                timeout=watch.wake_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if step not in done:
                if ping := watch.ping():
                    yield ping
                continue
            finished, step = step, None
            exc = finished.exception()
            if isinstance(exc, StopAsyncIteration):
                return
            if exc is not None:
                own.error = exc
                return
            item = finished.result()
            chunks = [item_bytes(item, follow)]
            size = len(chunks[0])
            # what the client has received already goes out in the same write; after
            # a gap before an event, that event too (the position already counts it)
            while (isinstance(item, Gap) and follow.position.offset >= item.before) or (
                client.events_queued and size < BATCH_BYTES
            ):
                item = await anext(follow)
                chunks.append(item_bytes(item, follow))
                size += len(chunks[-1])
            if watch.ended():
                return
            yield b"".join(chunks)
            watch.wrote()
    finally:
        closed.cancel()
        if step is not None:
            step.cancel()
            with contextlib.suppress(BaseException):
                await step
        await follow.aclose()
        await client.close()
