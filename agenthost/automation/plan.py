"""When a schedule runs, and when a run's turn has ended. Sans-IO: the clock is given.

:func:`decide` is the whole of a schedule's timing: given its next due time, the time
now and whether its previous run still goes, it says whether to start a run, record a
skip, or wait. A due time passed by at most :data:`GRACE` seconds is on time (a busy or
briefly stopped daemon); one passed by more was *missed* (no daemon ran then), and the
schedule's ``missed`` policy says whether to run once for all the misses or skip them.

:class:`Turns` follows one agent's stream for the runs sent to it: each run's message is
answered by a turn, turns end in the order their messages were sent, and an agent that
goes idle has answered everything sent before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from agenthost.automation.cron import next_after

GRACE: Final = 60.0
"""Seconds after its due time a run still counts as on time."""
MISSES_COUNTED: Final = 1000
"""Missed due times counted for the record (``every minute`` over a month is more)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do about a schedule now.

    ``action``: ``run`` (start a run for ``due_at``), ``skip`` (record a run that was
    not started, with ``reason``), ``wait`` (nothing is due). ``next_at`` is the due
    time to keep after this decision (the next one after now once one was handled)."""

    action: Literal["run", "skip", "wait"]
    next_at: float
    due_at: float = 0.0
    missed: int = 0
    reason: str = ""


def decide(
    cron: str,
    tz: str | None,
    missed_policy: Literal["run", "skip"],
    next_at: float,
    now: float,
    *,
    running: bool,
) -> Decision:
    """The decision for a schedule whose next due time is ``next_at``."""
    if now < next_at:
        return Decision("wait", next_at)
    following = next_after(cron, tz, now)
    missed = _count(cron, tz, next_at, now) if now - next_at > GRACE else 0
    if missed:
        times = "once" if missed == 1 else f"{missed} times" if missed < MISSES_COUNTED else "often"
        what = f"due {times} while no daemon ran"
        if missed_policy == "skip":
            return Decision("skip", following, next_at, missed, f"{what} (--missed skip)")
        if running:
            return Decision("skip", following, next_at, missed, f"{what}; its last run still goes")
        return Decision("run", following, next_at, missed, f"{what}; run once (--missed run)")
    if running:
        return Decision("skip", following, next_at, 0, "its previous run still goes")
    return Decision("run", following, next_at)


def _count(cron: str, tz: str | None, first: float, now: float) -> int:
    """Due times from ``first`` (one) up to ``now``, at most MISSES_COUNTED."""
    count, due = 0, first
    while due <= now and count < MISSES_COUNTED:
        count += 1
        due = next_after(cron, tz, due)
    return count


TurnEnd = Literal["done", "failed", "stopped"]


class Turns:
    """The runs waiting for one agent to answer them.

    The adapters already account for every message sent (Claude Code folds some into a
    running turn, Codex holds them until the thread is free): an agent's ``idle`` state
    means every message sent before it was answered. So a run ends when its agent goes
    idle after the run's message (``done``, or ``failed`` when the last turn failed), or
    stops (``stopped``). Feed it the agent's events in order (:meth:`message` for each
    user message, :meth:`turn` for each turn's outcome, :meth:`idle`) and the runs' own
    messages as their sends are answered (:meth:`message` with the ``run_id``). The
    stream and the send's answer come on two connections, in either order: a message
    the stream has already seen answered ends its run as soon as the run claims it."""

    ANSWERED_KEPT: Final = 256
    OPEN_KEPT: Final = 1024
    """Messages of others kept open at most: they only matter to runs sent after them."""

    def __init__(self) -> None:
        self._open: dict[int, int | None] = {}  # offset -> run_id, oldest first
        self._answered: dict[int, TurnEnd] = {}
        self._last_failed = False

    @property
    def waiting(self) -> list[int]:
        """The runs not yet answered."""
        return [run for run in self._open.values() if run is not None]

    def message(self, offset: int, run_id: int | None = None) -> list[tuple[int, TurnEnd]]:
        """A user message at ``offset`` (a run's when ``run_id`` is given)."""
        if offset in self._answered:
            return [(run_id, self._answered[offset])] if run_id is not None else []
        if run_id is not None or offset not in self._open:
            self._open[offset] = run_id
        if len(self._open) > self.OPEN_KEPT:  # an agent that never goes idle (lines)
            for old in [o for o, r in self._open.items() if r is None][: self.OPEN_KEPT // 2]:
                del self._open[old]
        return []

    def turn(self, *, failed: bool) -> None:
        """A turn ended, well or not (its ``result``, or a failed turn's ``error``)."""
        self._last_failed = failed

    def idle(self, at: float, *, stopped: bool = False) -> list[tuple[int, TurnEnd]]:
        """The agent has nothing left to do as of offset ``at`` (``stopped``: it is
        gone; ``at`` is then infinite): every message before it was answered. A message
        after it (the run's send answered before the stream caught up) stays open."""
        how: TurnEnd = "stopped" if stopped else "failed" if self._last_failed else "done"
        answered = [offset for offset in self._open if offset < at]
        ended = []
        for offset in answered:
            self._answered[offset] = how
            run = self._open.pop(offset)
            if run is not None:
                ended.append((run, how))
        while len(self._answered) > self.ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]
        return ended
