"""Follow an agent's stream across lost connections: :class:`Follow`.

::

    async with AsyncClient("demo") as client:
        async for item in client.follow(after=None):
            if isinstance(item, Gap):
                print("missed:", item)   # what the follow could not give
            else:
                print(item)              # a StreamEvent

A follow attaches, yields the stream's events and, when the connection ends (the host
restarted, crashed, or dropped a reader that fell behind), connects again and resumes
right after the last offset it yielded: each offset of a stream at most once, in
order. What it cannot give is said in the stream itself, as a :class:`Gap`: events the
host evicted before they could be read, and a new stream (another epoch: the host came
back without its journal), which is then followed from its start.

Whether to keep trying after a loss is the caller's policy (``keep_trying``); the
default follows while the host lives (its lock is held). :class:`Cursor` holds the
decisions about offsets and epochs, without I/O
(:mod:`agenthost.position`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from agenthost.errors import AgentHostError, NotConnected, RequestTimeout, VersionUnsupported
from agenthost.lockfile import is_lock_held
from agenthost.position import Cursor, Gap, GapReason, Position
from agenthost.protocol import (
    AttachResponse,
    StatusResponse,
    StreamEvent,
    check_peer_version,
)
from agenthost.remote import for_good


@dataclass(frozen=True, slots=True)
class Attached:
    """One successful attach of a follow (given to ``on_attached``)."""

    response: AttachResponse
    status: StatusResponse
    """The host's status, asked right before this attach."""
    from_offset: int
    """The offset attached after (events from ``from_offset + 1`` follow)."""
    new_epoch: bool
    """The stream is not the one the follow knew (always True for a first attach
    without a known epoch)."""


@dataclass(frozen=True, slots=True)
class Lost:
    """A connection that ended, or could not be made (given to ``keep_trying``)."""

    error: AgentHostError
    """Why: e.g. HostNotFound (nobody answers), NotConnected (the stream ended)."""
    failures: int
    """Attempts in a row that received no event, this one included; 0 when the stream
    delivered events before it ended."""
    attaches: int
    """Successful attaches so far (0: the follow never reached the stream)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Pauses between attempts: none after a stream that delivered events, then
    ``first`` seconds, doubling up to ``max``."""

    first: float = 0.05
    max: float = 2.0

    def pause(self, failures: int) -> float:
        """Seconds to wait before the next attempt after ``failures`` in a row."""
        return 0.0 if failures <= 0 else min(self.first * 2 ** (failures - 1), self.max)


KeepTrying: TypeAlias = Callable[[Lost], "bool | Awaitable[bool]"]
"""Decides after each loss whether to try again (True) or end the iteration (False);
it may also raise, e.g. ``lost.error``, to end it with that error."""
OnAttached: TypeAlias = Callable[[Attached], "None | Awaitable[None]"]
StartOffset: TypeAlias = Callable[[Any], Awaitable[int]]


def from_tail(events: int) -> StartOffset:
    """A ``start`` for :class:`Follow`: ``events`` events before the stream's newest
    (0: only what comes next), read from the host once connected."""

    async def start(client: Any) -> int:
        head: int = (await client.history(1)).offset
        return max(0, head - events)

    return start


class _Attachment(Protocol):
    @property
    def response(self) -> AttachResponse: ...


class FollowClient(Protocol):
    """What a follow needs of a client (AsyncClient has it)."""

    @property
    def socket_path(self) -> Path: ...

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def status(self) -> StatusResponse: ...

    def attach(self, offset: int = 0, *, snapshot: bool = False) -> Awaitable[_Attachment]: ...

    async def recv_frame(self, timeout: float | None = None) -> tuple[StreamEvent, bytes]: ...


def while_host_lives(lock: Path) -> KeepTrying:
    """The default policy: keep trying while a host holds the agent's ``lock``; end
    when none does, raising the error if the follow never attached."""

    def keep_trying(lost: Lost) -> bool:
        if is_lock_held(lock):
            return True
        if lost.attaches == 0:
            raise lost.error
        return False

    return keep_trying


REMOTE_GIVE_UP: float = 300.0
"""Seconds in a row :func:`while_link_fails` keeps trying to reach a remote host."""


def while_link_fails(seconds: float = REMOTE_GIVE_UP) -> KeepTrying:
    """The default policy for a host on another machine, whose lock cannot be seen:
    keep trying while the failure is the link (the SSH connection dropped, ssh cannot
    reach the machine), for at most ``seconds`` in a row; end at once when the remote
    answers that no host runs there (HostNotFound: the host exited) or refuses us, or
    when another attempt cannot help (no agenthost there, no ssh here).
    As the other policies, raise the error if the follow never attached."""
    link = retry_for(seconds)

    def keep_trying(lost: Lost) -> bool:
        if isinstance(lost.error, NotConnected | RequestTimeout) and not for_good(lost.error):
            return link(lost)
        if lost.attaches == 0:
            raise lost.error
        return False

    return keep_trying


def default_policy(client: FollowClient) -> KeepTrying:
    """:func:`while_host_lives` for a local client, :func:`while_link_fails` for one
    with a ``remote``."""
    if getattr(client, "remote", None) is not None:
        return while_link_fails()
    return while_host_lives(client.socket_path.with_suffix(".lock"))


def retry_for(seconds: float) -> Callable[[Lost], bool]:
    """A policy: keep trying until the stream has been lost for ``seconds`` in a row
    (e.g. across a host's restart); then end, raising the error if the follow never
    attached."""
    since: list[float] = []

    def keep_trying(lost: Lost) -> bool:
        now = asyncio.get_running_loop().time()
        if lost.failures <= 1 or not since:
            since[:] = [now]  # a new run of failures starts here
        if now - since[0] < seconds:
            return True
        if lost.attaches == 0:
            raise lost.error
        return False

    return keep_trying


class Follow:
    """An async iterator of a stream's events (and :class:`Gap` items) that survives
    lost connections. See the module docstring; ``AsyncClient.follow`` makes one.

    ``client`` is the connection used (opened, closed and opened again by the follow;
    send requests on it while following if you like). ``after``: see :class:`Cursor`.
    ``start``: with ``after`` None, an async function of the connected client giving
    the offset to start after (default 0: from the oldest retained). ``status``: the
    host's status if just asked (saves the first request). ``keep_trying``: the policy
    after each loss (default :func:`default_policy`: while the host lives, or for a
    remote host while the failure is the link). ``on_attached``: called after
    each attach, before its events. Both hooks may be plain or async functions; what
    they raise ends the iteration. ``backoff``: the pauses between attempts.
    ``snapshot``: for a terminal agent (protocol 1.7), start from its screen rather
    than from the oldest event (the first attach, unless ``after`` or ``start`` says
    where, and a new stream): the attach response's ``screen``, which ``on_attached``
    paints, then the events after it. A reconnection to the same stream resumes by
    offset as always.

    Raise VersionUnsupported (from iteration) for a host of another major protocol.
    Leaving the loop (``break``, :meth:`stop`) leaves the client as it is: close it.
    """

    def __init__(
        self,
        client: FollowClient,
        after: tuple[str, int] | None = None,
        *,
        start: StartOffset | None = None,
        status: StatusResponse | None = None,
        keep_trying: KeepTrying | None = None,
        on_attached: OnAttached | None = None,
        backoff: Backoff | None = None,
        snapshot: bool = False,
    ) -> None:
        self.client = client
        self.cursor = Cursor(after)
        self.snapshot = snapshot
        self.attaches = 0
        """Successful attaches so far."""
        self.frame = b""
        """The wire bytes of the last event yielded, as the host sent them (without
        the newline)."""
        self.last_error: AgentHostError | None = None
        """Why the last connection ended (None before any loss)."""
        self.backoff = backoff or Backoff()
        self._start = start if after is None else None
        self._status = status
        self._keep_trying = keep_trying or default_policy(client)
        self._on_attached = on_attached
        self._stopped = False
        self._items: AsyncGenerator[StreamEvent | Gap, None] | None = None

    @property
    def position(self) -> Position:
        """Where the follow is: the stream's epoch and its last offset yielded."""
        return self.cursor.position

    def stop(self) -> None:
        """End the iteration at its next step (e.g. from a hook)."""
        self._stopped = True

    def __aiter__(self) -> Follow:
        return self

    async def __anext__(self) -> StreamEvent | Gap:
        if self._items is None:
            self._items = self._run()
        if not self._stopped:
            try:
                return await anext(self._items)
            except StopAsyncIteration:
                self._stopped = True
                raise
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """End the iteration now (the client stays as it is)."""
        self._stopped = True
        items, self._items = self._items, None
        if items is not None:
            await items.aclose()

    async def _run(self) -> AsyncGenerator[StreamEvent | Gap, None]:
        failures = 0
        loop = asyncio.get_running_loop()
        while not self._stopped:
            received = 0
            try:
                attached, gap = await self._attach()
            except VersionUnsupported:
                await self.client.close()
                raise
            except AgentHostError as exc:
                error: AgentHostError = exc
            else:
                self.attaches += 1
                if self._on_attached is not None:
                    await _maybe_await(self._on_attached(attached))
                if self._stopped:
                    return
                if gap is not None:
                    yield gap
                while True:
                    try:
                        event, frame = await self.client.recv_frame()
                    except AgentHostError as exc:
                        error = exc
                        break
                    received += 1
                    keep, gap = self.cursor.event(event)
                    if not keep:
                        continue  # had it before the connection was lost
                    if gap is not None:
                        yield gap
                    self.frame = frame
                    yield event
            await self.client.close()
            self.last_error = error
            failures = 0 if received else failures + 1
            lost_at = loop.time()
            if not await _maybe_await(self._keep_trying(Lost(error, failures, self.attaches))):
                return
            # the pause counts from the loss: time the policy took is part of it
            pause = self.backoff.pause(failures) - (loop.time() - lost_at)
            if pause > 0:
                await asyncio.sleep(pause)  # the host is away: a pause, not a synchronisation

    async def _attach(self) -> tuple[Attached, Gap | None]:
        client, cursor = self.client, self.cursor
        await client.connect()
        status, self._status = self._status, None
        if status is None:
            status = await client.status()
        _check_version(status)
        screen = self.snapshot and status.agent.terminal is not None
        if self._start is not None and self.attaches == 0:
            cursor.start_at(await self._start(client))
        elif screen and not cursor.epoch and not cursor.owed:
            return await self._from_screen(status)
        from_offset = cursor.offset
        response = (await client.attach(from_offset)).response
        if cursor.other_stream(response, from_offset):
            # a new stream: attach again from its start on a new connection (events
            # after `from_offset` may be queued already on this one)
            await client.close()
            await client.connect()
            if screen:
                return await self._from_screen(status)
            from_offset = 0
            response = (await client.attach(0)).response
        new_epoch, gap = cursor.attached(response, from_offset)
        return Attached(response, status, from_offset, new_epoch), gap

    async def _from_screen(self, status: StatusResponse) -> tuple[Attached, Gap | None]:
        """Attach from a terminal agent's screen: the events after it follow."""
        response = (await self.client.attach(snapshot=True)).response
        from_offset = response.stream_offset if response.screen is None else response.screen.offset
        new_epoch, gap = self.cursor.attached(response, from_offset)
        if gap is not None and gap.reason == "new_epoch":
            gap = Gap(gap.epoch, 0, from_offset + 1, "new_epoch")  # what the screen painted
        return Attached(response, status, from_offset, new_epoch), gap


class SyncFollow:
    """The blocking twin of :class:`Follow` (what ``Client.follow`` returns): an
    iterator, with the same ``position``, ``frame``, ``attaches`` and :meth:`stop`.
    ``run`` runs a coroutine on the blocking client's event loop."""

    def __init__(
        self,
        follow: Follow,
        run: Callable[[Coroutine[Any, Any, StreamEvent | Gap]], StreamEvent | Gap],
    ) -> None:
        self.follow = follow
        self._run = run

    @property
    def position(self) -> Position:
        """Where the follow is."""
        return self.follow.position

    @property
    def frame(self) -> bytes:
        """The wire bytes of the last event yielded (without the newline)."""
        return self.follow.frame

    @property
    def attaches(self) -> int:
        """Successful attaches so far."""
        return self.follow.attaches

    def stop(self) -> None:
        """End the iteration at its next step."""
        self.follow.stop()

    def __iter__(self) -> Iterator[StreamEvent | Gap]:
        return self

    def __next__(self) -> StreamEvent | Gap:
        try:
            return self._run(self.follow.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None


def _check_version(status: StatusResponse) -> None:
    version = status.host.protocol_version
    try:
        check_peer_version(version)
    except VersionUnsupported:
        raise
    except AgentHostError as exc:  # not even of the form N.N
        raise VersionUnsupported(f"host protocol {version!r} cannot be followed") from exc


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


__all__ = [
    "Attached",
    "Backoff",
    "Cursor",
    "Follow",
    "FollowClient",
    "Gap",
    "GapReason",
    "KeepTrying",
    "Lost",
    "OnAttached",
    "Position",
    "SyncFollow",
    "default_policy",
    "from_tail",
    "retry_for",
    "while_host_lives",
    "while_link_fails",
]
