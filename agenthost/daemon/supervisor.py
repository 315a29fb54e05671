"""The supervisor: every agent's life as the daemon sees it.

Each agent the daemon follows has one *lifecycle* task: follow its host's stream
(:mod:`agenthost.daemon.follower`) until the host is gone, record how the run ended,
apply the restart policy (:mod:`agenthost.daemon.policy`), and, if it says so, wait
for the backoff and spawn a new host (:mod:`agenthost.daemon.spawner`). Cancelling a
lifecycle (the daemon shutting down) stops following and leaves the host alone.

Every event a follower receives goes to the fan-out hub (``daemon.watch``) and moves
the agent's recorded position; positions reach the registry in batches
(:meth:`Supervisor.flush`), status changes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import structlog

from agenthost.aio import cancel_all
from agenthost.client import AsyncClient, probe_host_async
from agenthost.daemon.discovery import check_versions, end_from_log
from agenthost.daemon.fanout import Hub
from agenthost.daemon.follower import Attached, Follower
from agenthost.daemon.journalnote import governance_record, write_note
from agenthost.daemon.limits import (
    LIVE_STATUSES,
    Limits,
    idle_reason,
    idle_stop_delay,
    to_start,
)
from agenthost.daemon.policy import Outcome, RestartDecision, decide, is_failure
from agenthost.daemon.protocol import AgentStatus, DaemonAgent, NoticeType, RestartPolicy
from agenthost.daemon.registry import AgentRecord, ExitRecord, Registry
from agenthost.daemon.spawner import Spawner
from agenthost.daemon.tuispec import to_structured
from agenthost.errors import (
    AgentCannotStart,
    AgentHostError,
    HostAlreadyRunning,
    RegistryError,
    VersionUnsupported,
)
from agenthost.paths import log_path
from agenthost.protocol import FINAL_STATES, StatusResponse, StopResponse, StreamEvent

if TYPE_CHECKING:
    from agenthost.attention.notifier import Notifier

log = structlog.get_logger("agenthost.daemon.supervisor")

Mode = Literal["follow", "restart"]


class Observer(Protocol):
    """What the supervisor tells of its agents' streams (the daemon's automation)."""

    def on_event(self, agent_id: str, event: StreamEvent) -> None:
        """One event of an agent, in stream order."""

    def on_gone(self, agent_id: str) -> None:
        """An agent's host run ended."""


class Agent:
    """The daemon's runtime state for one agent (its record is the persistent part)."""

    def __init__(self, record: AgentRecord) -> None:
        self.record = record
        self.task: asyncio.Task[None] | None = None
        self.exit_task: asyncio.Task[None] | None = None
        self.follower: Follower | None = None
        self.attached = asyncio.Event()
        self.wakeup = asyncio.Event()  # ends a restart's backoff early (a stop)
        self.stop_requested = False
        self.exit_seen = False  # the agent's end was seen during this host run
        self.host_stopped = False
        """The host says a stop was asked of it directly (``agenthost stop``), so this
        run's end is no failure, even when that stop had to SIGKILL the agent."""
        self.older = False
        self.reattached_from: int | None = None
        self.socketless_seen = 0
        self.stop_text = ""
        """Why the daemon itself stopped the agent (``--idle-stop``), for its end."""
        self.idle_timer: asyncio.TimerHandle | None = None
        self.note: dict[str, Any] | None = None
        """A governance record to journal before the next host starts (a switch back
        from the TUI, :mod:`agenthost.daemon.journalnote`)."""

    @property
    def running(self) -> bool:
        """Whether a lifecycle task runs (following, or waiting to restart)."""
        return self.task is not None and not self.task.done()


class Supervisor:
    """All agents: spawn, follow, stop, restart; the follower sink of every host."""

    def __init__(
        self,
        home: Path,
        registry: Registry,
        spawner: Spawner,
        hub: Hub,
        *,
        probe_timeout: float = 1.0,
    ) -> None:
        self.home = home
        self.registry = registry
        self.spawner = spawner
        self.hub = hub
        self.probe_timeout = probe_timeout
        self.agents: dict[str, Agent] = {}
        self._dirty: set[str] = set()
        self._unsaved: set[str] = set()  # rows a failed write could not record (yet)
        self._unsaved_ends: list[tuple[str, ExitRecord]] = []
        self._held: dict[str, AgentRecord] | None = None  # rows saves_held() keeps back
        self._tasks: set[asyncio.Task[None]] = set()
        self.spawning: set[str] = set()
        """Agent ids a ``daemon.spawn`` is under way for."""
        self.notifier: Notifier | None = None
        """Told of every event, exit and end of a host (the daemon's notices)."""
        self.limits = Limits()
        self.start_queued: Callable[[Agent], None] | None = None
        """Starts the host of a queued agent whose turn came (set by the daemon:
        :func:`agenthost.daemon.commands.launch_queued`)."""
        self._dequeue_pending = False
        self.observer: Observer | None = None
        """Told of every event and every end of a host run (the daemon's automation)."""

    # --- requests -----------------------------------------------------------------------

    def list(self) -> list[DaemonAgent]:
        """Every agent the daemon knows, by id."""
        return [a.record.to_wire(older_version=a.older) for _, a in sorted(self.agents.items())]

    async def stop_host(
        self, agent_id: str, force: bool, timeout: float, reason: str
    ) -> StopResponse:
        """``host.stop`` the agent's host; answers after its agent exited."""
        client = AsyncClient(
            agent_id, home=self.home, connect_timeout=self.probe_timeout, check_version=False
        )
        async with client:
            return await client.stop(force=force, timeout=timeout or None, reason=reason)

    # --- lifecycles ---------------------------------------------------------------------

    def start(
        self,
        agent: Agent,
        mode: Mode,
        status: StatusResponse | None = None,
        client: AsyncClient | None = None,
    ) -> bool:
        """Run the agent's lifecycle task (follow its host, or restart it first).

        ``status`` and ``client``: what a probe of the host to follow just asked, and
        the connection it asked on, which the lifecycle then owns (it attaches on it).

        One lifecycle, so one follower, per agent, always: if the agent already has a
        running one, nothing is started and False is returned. (A second follower of
        the same host published every event twice, and the merged stream said ``gap``
        with ``after == before``; the running lifecycle follows whatever host holds the
        agent's name, so it is never wrong to keep it.)
        """
        if agent.running:
            log.warning("lifecycle.already_running", agent_id=agent.record.agent_id, mode=mode)
            if client is not None:
                self._spawn_task(client.close())
            return False
        agent.task = self._spawn_task(self._lifecycle(agent, mode, status, client))
        return True

    def background(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as a task of the supervisor (cancelled when it closes)."""
        return self._spawn_task(coro)

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _lifecycle(
        self,
        agent: Agent,
        mode: Mode,
        status: StatusResponse | None,
        client: AsyncClient | None,
    ) -> None:
        agent_id = agent.record.agent_id
        try:
            while True:
                if mode == "restart":
                    if client is not None:  # a probe's, of the host that is gone
                        await client.close()
                    status = client = None
                    if not await self._restart(agent):
                        return
                try:
                    await self._follow(agent, status, client)
                except VersionUnsupported as exc:
                    agent.record.status = AgentStatus.INCOMPATIBLE
                    agent.record.last_error = exc.message
                    self.save(agent.record)
                    return
                decision = self.end_run(agent, self._outcome(agent), agent.stop_text)
                if not decision.restart:
                    return
                mode = "restart"
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not end the daemon; the agent shows it
            log.exception("lifecycle.failed", agent_id=agent_id)
            agent.record.last_error = "internal error in the daemon (see its log)"

    def _outcome(self, agent: Agent) -> Outcome:
        if agent.stop_requested:
            return Outcome.STOPPED
        if agent.exit_seen:
            return Outcome.EXITED
        return self.vanished_outcome(agent)

    def vanished_outcome(self, agent: Agent) -> Outcome:
        """How the run of a host that is gone ended, when the daemon did not see it end:
        EXITED if the host's log recorded its agent's end (a host with no linger time
        ends right after its agent, possibly before the daemon followed it, or while no
        daemon ran; the record then has the logged exit code and signal), else LOST."""
        seen = end_from_log(log_path(self.home, agent.record.agent_id))
        if seen is None:
            return Outcome.LOST
        record = agent.record
        code, sig = seen.get("exit_code"), seen.get("signal")
        record.exit_code = code if isinstance(code, int) else record.exit_code
        record.signal = sig if isinstance(sig, str) else None
        record.ended_at = record.ended_at or time.time()
        agent.host_stopped = agent.host_stopped or seen.get("stop_requested") is True
        return Outcome.EXITED

    async def _follow(
        self, agent: Agent, status: StatusResponse | None, client: AsyncClient | None
    ) -> None:
        record = agent.record
        follower = Follower(
            self.home,
            record.agent_id,
            self,
            epoch=record.epoch,
            offset=record.last_offset,
            timeout=max(2.0, self.probe_timeout * 2),
            status=status,
            client=client,
        )
        agent.follower = follower
        agent.exit_seen = record.status == AgentStatus.EXITED  # seen by an earlier daemon
        try:
            await follower.run()
        finally:
            agent.follower = None
            agent.attached.set()  # nobody waits for an attach that will not come
        if agent.exit_task is not None:
            await asyncio.shield(agent.exit_task)

    async def _restart(self, agent: Agent) -> bool:
        """Wait for the backoff, then spawn a new host. False if stopped or given up."""
        record = agent.record
        while True:
            delay = max(0.0, (record.next_restart_at or 0.0) - time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(agent.wakeup.wait(), delay)
            if agent.stop_requested or record.spec is None:
                return False
            resume = record.session_id if resumable(record.spec.agent) else None
            try:
                await self._write_note(agent)
                host = await self.spawner.spawn(record.spec, resume=resume)
            except HostAlreadyRunning:
                log.info("restart.host_exists", agent_id=record.agent_id)
                record.status = AgentStatus.RUNNING
                self.save(record)
                return True  # somebody started it meanwhile: follow that one
            except AgentCannotStart as exc:  # no program: every attempt would fail alike
                log.warning("restart.cannot_start", agent_id=record.agent_id, error=exc.message)
                self._give_up(record, exc.message)
                self.save(record)
                return False
            except AgentHostError as exc:
                log.warning("restart.failed", agent_id=record.agent_id, error=exc.message)
                record.last_error = exc.message
                decision = self._decide(record, failure=True, ran_for=0.0)
                if not self._apply(record, decision):
                    self.save(record)
                    return False
                self.save(record)
                continue
            record.status = AgentStatus.RUNNING
            record.host_pid = host.pid
            record.host_started_at = time.time()
            record.next_restart_at = None
            record.state = ""
            record.exit_code = record.signal = record.ended_at = None
            agent.host_stopped = False
            self.save(record)
            self.hub.notice(
                NoticeType.AGENT_SPAWNED,
                record.agent_id,
                host_pid=host.pid,
                restarts=record.restarts,
                resume=resume,
            )
            log.info("agent.restarted", agent_id=record.agent_id, restarts=record.restarts)
            return True

    async def _write_note(self, agent: Agent) -> None:
        """Journal the agent's pending governance record (before its next host starts).
        A journal that cannot be written loses the record, not the agent's start."""
        note, agent.note = agent.note, None
        if note is None:
            return
        try:
            await asyncio.to_thread(write_note, self.home, agent.record.agent_id, note)
        except HostAlreadyRunning:
            raise
        except AgentHostError as exc:
            log.warning("journal.note_failed", agent_id=agent.record.agent_id, error=exc.message)

    def returns_from_tui(self, agent: Agent) -> bool:
        """Whether the end of this run is a TUI's (``daemon.switch``) after which the
        structured agent starts again: unless it was stopped (through the daemon, or
        ``agenthost stop`` to its host), which stops the agent, not the TUI alone."""
        return agent.record.structured_spec is not None and not (
            agent.stop_requested or agent.host_stopped
        )

    def _leave_tui(self, agent: Agent) -> RestartDecision | None:
        """The end of a TUI's run: the structured spec is the agent's again (resuming
        the newest session the TUI reported); the structured agent starts at once,
        unless the TUI was stopped. None for a run that was no TUI's."""
        record = agent.record
        original = record.structured_spec
        if original is None:
            return None
        back = self.returns_from_tui(agent)
        record.spec = to_structured(original, record.session_id)
        record.structured_spec = None
        if not back:
            return None
        reason = "its TUI ended: back to the structured agent" + (
            f", resuming session {record.session_id}" if record.session_id else ""
        )
        agent.note = governance_record(
            "switched", "daemon", reason, to="structured", session_id=record.session_id
        )
        record.status = AgentStatus.RESTARTING
        record.next_restart_at = time.time()
        log.info("agent.tui_ended", agent_id=record.agent_id, session_id=record.session_id)
        return RestartDecision(True, reason=reason)

    def _decide(self, record: AgentRecord, *, failure: bool, ran_for: float) -> RestartDecision:
        policy = record.spec.restart if record.spec is not None and record.managed else None
        return decide(
            policy or RestartPolicy(), failure=failure, restarts=record.restarts, ran_for=ran_for
        )

    def _apply(self, record: AgentRecord, decision: RestartDecision) -> bool:
        """Set the status a decision leads to; True if a restart is scheduled."""
        if decision.restart:
            record.status = AgentStatus.RESTARTING
            record.restarts = decision.attempt
            record.next_restart_at = time.time() + decision.delay
            self.hub.notice(
                NoticeType.AGENT_RESTARTING,
                record.agent_id,
                attempt=decision.attempt,
                delay=decision.delay,
            )
            return True
        if decision.gave_up and record.status != AgentStatus.FAILED:
            self._give_up(record, decision.reason)
        return False

    def _give_up(self, record: AgentRecord, reason: str) -> None:
        """No more restarts: the agent is ``failed``, for ``reason`` (not saved yet)."""
        record.status = AgentStatus.FAILED
        record.last_error = reason
        record.next_restart_at = None
        self.hub.notice(NoticeType.AGENT_FAILED, record.agent_id, reason=reason)

    def end_run(self, agent: Agent, outcome: Outcome, reason: str) -> RestartDecision:
        """Record how a host run ended and decide about a restart (status set, saved)."""
        record = agent.record
        if self.observer is not None:
            self.observer.on_gone(record.agent_id)
        if agent.idle_timer is not None:
            agent.idle_timer.cancel()
            agent.idle_timer = None
        if outcome is Outcome.LOST:  # (nothing in its log either: vanished_outcome)
            record.ended_at = time.time()  # when the daemon noticed: the best it knows
            reason = reason or "the host died without the daemon seeing the agent's end"
        elif outcome is Outcome.EXITED:
            reason = reason or "the agent exited"
        else:
            reason = reason or "stopped through the daemon"
        end = ExitRecord(
            agent_id=record.agent_id,
            outcome=outcome.value,
            epoch=record.epoch,
            host_pid=record.host_pid,
            last_offset=record.last_offset,
            state=record.state,
            exit_code=record.exit_code,
            signal=record.signal,
            reason=reason,
            at=time.time(),
        )
        failure = is_failure(
            outcome,
            exit_code=record.exit_code,
            state=record.state,
            signal=record.signal,
            stop_requested=agent.host_stopped,
        )
        ran_for = (record.ended_at or time.time()) - (record.host_started_at or time.time())
        decision = self._decide(record, failure=failure, ran_for=ran_for)
        back = self._leave_tui(agent)
        if back is not None:  # never the TUI's restart policy: the structured agent
            decision = back
            reason = back.reason
        elif outcome is Outcome.STOPPED:
            record.status = AgentStatus.STOPPED
            decision = RestartDecision(False, reason=reason)
        elif not self._apply(record, decision) and not decision.gave_up:
            record.status = AgentStatus.EXITED if outcome is Outcome.EXITED else AgentStatus.LOST
        record.host_pid = record.agent_pid = 0
        self._dirty.discard(record.agent_id)
        try:
            self.registry.record_end(record, end)
        except RegistryError as exc:
            self._write_failed(record.agent_id, exc)
            self._unsaved_ends.append((record.agent_id, end))
        self.hub.notice(NoticeType.HOST_GONE, record.agent_id, status=record.status, reason=reason)
        if self.notifier is not None:
            self.notifier.gone(
                record.agent_id,
                lost=outcome is Outcome.LOST,
                stop_requested=outcome is Outcome.STOPPED or agent.host_stopped,
                at=record.ended_at or time.time(),
            )
        log.info(
            "host.gone",
            agent_id=record.agent_id,
            outcome=outcome.value,
            status=record.status,
            restart=decision.restart,
        )
        self.dequeue_soon()  # a place may have freed
        return decision

    # --- the follower sink --------------------------------------------------------------

    def on_attached(self, agent_id: str, attached: Attached) -> None:
        agent = self.agents[agent_id]
        record = agent.record
        status, response = attached.status, attached.response
        record.epoch = response.epoch
        if attached.new_epoch:
            record.last_offset = 0
        record.host_pid = status.host.pid
        record.agent_pid = status.agent.pid
        record.state = status.agent.state
        record.session_id = status.agent.session_id or record.session_id
        record.host_version = status.host.version
        record.host_protocol_version = status.host.protocol_version
        record.host_started_at = record.host_started_at or status.host.started_at.timestamp()
        if record.status in (AgentStatus.UNREACHABLE, AgentStatus.SPAWNING, AgentStatus.LOST):
            record.status = AgentStatus.RUNNING
        agent.older = check_versions(status).older
        if agent.reattached_from is None:
            agent.reattached_from = attached.from_offset
        self.save(record)
        self.hub.attached(
            agent_id,
            response.epoch,
            attached.from_offset,
            stream_offset=response.stream_offset,
            oldest_offset=response.oldest_offset,
            truncated=response.truncated,
            new_epoch=attached.new_epoch,
        )
        agent.attached.set()
        self._idle_watch(agent)
        if self.notifier is not None:
            self.notifier.attached(agent_id, response.epoch, status.agent.project, record.state)
        if record.state in FINAL_STATES and record.status == AgentStatus.RUNNING:
            self._agent_exited(agent)  # it ended while nobody followed; its host lingers

    def on_event(self, agent_id: str, event: StreamEvent, frame: bytes) -> None:
        agent = self.agents.get(agent_id)
        if agent is None:
            return
        record = agent.record
        record.last_offset = event.offset
        self._dirty.add(agent_id)
        if self.notifier is not None:
            self.notifier.event(event)
        if self.observer is not None:
            self.observer.on_event(agent_id, event)
        if event.type == "state" and event.state:
            record.state = event.state
            self._idle_watch(agent)
            if event.state in FINAL_STATES and record.status == AgentStatus.RUNNING:
                self._agent_exited(agent)
        elif event.type == "result" and event.result:
            # the session a restart resumes (Claude Code, Codex): known before any exit
            session = event.result.get("session_id")
            if isinstance(session, str) and session != record.session_id:
                record.session_id = session
                self.save(record)
        # the host's own bytes: watchers get the line the host sent, not a re-encoding
        self.hub.publish(agent_id, event.offset, frame + b"\n")

    def on_unreachable(self, agent_id: str, error: str) -> None:
        agent = self.agents.get(agent_id)
        if agent is None or agent.record.status != AgentStatus.RUNNING:
            return
        agent.record.status = AgentStatus.UNREACHABLE
        agent.record.last_error = error
        self.save(agent.record)
        log.warning("host.unreachable", agent_id=agent_id, error=error)

    # --- limits: the queue and idle stops (agenthost.daemon.limits decides) -------------

    def live_count(self, exclude: str | None = None) -> int:
        """Agents that take a place under ``--max-agents`` (``exclude`` left out)."""
        return sum(
            1
            for agent_id, agent in self.agents.items()
            if agent_id != exclude and agent.record.status in LIVE_STATUSES
        )

    def dequeue_soon(self) -> None:
        """Start the queued agents a place freed for, once the current work is done."""
        if self._dequeue_pending or self.start_queued is None or self.limits.max_agents is None:
            return
        if not any(a.record.status == AgentStatus.QUEUED for a in self.agents.values()):
            return
        self._dequeue_pending = True
        asyncio.get_running_loop().call_soon(self._dequeue)

    def _dequeue(self) -> None:
        self._dequeue_pending = False
        queued = [
            (agent_id, agent.record.queued_at or agent.record.created_at)
            for agent_id, agent in self.agents.items()
            if agent.record.status == AgentStatus.QUEUED
        ]
        for agent_id in to_start(self.limits, self.live_count(), queued):
            agent = self.agents[agent_id]
            agent.record.status = AgentStatus.SPAWNING  # its place is taken from now on
            log.info("agent.dequeued", agent_id=agent_id)
            assert self.start_queued is not None
            self.start_queued(agent)

    def _idle_watch(self, agent: Agent) -> None:
        """(Re)arm or disarm the agent's idle stop after a state change."""
        if agent.idle_timer is not None:
            agent.idle_timer.cancel()
            agent.idle_timer = None
        delay = idle_stop_delay(self.limits, agent.record.state)
        if delay is None or agent.stop_requested:
            return
        agent.idle_timer = asyncio.get_running_loop().call_later(
            delay, lambda: self._spawn_task(self._idle_stop(agent))
        )

    async def _idle_stop(self, agent: Agent) -> None:
        """Stop an agent that stayed idle for ``--idle-stop``: its journal and session
        stay, and ``run`` of the same id starts it again (resuming the session)."""
        record = agent.record
        agent.idle_timer = None
        if record.state != "idle" or record.status != AgentStatus.RUNNING or agent.stop_requested:
            return
        reason = idle_reason(self.limits)
        agent.stop_requested = True
        agent.stop_text = reason
        record.stop_reason = "idle"
        agent.wakeup.set()
        self.save(record)
        log.info("agent.idle_stop", agent_id=record.agent_id, reason=reason)
        with contextlib.suppress(AgentHostError):  # it ended meanwhile: as good
            await self.stop_host(record.agent_id, False, 0, reason)

    def _agent_exited(self, agent: Agent) -> None:
        agent.record.status = AgentStatus.EXITED
        agent.exit_seen = True
        if agent.exit_task is None or agent.exit_task.done():
            agent.exit_task = self._spawn_task(self._on_exit(agent))

    async def _on_exit(self, agent: Agent) -> None:
        """The agent exited: learn its result and, if it will be restarted, stop its
        lingering host so the new one can take the agent's name."""
        record = agent.record
        agent_id = record.agent_id
        try:
            status = await probe_host_async(agent_id, home=self.home, timeout=self.probe_timeout)
        except AgentHostError:
            seen = end_from_log(log_path(self.home, agent_id)) or {}
            code = seen.get("exit_code")
            record.exit_code = code if isinstance(code, int) else None
            sig = seen.get("signal")
            record.signal = sig if isinstance(sig, str) else None
            record.ended_at = time.time()
            agent.host_stopped = seen.get("stop_requested") is True
        else:
            info = status.agent
            record.exit_code = info.exit_code
            record.signal = info.signal
            record.ended_at = info.ended_at.timestamp() if info.ended_at else time.time()
            record.session_id = info.session_id or record.session_id
            record.last_error = info.last_error
            agent.host_stopped = info.stop_requested is True
        self.save(record)
        self.hub.notice(
            NoticeType.AGENT_EXITED,
            agent_id,
            exit_code=record.exit_code,
            signal=record.signal,
            state=record.state,
        )
        log.info("agent.exited", agent_id=agent_id, exit_code=record.exit_code)
        if self.notifier is not None:
            self.notifier.exited(
                agent_id,
                state=record.state,
                exit_code=record.exit_code,
                signal=record.signal,
                stop_requested=agent.stop_requested or agent.host_stopped,
                at=record.ended_at,
            )
        failure = is_failure(
            Outcome.EXITED,
            exit_code=record.exit_code,
            state=record.state,
            signal=record.signal,
            stop_requested=agent.host_stopped,
        )
        ran_for = record.ended_at - (record.host_started_at or record.ended_at)
        decision = self._decide(record, failure=failure, ran_for=ran_for)
        if agent.stop_requested:
            return
        if decision.restart or self.returns_from_tui(agent):
            with contextlib.suppress(AgentHostError):  # gone already: as good
                await self.stop_host(agent_id, True, 5.0, "restart policy: a new host follows")
        elif decision.gave_up:  # say so now, not when the lingering host ends
            self._apply(record, decision)
            self.save(record)

    # --- writing the registry --------------------------------------------------------------

    def save(self, *records: AgentRecord) -> None:
        """Write agents' rows (one transaction). While the registry cannot be written
        (a full disk), the in-memory records stay the authority and the rows are
        written by a later :meth:`flush`: a failed write must not end a lifecycle or a
        follower (it used to, and the daemon stopped following the agent). Within
        :meth:`saves_held`, the rows are written when it ends."""
        if self._held is not None:
            self._held.update((r.agent_id, r) for r in records)
            return
        try:
            self.registry.save(*records)
        except RegistryError as exc:
            for record in records:
                self._write_failed(record.agent_id, exc)
        if any(r.status not in LIVE_STATUSES for r in records):
            self.dequeue_soon()

    @contextlib.contextmanager
    def saves_held(self) -> Iterator[None]:
        """Hold back every :meth:`save` until the block ends, then write the rows (as
        they are then) in one transaction. For the start-up reconcile, before the
        daemon serves: what a kill meanwhile loses, the next reconcile learns again
        from the hosts. Ends of runs (:meth:`end_run`) are written at once."""
        self._held = {}
        try:
            yield
        finally:
            held, self._held = self._held, None
            self.save(*held.values())

    def _write_failed(self, agent_id: str, exc: RegistryError) -> None:
        if not self._unsaved:
            log.error("registry.write_failed", agent_id=agent_id, error=exc.message)
        self._unsaved.add(agent_id)

    def flush(self) -> int:
        """Write the stream positions that moved since the last flush (one transaction),
        and the rows and ends earlier writes failed to record. Raise RegistryError if
        the registry still cannot be written (nothing is forgotten: the next flush
        tries again)."""
        if self._unsaved:
            records = [self.agents[a].record for a in self._unsaved if a in self.agents]
            self.registry.save(*records)
            self._unsaved.clear()
            log.info("registry.write_recovered", agents=len(records))
        while self._unsaved_ends:
            agent_id, end = self._unsaved_ends[0]
            agent = self.agents.get(agent_id)
            if agent is not None:
                self.registry.record_end(agent.record, end)
            self._unsaved_ends.pop(0)
        if not self._dirty:
            return 0
        rows = []
        for agent_id in self._dirty:
            agent = self.agents.get(agent_id)
            if agent is not None:
                r = agent.record
                rows.append((agent_id, r.epoch, r.last_offset, r.state))
        written = self.registry.save_positions(rows)
        self._dirty.clear()  # only once written: a failed flush is retried, idle or not
        return written

    async def close(self) -> None:
        """Stop following (hosts keep running) and write the last positions."""
        stuck = await cancel_all(list(self._tasks))
        if stuck:
            log.error("supervisor.tasks_stuck", count=len(stuck))
        self.flush()


def resumable(kind: str) -> bool:
    from agenthost.agents import adapter_class  # with the first restart, not at start-up

    adapter = adapter_class(kind)
    return adapter is not None and adapter.resumable
