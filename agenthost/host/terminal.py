"""A terminal agent's side of the host: its bytes, its screen, its size, its quiet.

What the agent paints is cut into ``terminal`` events (never inside a UTF-8 sequence)
and fed to a headless emulator in the same step as it is published, so the screen is
always exactly the events up to the stream's head: a snapshot taken between two
events is "the screen as of offset N", and "snapshot at N, then the events after N"
is exactly once (docs/terminal.md).

A part of the host that does not know the host: it is handed what it uses (publish
events, resize and signal the process, read the journal).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import structlog

from agenthost.agents.base import AdapterEvent, StateChange, TerminalOutput, TerminalResized
from agenthost.errors import InvalidPayload
from agenthost.journal.segments import record_offset
from agenthost.names import AgentState
from agenthost.terminal.chunks import Utf8Chunker
from agenthost.terminal.replay import paint, terminal_event
from agenthost.terminal.screen import Screen
from agenthost.terminal.sizes import SizePolicy

log = structlog.get_logger("agenthost.terminal")

ENTER_DELAY: Final = 0.2
"""Seconds between a sent message's text and its Enter (see :meth:`TerminalSide.enter_soon`)."""

QUIET: Final = 2.0
"""Seconds without output after which a terminal agent without hooks counts as
``idle`` (a heuristic: docs/terminal.md)."""


@dataclass(frozen=True, slots=True)
class TerminalIO:
    """What the terminal side needs of the host."""

    publish: Callable[[list[AdapterEvent]], int]
    """Number and publish events (:meth:`agenthost.host.stream.AgentStream.publish`)."""
    head: Callable[[], int]
    """The stream's newest offset."""
    resize: Callable[[int, int], None]
    """Set the pseudo-terminal's size."""
    records: Callable[[int], Iterable[bytes]]
    """The journal's records from an offset on (empty without a journal)."""
    write: Callable[[bytes], None]
    """Type bytes into the terminal."""


class TerminalSide:
    """The bytes, screen, size and quiet of one terminal agent."""

    def __init__(self, io: TerminalIO, fixed: tuple[int, int] | None, *, heuristic: bool) -> None:
        self.io = io
        self.sizes = SizePolicy(fixed)
        cols, rows = self.sizes.size
        self.screen = Screen(cols, rows)
        self._chunker = Utf8Chunker()
        self.heuristic = heuristic
        """Whether the agent's state comes from its output's quiet (no hooks)."""
        self._last_output = 0.0
        self._idle = False
        self._timer: asyncio.TimerHandle | None = None

    @property
    def size(self) -> tuple[int, int]:
        """``(cols, rows)`` now."""
        return self.sizes.size

    # --- the stream -----------------------------------------------------------------

    def restore(self, records: Iterable[bytes]) -> None:
        """Paint the journal's terminal events (a restarted host's screen)."""
        replay(self.screen, records)
        self.sizes.size = self.screen.size if self.sizes.fixed is None else self.sizes.size

    def started(self) -> None:
        """The agent started: record the terminal's size before any of its bytes."""
        cols, rows = self.sizes.size
        self.screen.resize(cols, rows)
        self.io.publish([TerminalResized(cols, rows)])

    def output(self, data: bytes) -> None:
        """Bytes the agent painted."""
        self._publish(self._chunker.feed(data))

    def ended(self) -> None:
        """The terminal closed: what was held back of a cut sequence goes out."""
        self._publish(self._chunker.flush())
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _publish(self, chunks: list[bytes]) -> None:
        if not chunks:
            return
        for chunk in chunks:  # the screen feeds its emulator in small pieces itself
            self.screen.feed(chunk)
        events: list[AdapterEvent] = [TerminalOutput(chunk) for chunk in chunks]
        if self.heuristic:
            self._last_output = time.monotonic()
            if self._idle:
                self._idle = False
                events.append(StateChange(AgentState.RUNNING))
            if self._timer is None:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_at(loop.time() + QUIET, self._check_quiet)
        self.io.publish(events)

    def _check_quiet(self) -> None:
        self._timer = None
        quiet_for = time.monotonic() - self._last_output
        if quiet_for >= QUIET:
            self._idle = True
            self.io.publish([StateChange(AgentState.IDLE)])
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + QUIET - quiet_for, self._check_quiet)

    # --- clients ------------------------------------------------------------------------

    def enter_soon(self) -> None:
        """Press Enter after :data:`ENTER_DELAY`: a message's text was just typed, and a
        TUI that reads it with its carriage return in one read takes both for a paste
        (Claude Code then inserts a newline instead of submitting)."""
        loop = asyncio.get_running_loop()
        loop.call_later(ENTER_DELAY, self.io.write, b"\r")

    def request_size(self, client: object, cols: int, rows: int) -> tuple[int, int]:
        """A client's size (the policy of :mod:`agenthost.terminal.sizes`): the size now."""
        self._apply(self.sizes.request(client, cols, rows))
        return self.sizes.size

    def typed(self, client: object) -> None:
        """A client typed: under the ``latest`` policy the terminal takes its size."""
        self._apply(self.sizes.touch(client))

    def left(self, client: object) -> None:
        """A client is gone."""
        self.sizes.leave(client)

    def _apply(self, size: tuple[int, int] | None) -> None:
        if size is None:
            return
        cols, rows = size
        self.io.resize(cols, rows)
        self.screen.resize(cols, rows)
        self.io.publish([TerminalResized(cols, rows)])

    def snapshot(self, offset: int | None = None) -> dict[str, Any]:
        """The ``screen`` object as of ``offset`` (the head when None): from the screen
        kept, or for an older offset painted again from the journal."""
        head = self.io.head()
        if offset is None or offset >= head:
            return self.screen.snapshot(head)
        oldest = None
        screen = Screen(*self.screen.size)
        for record in self.io.records(1):
            at = record_offset(record)
            if oldest is None:
                oldest = at
            if at is None or at > offset:
                break
            event = terminal_event(record)
            if event is not None:
                paint(screen, event)
        if oldest is None or oldest > offset:
            raise InvalidPayload(
                f"offset {offset} is no longer kept",
                hint="ask for the screen now (no offset), or an offset the journal keeps",
            )
        return screen.snapshot(offset)


def replay(screen: Screen, records: Iterable[bytes]) -> None:
    """Paint every terminal event of ``records`` (journal records) on ``screen``."""
    for record in records:
        event = terminal_event(record)
        if event is not None and not paint(screen, event):
            log.warning("terminal.bad_record", offset=event.get("offset"))
