"""What the gateway holds open, and for how long: the deadlines of a request, the caps
on connections and on event streams sized to the descriptors the process may have, and
the bookkeeping behind them (:class:`Connections`, :class:`StreamSlots`). Sans-IO: the
decisions only; :mod:`agenthost.web.protocol` applies them to uvicorn's connections and
:mod:`agenthost.web.app` to the streams.

Every connection costs a descriptor, and a process that runs out of them cannot accept
one more: the kernel's accept fails, and the event loop then closes what waits, an
authorised request included. So nobody may hold connections without sending a request
(a head within :data:`HEAD_SECONDS`, a body within :data:`BODY_SECONDS`; a trickle of
bytes does not extend either), the connections in all are capped below the descriptor
limit (when full, the one that has waited longest for a request gives its place to the
newcomer), and so are the event streams, which hold a connection for as long as the
browser stays and another descriptor towards the agent's host.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeAlias, TypeVar

HEAD_SECONDS: Final = 5.0
"""A connection must send a whole request head this soon after it opened (or after the
previous answer on it ended), however its bytes trickle in; it is closed otherwise."""
BODY_SECONDS: Final = 10.0
"""Once its head is in, a request's body must be in this soon (the largest accepted,
256 KiB, needs 26 KB/s; a message to an agent is far smaller)."""
WRITE_SECONDS: Final = 30.0
"""An answer that cannot be written because its client reads nothing (the buffer stays
full) for this long ends the connection (a stream's browser then reconnects)."""
RETRY_SECONDS: Final = 5
"""The ``Retry-After`` of a refusal for want of room (a connection, a stream)."""


@dataclass(frozen=True)
class Deadlines:
    """The deadlines of one gateway (``agenthost web --head-timeout``, ``--body-timeout``,
    ``--write-timeout``), in seconds; the defaults are the constants above."""

    head: float = HEAD_SECONDS
    body: float = BODY_SECONDS
    write: float = WRITE_SECONDS


RESERVED_FDS: Final = 128
"""Descriptors kept out of the caps for the gateway's own use: the interpreter, the
event loop, the listening socket, the log, the token store and the links ledger, and
the host sockets of the requests in progress (each asks a host; the list asks each)."""
STREAM_FDS: Final = 4
"""Descriptors an event stream may take besides its connection: the Unix socket to the
agent's host, or for an agent of a remote machine ssh's socket, its stderr pipe and the
process."""
MAX_CONNECTIONS: Final = 4096
"""Connections at most, however many descriptors there are (each is a little memory)."""
MAX_STREAMS: Final = 256
"""Event streams at most, however many descriptors there are: each may queue 1 MiB
while its browser is slower than the agent (see :mod:`agenthost.web.agents`)."""
MAX_STREAMS_PER_TOKEN: Final = 32
"""Event streams one token may have open (its sessions included): a person's tabs and
devices, each with the overview and an agent open, fit many times."""


@dataclass(frozen=True, slots=True)
class Caps:
    """How much the gateway holds open at once."""

    connections: int
    """Client connections, event streams included."""
    streams: int
    """Event streams (``/api/agents/KEY/events`` and ``/api/events``) of all tokens."""
    streams_per_token: int
    """Event streams of one token."""


def caps_for(nofile: int) -> Caps:
    """The caps for a process that may have ``nofile`` descriptors open: whatever the
    streams and the connections take, :data:`RESERVED_FDS` stay free. At systemd's
    soft limit of 1024: 448 connections, 112 streams, 32 per token
    (128 + 448 + 112 * 4 = 1024)."""
    budget = max(nofile - RESERVED_FDS, 16)
    streams = max(1, min(MAX_STREAMS, budget // 8))
    connections = max(streams + 8, min(MAX_CONNECTIONS, budget - streams * STREAM_FDS))
    return Caps(connections, streams, max(1, min(MAX_STREAMS_PER_TOKEN, streams // 2)))


# --- connections -------------------------------------------------------------------------

C = TypeVar("C", bound=Hashable)


class Connections(Generic[C]):
    """The open connections, each either *waiting* (the gateway waits for its request:
    its head or its body) or *busy* (the request is in: it is being answered, or it is
    a stream). At the cap, a new connection takes the place of the one that has waited
    longest (a silent client, or one that trickles); with none waiting it is refused."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.full = False
        """Whether the last connection opened found no room (it took a place, or was
        refused)."""
        self._waiting: dict[C, None] = {}  # insertion order: the longest waiting first
        self._busy: set[C] = set()

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy)

    def open(self, conn: C) -> tuple[bool, C | None]:
        """A new connection (waiting for its request): whether it is admitted, and the
        connection to close for it (None: there was room)."""
        evicted: C | None = None
        self.full = len(self) >= self.cap
        if self.full:
            if not self._waiting:
                return False, None
            evicted = next(iter(self._waiting))
            del self._waiting[evicted]
        self._waiting[conn] = None
        return True, evicted

    def waiting(self, conn: C) -> None:
        """``conn`` now waits for a request (again): it counts as the newest waiting."""
        if self._forget(conn):
            self._waiting[conn] = None

    def busy(self, conn: C) -> None:
        """``conn``'s request is in."""
        if self._forget(conn):
            self._busy.add(conn)

    def closed(self, conn: C) -> None:
        """``conn`` is gone (or is being closed): it no longer counts."""
        self._forget(conn)

    def _forget(self, conn: C) -> bool:
        """Take ``conn`` out of either set; whether it was in one (one evicted, or
        refused, is in neither and stays out)."""
        if conn in self._waiting:
            del self._waiting[conn]
            return True
        if conn in self._busy:
            self._busy.remove(conn)
            return True
        return False


def overloaded_answer() -> bytes:
    """The whole HTTP answer to a connection refused for want of room: a 503 in the
    API's error shape, with Retry-After, that closes the connection (written before
    its request is read, as it may never come)."""
    body = json.dumps(
        {"error": "the gateway has too many connections: try again shortly", "code": "overloaded"},
        separators=(",", ":"),
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {RETRY_SECONDS}\r\n"
        "x-content-type-options: nosniff\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


# --- event streams -----------------------------------------------------------------------

Refusal: TypeAlias = Literal["token", "all"]


class StreamSlots:
    """The event streams open, per token and in all, under ``caps``."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self._per_token: dict[str, int] = {}
        self.open = 0

    def take(self, token_id: str) -> Refusal | None:
        """Take a slot for a stream of ``token_id``; None when taken, else why not
        (``"token"``: that token has its share, ``"all"``: the gateway is full)."""
        mine = self._per_token.get(token_id, 0)
        if mine >= self.caps.streams_per_token:
            return "token"
        if self.open >= self.caps.streams:
            return "all"
        self._per_token[token_id] = mine + 1
        self.open += 1
        return None

    def give_back(self, token_id: str) -> None:
        """A stream of ``token_id`` ended (once per slot taken)."""
        mine = self._per_token.get(token_id, 0)
        if mine <= 0:
            return
        if mine == 1:
            del self._per_token[token_id]
        else:
            self._per_token[token_id] = mine - 1
        self.open -= 1
