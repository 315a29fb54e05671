"""Pausing an agent that hit a usage limit, and resuming it (the host's side of
:mod:`agenthost.governance.usagelimits`, which decides).

The adapter flags a turn that failed on a usage limit (``UsageLimited``, with the reset
time when the agent gave one). In that batch, :meth:`Pauses.on_limited` decides: a
known reset within reach pauses the agent (state ``paused``, a ``governance`` record
``paused`` with the time, a timer); anything else leaves the failure as it is. At the
time, or on ``host.resume``, :meth:`Pauses.resume` records ``resumed`` and sends the
agent a message built from the history: the request that was cut off, its partial
answer and its unfinished tool calls, so that the work goes on without a person. A
person who sends a message while the agent is paused resumes it with that message.

The clock is injected (``clock``, ``now``), and the timer is the event loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from agenthost.agents.base import AdapterEvent, Governed, StateChange, UsageLimited
from agenthost.errors import AgentHostError
from agenthost.governance.usagelimits import pause_for, reset_from_text, resume_message
from agenthost.names import AgentState
from agenthost.timefmt import rfc3339

if TYPE_CHECKING:
    from agenthost.host.stream import AgentStream

log = structlog.get_logger("agenthost.host.pauses")


class Pauses:
    """One host's usage-limit pause: when it ends, and what it was for."""

    def __init__(
        self,
        stream: AgentStream,
        running: Callable[[], bool],
        send: Callable[[str], object],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stream = stream
        self._running = running
        self._send = send
        self.clock = clock
        self.until: float | None = None
        self.reason = ""
        self._timer: asyncio.TimerHandle | None = None
        stream.on_limited = self.on_limited

    def on_limited(self, limited: UsageLimited) -> list[AdapterEvent]:
        """Decide about a usage limit; the ``paused`` record and state, or nothing."""
        now = self.clock()
        reset = limited.reset_at
        if reset is None:  # read from the text, in the agent's local time
            reset = reset_from_text(limited.text, datetime.fromtimestamp(now).astimezone())
        pause = pause_for(reset, limited.text, now)
        if pause is None:
            log.info("usage_limit.no_reset", text=limited.text)
            return []
        self.until, self.reason = pause.until, pause.reason
        self.stream.hold = AgentState.PAUSED
        self._arm(pause.until - now)
        until = rfc3339(pause.until)
        log.info("usage_limit.paused", until=until)
        return [
            Governed(
                "paused",
                "host",
                f"{pause.reason}; the host resumes the agent at {until[:19]}Z",
                {"until": until},
            ),
            StateChange(AgentState.PAUSED),
        ]

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, delay), self._due)

    def _due(self) -> None:
        self._timer = None
        with contextlib.suppress(AgentHostError):  # it ended meanwhile: nothing to do
            self.resume("host", "the usage limit has reset")

    @property
    def paused(self) -> bool:
        """Whether the agent is paused for a usage limit."""
        return self.until is not None

    def resume(self, actor: str, why: str, *, tell: bool = True) -> bool:
        """End the pause: record ``resumed`` and (``tell``) send the agent what was
        interrupted. False when it was not paused."""
        if self.until is None:
            return False
        reason = self.reason
        self.clear()
        stream = self.stream
        stream.publish([Governed("resumed", actor, why), StateChange(AgentState.IDLE)])
        if tell and self._running():
            message = resume_message(stream.history.slice(0), reason)
            self._send(message)
        log.info("usage_limit.resumed", actor=actor)
        return True

    def clear(self) -> None:
        """Forget the pause (the agent ended, or it was resumed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.until = None
        self.stream.hold = None
