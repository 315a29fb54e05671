"""uvicorn's HTTP/1.1 connection (h11), with the deadlines and the cap of
:mod:`agenthost.web.limits`: what uvicorn does not do by itself.

uvicorn closes an idle connection only between two requests (its keep-alive timer is
armed when an answer ends), and any byte that arrives cancels that timer: a connection
that sends nothing at all, or a request one byte at a time, is kept forever. Here every
connection is *waiting* (for a request head, or a body) or *busy* (its request is in),
as h11 tells; a wait has a deadline from its start that bytes do not move (when it
passes, an answer still going out finishes first, while its client reads); the waiting
ones give their place to newcomers when the gateway is full
(:class:`~agenthost.web.limits.Connections`); and an answer the client does not read
for the write deadline (:class:`~agenthost.web.limits.Deadlines`) ends the connection
(else a client that never reads would keep it busy for good).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Literal

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

from agenthost.web.limits import Connections, Deadlines, overloaded_answer

log = structlog.get_logger("agenthost.web")

Phase = Literal["head", "body"]


class GuardedH11Protocol(H11Protocol):
    """One client connection: uvicorn's, under the gateway's deadlines and cap. Make
    the class for a server with :func:`protocol_class` (it needs the shared
    :attr:`table`)."""

    table: ClassVar[Connections[GuardedH11Protocol]]
    deadlines: ClassVar[Deadlines] = Deadlines()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: Phase | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None
        self._refused = False

    # --- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        was_full = self.table.full
        admitted, evicted = self.table.open(self)
        if self.table.full and not was_full:
            log.warning("web.connections_full", cap=self.table.cap)
        if evicted is not None:
            evicted.drop("evicted")
        if not admitted:
            # every connection is busy answering: none to give its place
            self._refused = True
            transport.write(overloaded_answer())
            transport.close()
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_timer(None)
        self._cancel_stall()
        self.table.closed(self)
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.deadlines.write, self.drop, "unread")

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_stall()

    # --- the deadlines ------------------------------------------------------------------

    def drop(self, why: str) -> None:
        """Close the connection now, whatever it was sending (``why`` for the log)."""
        self.table.closed(self)
        self._set_timer(None)
        self._cancel_stall()
        log.debug("web.connection_dropped", why=why, client=_peer(self.client))
        self.transport.abort()

    def _expired(self, why: str) -> None:
        """A wait's deadline passed: close. An answer still going out (a large one, a
        slow link) goes on first for as long as its client reads; the connection
        counts, and may be evicted, until it is gone."""
        pending = self.transport.get_write_buffer_size()
        if not pending:
            self.drop(why)
            return
        log.debug("web.connection_closing", why=why, client=_peer(self.client))
        self.transport.close()
        self._set_timer(self.loop.call_later(self.deadlines.write, self._flushing, pending))

    def _flushing(self, before: int) -> None:
        pending = self.transport.get_write_buffer_size()
        if pending >= before:
            self.drop("unread")  # nothing read for the write deadline
        elif pending:
            self._set_timer(self.loop.call_later(self.deadlines.write, self._flushing, pending))

    def _watch(self) -> None:
        """Follow what the connection is waiting for, after each step of h11."""
        if self._refused or self.transport.is_closing():
            return
        state = self.conn.their_state
        phase: Phase | None = (
            "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        )
        if phase == self._phase:
            return  # still the same wait: its deadline stands, however many bytes came
        self._phase = phase
        if phase is None:
            self._set_timer(None)
            self.table.busy(self)
            return
        self.table.waiting(self)
        seconds = self.deadlines.head if phase == "head" else self.deadlines.body
        self._set_timer(self.loop.call_later(seconds, self._expired, f"no whole {phase} in time"))

    def _set_timer(self, timer: asyncio.TimerHandle | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = timer

    def _cancel_stall(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None


def protocol_class(
    table: Connections[GuardedH11Protocol], deadlines: Deadlines | None = None
) -> type[GuardedH11Protocol]:
    """The connection class of one server (uvicorn's ``http=``), sharing ``table``,
    under ``deadlines`` (the defaults when None)."""

    class ServerProtocol(GuardedH11Protocol):
        pass

    ServerProtocol.table = table
    ServerProtocol.deadlines = deadlines or Deadlines()
    return ServerProtocol


def _peer(client: tuple[str, int] | None) -> str | None:
    return f"{client[0]}:{client[1]}" if client else None
