"""The daemon's automation: schedules on a clock, and runs (a schedule's or a webhook's).

A run sends its message to an agent, or starts a new agent from a spec and sends the
message to it, then waits for the agent to answer (:class:`agenthost.automation.plan.
Turns`); a new agent is stopped then, its journal kept. Runs are recorded in the
registry (:mod:`agenthost.daemon.runstore`) and, through the message's ``origin``, as
a ``triggered`` governance event in the agent's journal. What the timing of schedules
is lives in :mod:`agenthost.automation.plan`; this module only does what it decides.

It reaches the agents through :class:`Agents`, the narrow interface the daemon hands it
(spawn, stop, send, wait): it never holds the supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final, Protocol

import structlog
from pydantic import BaseModel

from agenthost.automation.cron import next_after
from agenthost.automation.model import (
    RunRecord,
    RunRequest,
    RunResponse,
    RunResult,
    RunSource,
    RunsRequest,
    RunsResponse,
    RunTarget,
    ScheduleInfo,
    ScheduleListResponse,
    ScheduleRequest,
    ScheduleSpec,
)
from agenthost.automation.plan import TurnEnd, Turns, decide
from agenthost.daemon.runstore import RunStore, Schedule
from agenthost.daemon.spec import redacted
from agenthost.errors import (
    AgentHostError,
    AgentNotRunning,
    Busy,
    ConfigError,
    RegistryError,
    UnknownRequest,
)
from agenthost.names import FINAL_STATES, AgentState
from agenthost.protocol import StreamEvent

log = structlog.get_logger("agenthost.daemon.automation")

TICK_MAX: Final = 60.0
"""Longest sleep of the schedule clock (a clock changed under it is seen within it)."""
SERVE_WAIT: Final = 600.0
"""How long a run waits for its new agent's host while it is queued (``--queue``)."""


class Agents(Protocol):
    """What automation needs of the daemon's agents."""

    async def spawn(self, spec_json: str) -> bool:
        """Start an agent from a SpawnSpec (JSON); True when it waits in the queue."""

    async def wait_serving(self, agent_id: str, timeout: float) -> None:
        """Until the agent's host serves (a queued agent's starts)."""

    async def send(self, agent_id: str, text: str, key: str, origin: dict[str, str]) -> int | None:
        """Send to the agent's host; the user entry's offset."""

    async def stop(self, agent_id: str, reason: str) -> None:
        """Stop the agent's host (never restarted)."""

    def known(self, agent_id: str) -> bool:
        """Whether the daemon knows the agent."""

    def state(self, agent_id: str) -> str | None:
        """The agent's state while its host runs; None when it does not."""

    def terminal(self, agent_id: str) -> bool:
        """Whether the agent is a terminal agent (no turns: a send is typed)."""


class Automation:
    """Schedules and runs. Create it once the registry and the agents are there, then
    :meth:`start`; feed it every event (:meth:`on_event`) and every end (:meth:`on_gone`)."""

    def __init__(
        self,
        store: RunStore,
        agents: Agents,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.agents = agents
        self.clock = clock
        self.schedules: dict[str, Schedule] = {}
        self.turns: dict[str, Turns] = {}
        self.runs: dict[int, RunRecord] = {}
        """Runs that have not ended, by id."""
        self.new_agents: dict[int, str] = {}
        """Runs that started their agent: stopped when the run ends."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._clock_task: asyncio.Task[None] | None = None

    # --- life ---------------------------------------------------------------------------

    def start(self) -> None:
        """Load the schedules, take up the runs a previous daemon left going, and start
        the clock (a missed due time is decided on its first tick)."""
        self.schedules = self.store.schedules()
        for run in self.store.running():
            self.runs[run.run_id] = run
            agent_id = run.agent_id
            if agent_id is not None and run.detail.get("new") == "1":
                self.new_agents[run.run_id] = agent_id  # stopped when the run ends
            if agent_id is None or run.offset is None:  # killed before its message went
                # (or before it heard the answer: the journal shows which)
                self._end(run, "failed", "the daemon stopped while the run was starting")
                continue
            state = self.agents.state(agent_id)
            if state is None or state in FINAL_STATES:
                self._end(run, "stopped", "its agent ended while no daemon ran")
            elif state == AgentState.IDLE:
                self._end(run, "done", "answered while no daemon ran")
            else:  # running or waiting: its idle is still to come
                self._turns(agent_id).message(run.offset, run.run_id)
        self._clock_task = asyncio.get_running_loop().create_task(self._clock())

    async def close(self) -> None:
        """Stop the clock and the runs being started (runs going stay recorded as such:
        the next daemon takes them up)."""
        tasks = [t for t in (self._clock_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # --- schedules ----------------------------------------------------------------------

    def add_schedule(self, spec: ScheduleSpec) -> ScheduleInfo:
        """Add (or with ``replace``, replace) a schedule; its first due time is the next
        one after now."""
        old = self.schedules.get(spec.name)
        if old is not None and not spec.replace:
            raise ConfigError(
                f"there is already a schedule {spec.name!r}",
                hint="`agenthost schedule rm NAME` first, or add it with --replace",
            )
        now = self.clock()
        schedule = Schedule(
            spec.model_copy(update={"replace": False}),
            next_after(spec.cron, spec.tz, now),
            old.created_at if old is not None else now,
        )
        self.store.put_schedule(schedule)
        self.schedules[spec.name] = schedule
        self._wake.set()
        log.info("schedule.added", name=spec.name, cron=spec.cron, tz=spec.tz)
        return self.info(spec.name)

    def remove_schedule(self, name: str) -> bool:
        """Remove a schedule (its runs stay in the record; one going goes on)."""
        self._known(name)
        removed = self.store.remove_schedule(name)
        self.schedules.pop(name, None)
        log.info("schedule.removed", name=name)
        return removed

    def info(self, name: str) -> ScheduleInfo:
        """A schedule, its last run and its next due time."""
        schedule = self._known(name)
        last = self.store.runs("schedule", name, limit=1)
        spec = schedule.spec
        if spec.target.new is not None:  # the names of its --env, not their values
            shown = redacted(spec.target.new)
            spec = spec.model_copy(update={"target": RunTarget(new=shown)})
        return ScheduleInfo(
            spec=spec,
            created_at=_dt(schedule.created_at),
            next_at=_dt(schedule.next_at) if schedule.next_at is not None else None,
            last=last[0] if last else None,
            running=self._running("schedule", name),
        )

    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        return [self.info(name) for name in sorted(self.schedules)]

    async def run_now(self, name: str) -> RunRecord:
        """Start a schedule's run now, out of its times (``schedule run-now``); refused
        while its previous run goes."""
        schedule = self._known(name)
        if self._running("schedule", name):
            raise Busy(
                f"schedule {name!r} has a run going",
                hint="a run never overlaps itself: wait for it to end (agenthost schedule list)",
            )
        now = self.clock()
        run, _ = await self._start(
            "schedule",
            name,
            f"now:{now:.6f}",
            schedule.spec.target,
            schedule.spec.message,
            {"trigger": "run-now"},
        )
        return run

    def _known(self, name: str) -> Schedule:
        schedule = self.schedules.get(name)
        if schedule is None:
            raise UnknownRequest(
                f"there is no schedule {name!r}", hint="`agenthost schedule list` lists them"
            )
        return schedule

    async def _clock(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock()
            for name in list(self.schedules):
                try:
                    await self._tick(name, now)
                except RegistryError as exc:  # e.g. disk full: try again on the next tick
                    log.error("schedule.tick_failed", name=name, error=exc.message)
            pending = [s.next_at for s in self.schedules.values() if s.next_at is not None]
            delay = min([TICK_MAX, *(max(0.0, t - self.clock()) for t in pending)])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(delay, 0.05))

    async def _tick(self, name: str, now: float) -> None:
        schedule = self.schedules.get(name)
        if schedule is None:
            return
        spec = schedule.spec
        if schedule.next_at is None:
            schedule.next_at = next_after(spec.cron, spec.tz, now)
            self.store.set_next(name, schedule.next_at)
            return
        decision = decide(
            spec.cron,
            spec.tz,
            spec.missed,
            schedule.next_at,
            now,
            running=self._running("schedule", name),
        )
        if decision.action == "wait":
            return
        key = f"due:{decision.due_at:.0f}"
        detail = {"due_at": _dt(decision.due_at).isoformat()}
        if decision.missed:
            detail["missed"] = str(decision.missed)
        schedule.next_at = decision.next_at
        if decision.action == "skip":
            run = self._record("schedule", name, key, spec.target, "skipped", decision.reason)
            run, _ = self.store.begin_run(
                run.model_copy(update={"ended_at": run.started_at, "detail": detail}),
                next_at=(name, decision.next_at),
            )
            log.info("schedule.skipped", name=name, reason=decision.reason)
            return
        if decision.reason:
            detail["reason"] = decision.reason
        await self._start(
            "schedule",
            name,
            key,
            spec.target,
            spec.message,
            detail,
            next_at=(name, decision.next_at),
        )

    # --- runs ---------------------------------------------------------------------------

    async def run(self, request: RunRequest) -> RunResponse:
        """``daemon.run``: a webhook's delivery, started now (once per key)."""
        run, duplicate = await self._start(
            request.source,
            request.name,
            request.key,
            request.target,
            request.message,
            dict(request.detail),
        )
        return RunResponse(run=run, duplicate=duplicate)

    def recent(self, source: str | None, name: str | None, limit: int) -> list[RunRecord]:
        """The newest runs, newest first."""
        return self.store.runs(source, name, limit)

    def _record(
        self,
        source: RunSource,
        name: str,
        key: str | None,
        target: RunTarget,
        result: RunResult,
        reason: str = "",
    ) -> RunRecord:
        return RunRecord(
            run_id=0,
            source=source,
            name=name,
            key=key,
            agent_id=target.agent_id,
            started_at=_dt(self.clock()),
            result=result,
            reason=reason,
        )

    async def _start(
        self,
        source: RunSource,
        name: str,
        key: str | None,
        target: RunTarget,
        message: str,
        detail: dict[str, str],
        *,
        next_at: tuple[str, float] | None = None,
    ) -> tuple[RunRecord, bool]:
        """Record the run (once per key), then start it in the background."""
        agent_id = target.agent_id or self._new_id(target)
        if target.new is not None:
            detail = {**detail, "new": "1"}
        run = self._record(source, name, key, target, "running")
        run = run.model_copy(update={"agent_id": agent_id, "detail": detail})
        run, duplicate = self.store.begin_run(run, next_at=next_at)
        if duplicate:
            return run, True
        self.runs[run.run_id] = run
        if target.new is not None:
            self.new_agents[run.run_id] = agent_id
        log.info("run.started", source=source, name=name, run_id=run.run_id, agent_id=agent_id)
        task = asyncio.get_running_loop().create_task(self._deliver(run, target, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run, False

    def _new_id(self, target: RunTarget) -> str:
        assert target.new is not None
        stamp = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%d-%H%M%S")
        base = f"{target.new.agent_id}-{stamp}"
        agent_id, n = base, 1
        while self.agents.known(agent_id) or agent_id in self.new_agents.values():
            n += 1
            agent_id = f"{base}-{n}"
        return agent_id

    async def _deliver(self, run: RunRecord, target: RunTarget, message: str) -> None:
        assert run.agent_id is not None
        agent_id = run.agent_id
        try:
            if target.new is not None:
                spec = target.new.model_copy(update={"agent_id": agent_id})
                if await self.agents.spawn(spec.model_dump_json()):
                    await self.agents.wait_serving(agent_id, SERVE_WAIT)
            elif self.agents.state(agent_id) is None:
                raise AgentNotRunning(f"agent {agent_id} is not running")
            self._turns(agent_id)  # from now on its stream is followed for the answer
            origin = {
                "source": run.source,
                "name": run.name,
                "run_id": str(run.run_id),
                "reason": f"run {run.run_id} of the {run.source} {run.name}",
                **{k: v for k, v in run.detail.items() if k in ("due_at", "event", "action")},
            }
            if run.source == "hook" and run.key:
                origin["delivery"] = run.key
            offset = await self.agents.send(agent_id, message, f"run-{run.run_id}", origin)
        except (AgentHostError, OSError, TimeoutError) as exc:
            reason = exc.message if isinstance(exc, AgentHostError) else str(exc) or repr(exc)
            log.warning("run.failed", run_id=run.run_id, agent_id=agent_id, error=reason)
            self._end(run, "failed", reason)
            return
        run = run.model_copy(update={"offset": offset})
        if run.run_id in self.runs:
            self.runs[run.run_id] = run
        self.store.update_run(run)
        if offset is None:  # a host too old to say where: its answer cannot be told
            self._end(run, "done", "sent (the agent's host does not report offsets)")
            return
        if self.agents.terminal(agent_id):
            self._end(run, "done", "typed into its terminal (a terminal agent has no turns)")
            return
        for run_id, how in self._turns(agent_id).message(offset, run.run_id):
            self._ended(run_id, how)

    # --- following the agents -----------------------------------------------------------

    def on_event(self, agent_id: str, event: StreamEvent) -> None:
        """Every event of every agent the daemon follows (cheap when no run waits)."""
        kind = event.type
        turns = self.turns.get(agent_id)
        if turns is None:  # no run was ever sent to it: nothing to follow
            return
        if kind == "chat_entry":
            entry = event.chat_entry
            if entry is not None and entry.role == "user":
                turns.message(event.offset)
            return
        if kind == "result":
            turns.turn(failed=bool(event.result and event.result.get("is_error") is True))
        elif kind == "error" and (event.model_extra or {}).get("turn_failed") is True:
            turns.turn(failed=True)
        elif kind == "state" and event.state == AgentState.IDLE:
            for run_id, how in turns.idle(event.offset):
                self._ended(run_id, how)
        elif kind == "state" and event.state in FINAL_STATES:
            for run_id, how in turns.idle(event.offset, stopped=True):
                self._ended(run_id, how)

    def on_gone(self, agent_id: str) -> None:
        """The agent's host is gone: its runs end (``stopped``)."""
        turns = self.turns.pop(agent_id, None)
        if turns is not None:
            for run_id, how in turns.idle(math.inf, stopped=True):
                self._ended(run_id, how)

    def _turns(self, agent_id: str) -> Turns:
        turns = self.turns.get(agent_id)
        if turns is None:
            turns = self.turns[agent_id] = Turns()
        return turns

    def _ended(self, run_id: int, how: TurnEnd) -> None:
        run = self.runs.get(run_id)
        if run is None:
            return
        reason = {
            "done": "the agent answered",
            "failed": "the agent's turn failed",
            "stopped": "the agent stopped before it answered",
        }[how]
        self._end(run, how, reason)

    def _end(self, run: RunRecord, result: TurnEnd, reason: str) -> None:
        run = run.model_copy(
            update={"result": result, "reason": reason, "ended_at": _dt(self.clock())}
        )
        self.runs.pop(run.run_id, None)
        try:
            self.store.update_run(run)
        except RegistryError as exc:
            log.error("run.record_failed", run_id=run.run_id, error=exc.message)
        log.info("run.ended", run_id=run.run_id, result=result, reason=reason)
        agent_id = self.new_agents.pop(run.run_id, None)
        if agent_id is not None and result != "stopped":
            task = asyncio.get_running_loop().create_task(self._stop(agent_id, run))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._wake.set()  # a schedule that waited for this run may be decided now

    async def _stop(self, agent_id: str, run: RunRecord) -> None:
        with contextlib.suppress(AgentHostError, OSError):
            await self.agents.stop(
                agent_id, f"run {run.run_id} of the {run.source} {run.name} ended"
            )

    def _running(self, source: str, name: str) -> bool:
        return any(r.source == source and r.name == name for r in self.runs.values())


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


async def automation_request(automation: Automation, mtype: str, payload: BaseModel) -> BaseModel:
    """Serve one of the ``daemon.run`` and ``daemon.schedule.*`` requests."""
    from agenthost.daemon.protocol import DaemonMessageType as T
    from agenthost.daemon.protocol import ScheduleRemoved

    if mtype == T.RUN:
        assert isinstance(payload, RunRequest)
        return await automation.run(payload)
    if mtype == T.RUNS:
        assert isinstance(payload, RunsRequest)
        return RunsResponse(runs=automation.recent(payload.source, payload.name, payload.limit))
    if mtype == T.SCHEDULE_ADD:
        assert isinstance(payload, ScheduleSpec)
        return automation.add_schedule(payload)
    if mtype == T.SCHEDULE_LIST:
        return ScheduleListResponse(schedules=automation.list_schedules())
    assert isinstance(payload, ScheduleRequest)
    if mtype == T.SCHEDULE_RM:
        return ScheduleRemoved(name=payload.name, removed=automation.remove_schedule(payload.name))
    assert mtype == T.SCHEDULE_RUN
    return RunResponse(run=await automation.run_now(payload.name))
