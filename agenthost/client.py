"""Talk to hosts from Python: :class:`AsyncClient`, the blocking :class:`Client`, and
host discovery.

::

    from agenthost import Client

    with Client("my-agent") as client:
        print(client.status().agent.state)
        sent = client.send("hello")
        for event in client.attach(sent.offset - 1):
            print(event)                  # e.g. "#12 chat_entry assistant: Hello"
            if event.type == "result":    # the end of the turn
                break

    async with AsyncClient("my-agent") as client:
        async for event in client.attach(0):   # or: sub = await client.attach(0)
            ...

One connection per client. Responses arrive in request order and are matched to their
requests; events of an attached stream are queued separately, so requests may be sent
while attached, and are answered at once even when nobody reads the events (see
:class:`AsyncClient` for what happens to unread events). A stream ends (the iterator
stops) when the host closes the connection; ``last_offset`` then tells where to
reattach.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, ParamSpec, TypeVar

import uvloop
from pydantic import BaseModel

from agenthost.errors import (
    AgentHostError,
    HostNotFound,
    NotConnected,
    RequestTimeout,
    error_from_code,
)
from agenthost.follow import Backoff, Follow, KeepTrying, OnAttached, SyncFollow
from agenthost.lockfile import is_lock_held
from agenthost.paths import (
    agent_id_from_socket,
    hosts_dir,
    lock_path,
    resolve_home,
    validate_agent_id,
)
from agenthost.paths import (
    socket_path as make_socket_path,
)
from agenthost.protocol import (
    HOST_MESSAGES,
    AgentInfo,
    AttachResponse,
    Budget,
    BudgetResponse,
    HistoryResponse,
    InterruptResponse,
    ListResponse,
    MessageType,
    PendingResponse,
    PermissionRequest,
    PingResponse,
    RespondResponse,
    Response,
    ResumeResponse,
    SendResponse,
    StatusResponse,
    StopResponse,
    StreamEvent,
    check_peer_version,
    response_error_code,
)
from agenthost.remote import Remote, as_remote
from agenthost.wire.client import ClientCore, ServiceClient, StreamLimit
from agenthost.wire.ssh import SshLink

if TYPE_CHECKING:
    from agenthost.models import Screen

DEFAULT_CONNECT_TIMEOUT: Final = 2.0
DEFAULT_REQUEST_TIMEOUT: Final = 10.0
DEFAULT_STOP_TIMEOUT: Final = 30.0
STOP_MARGIN: Final = 15.0  # a stop answers after the agent exited: wait past its timeout
EVENT_QUEUE: Final = StreamLimit().items

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
P = ParamSpec("P")
_END: Final = object()


class AsyncClient(ServiceClient[StreamEvent]):
    """An asyncio connection to one host.

    Give an ``agent_id`` (its socket is found under ``home``, default
    ``$AGENTHOST_HOME``) or a ``socket_path``. ``connect_timeout`` and
    ``request_timeout`` are in seconds; ``check_version=False`` skips the protocol check
    of :meth:`connect`; ``stream_limit`` bounds the unread events it queues (below).
    The connection opens on :meth:`connect`, on ``async with``, or on the first
    request. Raise ValueError if neither ``agent_id`` nor ``socket_path``
    is given, InvalidAgentId for an id that is not one.

    ``remote`` (a :class:`~agenthost.remote.Remote` or ``"[USER@]HOST[:PORT]"``): the
    host runs on that machine, reached with ``ssh ... agenthost bridge AGENT_ID`` (give
    an ``agent_id``; ``home``, when given, is the home on that machine; ``socket_path``
    is then only a name for messages). Everything else is the same; a lost SSH link is
    a lost connection (a :meth:`follow` connects again), and connecting raises
    RemoteError when ssh fails or agenthost is not there, HostNotFound when no host
    answers there. See docs/remote.md.

    Every request raises, besides the errors it names: HostNotFound (no host answers),
    Forbidden (the socket belongs to another user), NotConnected (the connection was
    lost), RequestTimeout (no answer within ``request_timeout``), and ProtocolError
    (the host sent something that is not the protocol).

    Events the caller has not read never hold up a response: requests are answered
    while attached however far behind the reader is. Unread events are queued up to
    ``stream_limit`` (default 4096 events or 32 MiB); past it the client discards the
    events that follow and, once the reader has caught up with the queue, re-attaches
    on the same connection after ``last_offset`` (a detach, then an attach), so the
    host replays them from its ring or its journal: iteration simply continues, each
    offset once. Only events the host no longer keeps can be missed, as with any
    attach after them (the first event then has a larger offset).
    """

    def __init__(
        self,
        agent_id: str | None = None,
        *,
        home: str | Path | None = None,
        socket_path: str | Path | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        check_version: bool = True,
        stream_limit: StreamLimit | None = None,
        remote: Remote | str | None = None,
    ) -> None:
        self.remote = as_remote(remote)
        """The machine the host runs on (None: this one)."""
        opener: SshLink | None = None
        if self.remote is not None:
            if agent_id is None or socket_path is not None:
                raise ValueError("give an agent_id (and no socket_path) with a remote")
            validate_agent_id(agent_id)
            args = ["bridge", agent_id, *(["--home", str(home)] if home is not None else [])]
            opener = SshLink(self.remote, args, target=f"agent {agent_id!r}")
            socket_path = f"{self.remote}:{agent_id}"  # a name for messages, not a path
        elif socket_path is None:
            if agent_id is None:
                raise ValueError("give an agent_id or a socket_path")
            socket_path = make_socket_path(resolve_home(home), agent_id)
        self.socket_path = Path(socket_path)
        self.agent_id = agent_id or agent_id_from_socket(self.socket_path) or ""
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.check_version = check_version
        self.host_ping: PingResponse | None = None
        self._core: ClientCore[StreamEvent] = ClientCore(
            self.socket_path,
            service="host",
            peer=f"the host for {self._name()}",
            decode=HOST_MESSAGES.decode_frame,
            connect_error=self._connect_error,
            connect_timeout=connect_timeout,
            id_prefix="c",
            timeout_hint=(
                "it may be stopped (SIGSTOP) or overloaded; `agenthost list` shows it"
                if self.remote is None
                else "it may be stopped or overloaded, or the link slow; "
                f"`agenthost list --remote {self.remote}` shows it"
            ),
            stream_limit=stream_limit,
            opener=opener,
        )
        self._attached_at: int | None = None  # the offset of the last attach, while attached
        self.last_offset = 0
        """The offset of the last event received (where to reattach from)."""

    # --- connection ---------------------------------------------------------------------

    @property
    def events_queued(self) -> int:
        """Events received and not yet read (at most ``stream_limit.items``)."""
        return self._core.queued

    async def connect(self) -> None:
        """Connect, and check the host's protocol version (unless disabled).

        Does nothing when already connected. Raise HostNotFound (no socket, nobody
        listening, or no accept within ``connect_timeout``), Forbidden (no permission
        on the socket, or a host of another user), VersionUnsupported (the host speaks
        another major version).
        """
        await super().connect()

    async def _handshake(self) -> None:
        if self.check_version:
            ping = await self.ping()
            check_peer_version(ping.protocol_version, min_version=ping.min_protocol_version)

    def _connect_error(self, exc: OSError | TimeoutError) -> AgentHostError:
        if isinstance(exc, FileNotFoundError | ConnectionRefusedError):
            return HostNotFound(
                f"no host is running for {self._name()} ({exc.strerror}: {self.socket_path})",
                hint="start one with `agenthost serve --agent-id ID`; `agenthost list` shows "
                "the running ones",
            )
        if isinstance(exc, TimeoutError):
            return HostNotFound(
                f"the host for {self._name()} did not accept a connection within "
                f"{self.connect_timeout:g}s"
            )
        return HostNotFound(f"cannot connect to {self.socket_path}: {exc}")

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with NotConnected, and an
        attached stream ends. Safe to call twice. Raises nothing."""
        await super().close()

    def _closing(self) -> None:
        self._attached_at = None

    def _name(self) -> str:
        if self.remote is not None:
            return f"agent {self.agent_id!r} on {self.remote}"
        return f"agent {self.agent_id!r}" if self.agent_id else str(self.socket_path)

    # --- requests -----------------------------------------------------------------------

    async def request(
        self,
        mtype: MessageType | str,
        payload: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request of any type and wait for its response.

        ``payload`` is the request's payload object; ``timeout`` (seconds) overrides
        ``request_timeout``. Connect first if needed. Return the response's payload (an
        empty dict when it has none). Raise the error class matching the response's
        ``code`` (UnknownType, InvalidPayload, AgentNotRunning, Busy, ...; see
        agenthost.errors), or for an error without a code (a 1.0 host as first
        published) the class its message implies, else InternalError.
        """
        return await self._request(str(mtype), payload, timeout=timeout)

    def _failure(self, response: Response) -> AgentHostError:
        # a 1.0 host as first published sends errors without a code: read it from the
        # message, or from the host's version and the request's
        host_version = self.host_ping.protocol_version if self.host_ping else None
        code = response_error_code(response, host_version)
        return error_from_code(code, response.error or "request failed")

    async def ping(self) -> PingResponse:
        """Check that the host answers.

        Return its PingResponse: ``version``, ``protocol_version``,
        ``min_protocol_version``, ``uptime``, ``started_at`` (also kept in
        ``host_ping``).
        """
        self.host_ping = await self._typed(PingResponse, MessageType.PING)
        return self.host_ping

    async def status(self) -> StatusResponse:
        """The host and its agent.

        Return a StatusResponse: ``host`` (HostInfo: pid, versions, socket) and
        ``agent`` (AgentInfo: state, pid, exit code, cost, ...). Raises only the errors
        every request raises (see the class).
        """
        return await self._typed(StatusResponse, MessageType.STATUS)

    async def list(self) -> list[AgentInfo]:
        """The agents of this host. Return a list of one AgentInfo. Raises only the
        errors every request raises (see the class)."""
        return (await self._typed(ListResponse, MessageType.LIST)).agents

    async def history(self, limit: int = 0) -> HistoryResponse:
        """The chat history: the most recent ``limit`` entries (0 = all kept).

        Return a HistoryResponse: ``entries`` (HistoryEntry, oldest first; ``str()``
        of one reads ``#6 assistant: Hello``), ``offset`` (the stream's head),
        ``total`` (entries kept). Raise InvalidPayload for a negative ``limit``.
        """
        return await self._typed(
            HistoryResponse, MessageType.HISTORY, payload={"limit": limit} if limit else None
        )

    async def send(
        self, text: str, *, key: str | None = None, origin: dict[str, str] | None = None
    ) -> SendResponse:
        """Send ``text`` to the agent; the host records it as a ``user`` chat entry.

        ``key`` makes a retry safe: a second send with the same key is not applied
        again. Return a SendResponse: ``offset`` of the recorded entry (None from a 1.0
        host that does not report it; the text was sent all the same, do not send it
        again) and ``duplicate``. Raise AgentNotRunning (the agent has exited), Busy
        (its input queue is full: retry later).
        """
        payload: dict[str, Any] = {"input": text}
        if key is not None:
            payload["key"] = key
        if origin is not None:  # (1.8) a run of the daemon's automation: recorded first
            payload["origin"] = origin
        return await self._typed(SendResponse, MessageType.SEND, payload=payload)

    async def stop(
        self, force: bool = False, timeout: float | None = None, reason: str = ""
    ) -> StopResponse:
        """Stop the agent: SIGTERM to its process group, SIGKILL after ``timeout``
        seconds (default 30), or at once with ``force``; ``reason`` is logged.

        Answer after the agent has exited (the request waits ``timeout`` plus a
        margin). Return a StopResponse: ``stopped``, ``exit_code``, ``signal``,
        ``graceful``, ``duration``, ``final_state``. Stopping an agent that already
        exited returns its recorded result. Raise InvalidPayload for a timeout out of
        range (0 to 86400).
        """
        payload: dict[str, Any] = {"force": force}
        if timeout:
            payload["timeout"] = timeout
        if reason:
            payload["reason"] = reason
        wait = (timeout or DEFAULT_STOP_TIMEOUT) + STOP_MARGIN
        return await self._typed(StopResponse, MessageType.STOP, payload=payload, timeout=wait)

    async def interrupt(self) -> InterruptResponse:
        """Interrupt the agent's current turn; the agent keeps running (protocol 1.1).

        Return an InterruptResponse: ``sent``, ``method`` (``control`` or ``signal``),
        ``deferred``. Raise AgentNotRunning, or UnknownType from a 1.0 host.
        """
        return await self._typed(InterruptResponse, MessageType.INTERRUPT)

    async def pending(self) -> builtins.list[PermissionRequest]:
        """The permission requests waiting for an answer (protocol 1.1).

        Return a list of PermissionRequest (``request_id``, ``tool_name``,
        ``tool_input``, ...), empty when none waits. Raise UnknownType from a 1.0 host.
        """
        return (await self._typed(PendingResponse, MessageType.PENDING)).requests

    async def respond(
        self,
        request_id: str,
        behavior: Literal["allow", "deny"],
        *,
        message: str | None = None,
        updated_input: dict[str, Any] | None = None,
        option_id: str | None = None,
        actor: str | None = None,
        remember: Literal["session"] | None = None,
    ) -> RespondResponse:
        """Answer a pending permission request (protocol 1.1).

        ``behavior`` is ``"allow"`` or ``"deny"``; ``updated_input`` (allow only)
        replaces the tool's input; ``message`` is the reason the agent is told (deny);
        ``option_id`` (protocol 1.2) picks one of the request's ``options`` (e.g. an ACP
        agent's "allow always"), of a kind that agrees with ``behavior``.
        ``actor`` (1.3) says who answers, for the record (``client`` when absent);
        ``remember="session"`` (1.3, allow only) allows the same tool (and exact
        command) for the rest of the session without asking.
        Return a RespondResponse (``request_id``, ``behavior``). Raise UnknownRequest if
        it is not pending (answered, withdrawn), InvalidPayload for a bad argument,
        UnknownType from a 1.0 host.
        """
        payload: dict[str, Any] = {"request_id": request_id, "behavior": behavior}
        if message is not None:
            payload["message"] = message
        if updated_input is not None:
            payload["updated_input"] = updated_input
        if option_id is not None:
            payload["option_id"] = option_id
        if actor is not None:
            payload["actor"] = actor
        if remember is not None:
            payload["remember"] = remember
        return await self._typed(RespondResponse, MessageType.RESPOND, payload=payload)

    async def resume(self) -> ResumeResponse:
        """Resume an agent paused for a usage limit now, without waiting for the limit's
        reset time (protocol 1.4); it is told what was interrupted. ``resumed`` is False
        when it was not paused. Raise UnknownType from a host older than 1.4."""
        return await self._typed(ResumeResponse, MessageType.RESUME)

    async def budget(
        self,
        *,
        usd: float | None = None,
        tokens: int | None = None,
        clear: builtins.list[Literal["usd", "tokens"]] | None = None,
        actor: str | None = None,
    ) -> Budget:
        """Set, clear or (with no argument) read the agent's budget (protocol 1.4).

        A limit left out is unchanged; ``clear`` removes limits. Once no limit is
        reached, sends go through again. Return the Budget (limits, ``spent_usd``,
        ``spent_tokens``, ``exceeded``). Raise InvalidPayload for a bad value,
        UnknownType from a host older than 1.4.
        """
        payload: dict[str, Any] = {}
        if usd is not None:
            payload["usd"] = usd
        if tokens is not None:
            payload["tokens"] = tokens
        if clear:
            payload["clear"] = clear
        if actor is not None:
            payload["actor"] = actor
        response = await self._typed(BudgetResponse, MessageType.BUDGET, payload=payload)
        return response.budget

    # --- terminal agents (protocol 1.7) ----------------------------------------------------

    async def input(self, data: bytes | str) -> None:
        """Type ``data`` into a terminal agent's terminal (keys, a paste): text is sent
        as UTF-8, other bytes as they are. Typing makes this connection's size the
        terminal's (the "latest" size policy). Raise InvalidPayload for an agent that is
        not a terminal agent, Busy when it has not read earlier input, AgentNotRunning.
        """
        if isinstance(data, bytes):
            try:
                payload = {"data": data.decode()}
            except UnicodeDecodeError:
                payload = {"data_b64": base64.b64encode(data).decode("ascii")}
        else:
            payload = {"data": data}
        await self.request(MessageType.INPUT, payload)

    async def resize(self, cols: int, rows: int) -> tuple[int, int]:
        """Tell a terminal agent's host this client's terminal size; return the size
        the terminal has now (a host started with ``--size`` keeps its own). Raise
        InvalidPayload for a size out of range (2..1000 x 1..1000) or an agent that is
        not a terminal agent."""
        from agenthost.models import ResizeResponse

        response = await self._typed(
            ResizeResponse, MessageType.RESIZE, payload={"cols": cols, "rows": rows}
        )
        return response.cols, response.rows

    async def screen(self, offset: int | None = None) -> Screen:
        """A terminal agent's screen now, or as of ``offset`` while the journal keeps
        the events up to it: a Screen (``offset``, ``cols``, ``rows``, ``cursor``,
        ``lines``, ``dump``...). Raise InvalidPayload for an agent that is not a
        terminal agent, or an offset no longer kept."""
        from agenthost.models import Screen

        payload = {"offset": offset} if offset is not None else None
        return await self._typed(Screen, MessageType.SCREEN, payload=payload)

    def follow(
        self,
        after: tuple[str, int] | None = None,
        *,
        keep_trying: KeepTrying | None = None,
        on_attached: OnAttached | None = None,
        backoff: Backoff | None = None,
    ) -> Follow:
        """Follow the stream across lost connections: an async iterator of StreamEvent
        and :class:`~agenthost.follow.Gap` items.

        ``after`` is where you are, ``(epoch, offset)`` (``position`` of an earlier
        follow, or ``epoch`` and ``last_offset`` of an attach); None starts at the oldest
        retained event. When the connection ends (the host restarted, crashed, or
        dropped this reader), it connects again and resumes after the last offset it
        gave: each offset of a stream at most once, in order. What it cannot give comes
        as a Gap in its place: events evicted before they could be read
        (``reason="evicted"``), or a new stream (``"new_epoch"``, then followed from its
        start)::

            async for item in client.follow(after=("3f2a...", 120)):
                if isinstance(item, Gap):
                    print("missed", item)
                else:
                    print(item)

        ``keep_trying(lost)`` decides after each loss whether to go on (default: while
        the host lives, i.e. its lock is held; :func:`~agenthost.follow.retry_for`
        gives up after a time); ``on_attached(attached)`` is called after each attach;
        ``backoff`` sets the pauses between attempts. This client's connection is the
        one used (closed and opened again). Iteration raises VersionUnsupported for a
        host of another major protocol version, and what ``keep_trying`` raises.
        """
        return Follow(
            self, after, keep_trying=keep_trying, on_attached=on_attached, backoff=backoff
        )

    def attach(self, offset: int = 0, *, snapshot: bool = False) -> Subscription:
        """Attach to the stream after ``offset`` (0 = from the oldest retained event).

        With ``snapshot`` (a terminal agent, protocol 1.7) the stream starts from the
        agent's screen now instead: the response's ``screen``, then the events after
        ``screen.offset`` (``offset`` is not used).

        ``offset`` is the last offset you have: the stream replays every retained
        event after it, then follows live, each offset exactly once. Iterate the result
        directly, which attaches on the first step::

            async for event in client.attach(offset):
                ...

        or await it first to read the attach response (``stream_offset``,
        ``truncated``, ``epoch``) before the events::

            sub = await client.attach(offset)
            print(sub.response.stream_offset)
            async for event in sub:
                ...

        Iteration ends when the connection ends (the host exited, or dropped this slow
        client); ``last_offset`` then tells where to reattach. Leaving the loop early
        (``break``) keeps the connection attached: :meth:`detach` stops the stream.
        The attach request raises InvalidPayload for a negative offset; a frame that
        breaks the protocol ends the iteration with ProtocolError.
        """
        return Subscription(self, offset, snapshot=snapshot)

    async def _attach(
        self, offset: int, *, snapshot: bool = False, resume_stream: bool = False
    ) -> AttachResponse:
        payload: dict[str, Any] | None = {"offset": offset} if offset else None
        if snapshot:
            payload = {"snapshot": True}
        response = await self._typed(
            AttachResponse, MessageType.ATTACH, payload=payload, resume_stream=resume_stream
        )
        if snapshot and response.screen is not None:
            offset = response.screen.offset  # the events that follow come after it
            self.last_offset = offset
        elif offset <= response.stream_offset:
            self.last_offset = max(offset, response.oldest_offset - 1)
        else:
            self.last_offset = response.stream_offset
        self._attached_at = offset
        return response

    async def detach(self) -> None:
        """Stop the attached stream; the connection stays usable (and may attach
        again). Returns nothing."""
        await self.request(MessageType.DETACH)
        self._attached_at = None
        self._core.end_overflow()  # events already queued stay readable

    async def recv_event(self, timeout: float | None = None) -> StreamEvent:
        """The next event of the attached stream (what iterating an attach gives).

        ``timeout`` in seconds (None: wait as long as it takes). Return a StreamEvent
        (``str()`` of one reads ``#13 state idle``) and advance ``last_offset``. Raise
        NotConnected when the stream has ended, RequestTimeout when no event came in
        time, ProtocolError when the host sent a frame that is not the protocol.

        Events not read yet are queued up to ``stream_limit``; past it the client
        re-attaches after ``last_offset`` when they are read (see the class), so a slow
        reader misses nothing the host still keeps.
        """
        event, _ = await self.recv_frame(timeout)
        return event

    async def recv_frame(self, timeout: float | None = None) -> tuple[StreamEvent, bytes]:
        """Like :meth:`recv_event`, with the event's frame as the host sent it.

        Return ``(event, frame)``: ``frame`` is the line's bytes exactly as received,
        WITHOUT the trailing newline (append ``b"\\n"`` to forward it as a line of the
        protocol). Use it to relay events without encoding them again. Advance
        ``last_offset``; raise as :meth:`recv_event` does.
        """
        while True:
            item = await self._core.next_stream(timeout, "event")
            if item is not None:
                event, frame = item
                self.last_offset = event.offset
                return event, frame
            await self._reattach()

    async def _reattach(self) -> None:
        # The queue overflowed and everything before the overflow has been read: ask
        # the host again for what follows the last event delivered. It sends no event
        # after its detach response and replays from the ring or the journal after its
        # attach response, from which the core queues again.
        if self._attached_at is None:  # detached meanwhile: nothing to resume
            return
        await self.request(MessageType.DETACH)
        await self._attach(self.last_offset, resume_stream=True)


class Subscription:
    """An attach of :meth:`AsyncClient.attach`: awaitable, and an async iterator of
    events.

    ``await`` it to send the attach request and get it back with ``response`` set;
    iterating it attaches first if that was not done. Iteration ends when the
    connection ends (the host exited, or dropped this slow client); the client's
    ``last_offset`` tells where to reattach.
    """

    def __init__(self, client: AsyncClient, offset: int = 0, *, snapshot: bool = False) -> None:
        self.client = client
        self.offset = offset
        self.snapshot = snapshot
        self._response: AttachResponse | None = None

    @property
    def response(self) -> AttachResponse:
        """The attach response (``stream_offset``, ``oldest_offset``, ``truncated``,
        ``epoch``, ``pending``). Raise RuntimeError before the attach was sent."""
        if self._response is None:
            raise RuntimeError("not attached yet: await the subscription or iterate it first")
        return self._response

    async def start(self) -> Subscription:
        """Send the attach request unless it was sent; return this subscription."""
        if self._response is None:
            self._response = await self.client._attach(self.offset, snapshot=self.snapshot)
        return self

    def __await__(self) -> Generator[Any, None, Subscription]:
        return self.start().__await__()

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._response is None:
            await self.start()
        try:
            return await self.client.recv_event()
        except NotConnected:
            raise StopAsyncIteration from None


# --- blocking client ---------------------------------------------------------------------


def _blocking_twin(
    twin: Callable[..., Any],
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Give a method of :class:`Client` the docstring of its AsyncClient twin, so the
    two never say different things."""

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        method.__doc__ = f"Blocking :meth:`AsyncClient.{twin.__name__}`.\n\n{twin.__doc__}"
        return method

    return decorate


class Client:
    """The blocking twin of :class:`AsyncClient`, for scripts.

    It runs a private event loop in the calling thread, so it cannot be used from
    inside a running event loop (use AsyncClient there): every method then raises
    RuntimeError. The arguments, results and errors are those of AsyncClient.
    """

    def __init__(
        self,
        agent_id: str | None = None,
        *,
        home: str | Path | None = None,
        socket_path: str | Path | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        check_version: bool = True,
        stream_limit: StreamLimit | None = None,
        remote: Remote | str | None = None,
    ) -> None:
        self._async = AsyncClient(
            agent_id,
            home=home,
            socket_path=socket_path,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            check_version=check_version,
            stream_limit=stream_limit,
            remote=remote,
        )
        self._runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._runner.run(coro)
        coro.close()
        raise RuntimeError(
            "the blocking Client cannot be used inside a running event loop; use AsyncClient there"
        )

    @property
    def aclient(self) -> AsyncClient:
        """The underlying AsyncClient."""
        return self._async

    @property
    def socket_path(self) -> Path:
        """The host's socket."""
        return self._async.socket_path

    @property
    def remote(self) -> Remote | None:
        """The machine the host runs on (None: this one)."""
        return self._async.remote

    @property
    def connected(self) -> bool:
        """True while the connection is open and usable."""
        return self._async.connected

    @property
    def last_offset(self) -> int:
        """The offset of the last event received (where to reattach from)."""
        return self._async.last_offset

    @_blocking_twin(AsyncClient.connect)
    def connect(self) -> None:
        self._run(self._async.connect())

    def close(self) -> None:
        """Close the connection and the private event loop. Raises nothing."""
        try:
            self._run(self._async.close())
        finally:
            self._runner.close()

    def __enter__(self) -> Client:
        """Connect (see :meth:`connect`); the ``with`` block closes."""
        try:
            self.connect()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection and the event loop."""
        self.close()

    @_blocking_twin(AsyncClient.request)
    def request(
        self,
        mtype: MessageType | str,
        payload: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return self._run(self._async.request(mtype, payload, timeout=timeout))

    @_blocking_twin(AsyncClient.ping)
    def ping(self) -> PingResponse:
        return self._run(self._async.ping())

    @_blocking_twin(AsyncClient.status)
    def status(self) -> StatusResponse:
        return self._run(self._async.status())

    @_blocking_twin(AsyncClient.list)
    def list(self) -> list[AgentInfo]:
        return self._run(self._async.list())

    @_blocking_twin(AsyncClient.history)
    def history(self, limit: int = 0) -> HistoryResponse:
        return self._run(self._async.history(limit))

    @_blocking_twin(AsyncClient.send)
    def send(self, text: str, *, key: str | None = None) -> SendResponse:
        return self._run(self._async.send(text, key=key))

    @_blocking_twin(AsyncClient.stop)
    def stop(
        self, force: bool = False, timeout: float | None = None, reason: str = ""
    ) -> StopResponse:
        return self._run(self._async.stop(force, timeout, reason))

    @_blocking_twin(AsyncClient.detach)
    def detach(self) -> None:
        self._run(self._async.detach())

    @_blocking_twin(AsyncClient.interrupt)
    def interrupt(self) -> InterruptResponse:
        return self._run(self._async.interrupt())

    @_blocking_twin(AsyncClient.pending)
    def pending(self) -> builtins.list[PermissionRequest]:
        return self._run(self._async.pending())

    @_blocking_twin(AsyncClient.resume)
    def resume(self) -> ResumeResponse:
        return self._run(self._async.resume())

    @_blocking_twin(AsyncClient.input)
    def input(self, data: bytes | str) -> None:
        self._run(self._async.input(data))

    @_blocking_twin(AsyncClient.resize)
    def resize(self, cols: int, rows: int) -> tuple[int, int]:
        return self._run(self._async.resize(cols, rows))

    @_blocking_twin(AsyncClient.screen)
    def screen(self, offset: int | None = None) -> Screen:
        return self._run(self._async.screen(offset))

    @_blocking_twin(AsyncClient.budget)
    def budget(
        self,
        *,
        usd: float | None = None,
        tokens: int | None = None,
        clear: builtins.list[Literal["usd", "tokens"]] | None = None,
        actor: str | None = None,
    ) -> Budget:
        return self._run(self._async.budget(usd=usd, tokens=tokens, clear=clear, actor=actor))

    @_blocking_twin(AsyncClient.respond)
    def respond(
        self,
        request_id: str,
        behavior: Literal["allow", "deny"],
        *,
        message: str | None = None,
        updated_input: dict[str, Any] | None = None,
        option_id: str | None = None,
        actor: str | None = None,
        remember: Literal["session"] | None = None,
    ) -> RespondResponse:
        return self._run(
            self._async.respond(
                request_id,
                behavior,
                message=message,
                updated_input=updated_input,
                option_id=option_id,
                actor=actor,
                remember=remember,
            )
        )

    def attach(self, offset: int = 0, *, snapshot: bool = False) -> SyncSubscription:
        """Attach to the stream after ``offset`` (0 = from the oldest retained event),
        and return an iterator of its events.

        ``offset`` is the last offset you have: every retained event after it is
        replayed, then live ones follow, each offset exactly once. The attach request
        is sent before this returns, so ``response`` (``stream_offset``,
        ``truncated``, ``epoch``) is there at once. Iteration blocks for each event and
        ends when the connection ends (the host exited, or dropped this slow client);
        stop earlier with ``break``, e.g. on the turn's ``result`` event::

            for event in client.attach(offset):
                print(event)
                if event.type == "result":
                    break

        With ``snapshot`` (a terminal agent) it starts from the agent's screen:
        ``response.screen``, then the events after it.

        Raise InvalidPayload for a negative offset; a frame that breaks the protocol
        ends the iteration with ProtocolError.
        """
        return SyncSubscription(
            self, self._run(self._async.attach(offset, snapshot=snapshot).start())
        )

    @_blocking_twin(AsyncClient.follow)
    def follow(
        self,
        after: tuple[str, int] | None = None,
        *,
        keep_trying: KeepTrying | None = None,
        on_attached: OnAttached | None = None,
        backoff: Backoff | None = None,
    ) -> SyncFollow:
        follow = self._async.follow(
            after, keep_trying=keep_trying, on_attached=on_attached, backoff=backoff
        )
        return SyncFollow(follow, self._run)

    @_blocking_twin(AsyncClient.recv_event)
    def recv_event(self, timeout: float | None = None) -> StreamEvent:
        return self._run(self._async.recv_event(timeout))


class SyncSubscription:
    """An attached stream for the blocking client: ``response`` and an iterator."""

    def __init__(self, client: Client, sub: Subscription) -> None:
        self.client = client
        self.response = sub.response

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        try:
            return self.client.recv_event()
        except NotConnected:
            raise StopIteration from None


# --- discovery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DiscoveredHost:
    """A socket found in the hosts directory and what probing it gave."""

    agent_id: str
    socket_path: Path
    status: StatusResponse | None
    error: str | None = None
    alive: bool = True
    """False when the host's lock is free: the socket is a dead host's leftover."""


async def probe_host_async(
    agent_id: str,
    *,
    home: str | Path | None = None,
    socket_path: str | Path | None = None,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> StatusResponse:
    """The status of one host; raise HostNotFound if it does not answer in time."""
    client, status = await open_probe(agent_id, home=home, socket_path=socket_path, timeout=timeout)
    await client.close()
    return status


async def open_probe(
    agent_id: str,
    *,
    home: str | Path | None = None,
    socket_path: str | Path | None = None,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> tuple[AsyncClient, StatusResponse]:
    """:func:`probe_host_async`, and the connection it asked on, left open for the
    caller to go on with (e.g. to attach) and to close.

    The client has ``timeout`` for its connect and requests and no version check.
    Raise HostNotFound if the host does not answer in time (nothing is left open).
    """
    client = AsyncClient(
        agent_id,
        home=home,
        socket_path=socket_path,
        connect_timeout=timeout,
        request_timeout=timeout,
        check_version=False,
    )
    try:
        await client.connect()
        return client, await client.status()
    except BaseException as exc:
        await client.close()
        if isinstance(exc, RequestTimeout | NotConnected):
            raise HostNotFound(f"the host for agent {agent_id!r} did not answer: {exc}") from exc
        raise


def probe_host(
    agent_id: str, *, home: str | Path | None = None, timeout: float = DEFAULT_CONNECT_TIMEOUT
) -> StatusResponse:
    """Blocking :func:`probe_host_async`."""
    return run_blocking(probe_host_async(agent_id, home=home, timeout=timeout))


async def discover_hosts_async(
    home: str | Path | None = None,
    *,
    project: str | None = None,
    timeout: float = 1.0,
    include_unreachable: bool = False,
) -> list[DiscoveredHost]:
    """Probe every socket of the hosts directory in parallel, sorted by agent id.

    Only hosts that answered are returned, unless ``include_unreachable``; with
    ``project`` only the hosts of that project.
    """
    root = resolve_home(home)
    directory = hosts_dir(root)
    try:
        candidates = sorted(
            (agent_id, path)
            for path in directory.iterdir()
            if (agent_id := agent_id_from_socket(path)) is not None
        )
    except FileNotFoundError:
        return []

    async def probe(agent_id: str, path: Path) -> DiscoveredHost:
        try:
            status = await probe_host_async(agent_id, socket_path=path, timeout=timeout)
        except AgentHostError as exc:
            alive = is_lock_held(lock_path(root, agent_id))
            return DiscoveredHost(agent_id, path, None, str(exc), alive)
        return DiscoveredHost(agent_id, path, status)

    found = await asyncio.gather(*(probe(a, p) for a, p in candidates))
    result = []
    for host in found:
        if host.status is None:
            if include_unreachable and project is None:
                result.append(host)
        elif project is None or host.status.agent.project == project:
            result.append(host)
    return result


def discover_hosts(
    home: str | Path | None = None,
    *,
    project: str | None = None,
    timeout: float = 1.0,
    include_unreachable: bool = False,
) -> list[DiscoveredHost]:
    """Blocking :func:`discover_hosts_async`."""
    return run_blocking(
        discover_hosts_async(
            home, project=project, timeout=timeout, include_unreachable=include_unreachable
        )
    )


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on a new uvloop event loop (for blocking callers)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)
