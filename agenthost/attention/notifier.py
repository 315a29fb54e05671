"""The daemon's notifier: what :mod:`agenthost.attention.notices` says is due goes out
through the channels of ``config.toml``, retried, recorded in the ledger.

Nothing here blocks the event loop or the daemon's following: the supervisor's hooks
(:meth:`Notifier.attached`, :meth:`~Notifier.event`, :meth:`~Notifier.exited`,
:meth:`~Notifier.gone`) only update the sans-IO tracker and queue notices; a bounded
queue (a notice a full one refuses is recorded as failed) feeds delivery tasks, at most
:data:`MAX_DELIVERIES` at once, each with its channel's timeout. A failed delivery is
tried again after 1 s, 2 s, 4 s... ``retries`` times.

``config.toml`` is re-read when it changes; an invalid one is logged once and the last
good configuration goes on being used. One that is refused as untrusted (another user's,
writable by others: :mod:`agenthost.homefiles`) is never read: no channel of it is
used, no command of it runs, and each notice due meanwhile is recorded as failed with
the reason.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog

from agenthost.attention.keys import link_key
from agenthost.attention.ledger import Ledger, Status
from agenthost.attention.notices import Notice, Notices, with_links
from agenthost.errors import AgentHostError
from agenthost.models import StreamEvent
from agenthost.paths import CONFIG_NAME

# The channels and the configuration are imported when first needed (a notice due, a
# delivery): the daemon makes its notifier before it is ready, and reattaching its
# hosts needs neither (the configuration's module defines some twenty models).
if TYPE_CHECKING:
    from agenthost.attention.channels import Delivery
    from agenthost.config import AgentNotify, Channel, ConfigFile, HomeConfig

log = structlog.get_logger("agenthost.attention.notifier")

MAX_QUEUE: Final = 256
MAX_DELIVERIES: Final = 16
BACKOFF_FIRST: Final = 1.0
BACKOFF_MAX: Final = 300.0


class Notifier:
    """Notices of every agent the daemon follows; ``clock`` is Unix time."""

    def __init__(
        self,
        home: Path,
        *,
        clock: Callable[[], float] = time.time,
        max_queue: int = MAX_QUEUE,
        backoff_first: float = BACKOFF_FIRST,
    ) -> None:
        self.home = home
        self._config_file: ConfigFile | None = None
        self.notices = Notices(self._settings, clock)
        self.clock = clock
        self.backoff_first = backoff_first
        self.ledger: Ledger | None = None
        """Opened with the first delivery: a home without channels gets no file."""
        self._ledger_error: str | None = None
        self._queue: asyncio.Queue[Notice] = asyncio.Queue(max_queue)
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_DELIVERIES)
        self._loops: set[asyncio.Task[None]] = set()
        self._deliveries: set[asyncio.Task[None]] = set()
        self._logged_error: str | None = None

    # --- configuration --------------------------------------------------------------

    @property
    def config_file(self) -> ConfigFile:
        """``config.toml``, watched from the first time a notice needs it."""
        if self._config_file is None:
            from agenthost.config import ConfigFile

            self._config_file = ConfigFile(self.home)
        return self._config_file

    def config(self) -> HomeConfig:
        """The configuration (the last good one while the file is invalid, no channel
        while it is refused: :data:`~agenthost.config.REFUSED_CONFIG`). A stat of
        the file per call: calls come with state, error and result events, not with
        every event (output events are not looked at)."""
        config = self.config_file.get()
        error = self.config_file.error
        if error != self._logged_error:
            if error is not None:
                log.error("notify.config_invalid", error=error)
            else:
                log.info("notify.config_fixed")
            self._logged_error = error
        return config

    def _settings(self, agent_id: str, project: str) -> AgentNotify:
        return self.config().notify.for_agent(agent_id, project)

    # --- the supervisor's hooks (never raise, never block) ----------------------------

    def attached(self, agent_id: str, epoch: str, project: str, state: str) -> None:
        """The daemon (re)attached to an agent's host."""
        try:
            self.notices.attached(agent_id, epoch, project, state)
        except Exception:
            log.exception("notify.hook_failed", agent_id=agent_id)

    def event(self, event: StreamEvent) -> None:
        """One event of an agent's stream."""
        try:
            self._submit(self.notices.event(event))
            if event.type == "state":
                self._wake.set()  # an episode opened or closed: re-plan the timer
        except Exception:
            log.exception("notify.hook_failed", agent_id=event.agent_id)

    def exited(
        self,
        agent_id: str,
        *,
        state: str,
        exit_code: int | None,
        signal: str | None,
        stop_requested: bool,
        at: float,
    ) -> None:
        """An agent exited (its host may linger)."""
        try:
            self._submit(
                self.notices.exited(
                    agent_id,
                    state=state,
                    exit_code=exit_code,
                    signal=signal,
                    stop_requested=stop_requested,
                    at=at,
                )
            )
        except Exception:
            log.exception("notify.hook_failed", agent_id=agent_id)

    def gone(self, agent_id: str, *, lost: bool, stop_requested: bool, at: float) -> None:
        """An agent's host ended (``lost``: the daemon did not see its agent end)."""
        try:
            self._submit(
                self.notices.gone(agent_id, lost=lost, stop_requested=stop_requested, at=at)
            )
        except Exception:
            log.exception("notify.hook_failed", agent_id=agent_id)

    def forget(self, agent_id: str) -> None:
        """The agent was forgotten: what was tracked of it goes (a notice under way
        still goes out)."""
        self.notices.forget(agent_id)

    def _submit(self, notices: list[Notice]) -> None:
        for notice in notices:
            try:
                self._queue.put_nowait(notice)
            except asyncio.QueueFull:
                log.error("notify.dropped", agent_id=notice.agent_id, kind=notice.kind)
                self._dropped(notice)

    def _dropped(self, notice: Notice) -> None:
        """Record a notice the full queue refused as failed, on each of its channels:
        the record says what was not sent, and why."""
        setting = self.config().notify.for_agent(notice.agent_id, notice.project)
        if notice.kind not in setting.events:
            return
        ledger = self._open_ledger()
        if ledger is None:  # the log says so
            return
        from agenthost.attention.channels import failed

        why = failed(f"not sent: {self._queue.maxsize} notices were already waiting")
        for name in setting.channels:
            try:
                row = ledger.claim(notice.key, notice.agent_id, notice.kind, name, notice.title)
            except AgentHostError:
                return
            if row is not None:
                self._record(row, "failed", 0, why)

    # --- running ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the timer and the dispatcher (on the running loop)."""
        loop = asyncio.get_running_loop()
        for coro in (self._timer(), self._dispatch()):
            task = loop.create_task(coro)
            self._loops.add(task)
            task.add_done_callback(self._loops.discard)

    async def close(self, timeout: float = 2.0) -> None:
        """Stop taking notices; give deliveries under way ``timeout`` seconds, then cancel
        them (their rows say so)."""
        for task in list(self._loops):
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        if self._deliveries:
            _, late = await asyncio.wait(list(self._deliveries), timeout=timeout)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if "agenthost.attention.channels" in sys.modules:  # else no delivery was made
            from agenthost.attention.channels import close_http

            await close_http()
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None

    async def _timer(self) -> None:
        while True:
            due = self.notices.next_due()
            self._wake.clear()
            if due is None:
                await self._wake.wait()
            else:
                pause = max(0.0, due - self.clock())
                if pause > 0:
                    try:
                        await asyncio.wait_for(self._wake.wait(), pause)
                    except TimeoutError:
                        pass
            try:
                self._submit(self.notices.due())
            except Exception:
                log.exception("notify.timer_failed")

    async def _dispatch(self) -> None:
        while True:
            notice = await self._queue.get()
            try:
                await self._send(notice)
            except Exception:
                log.exception("notify.dispatch_failed", agent_id=notice.agent_id)

    async def _send(self, notice: Notice) -> None:
        config = self.config()
        setting = config.notify.for_agent(notice.agent_id, notice.project)
        if notice.kind not in setting.events:
            return
        if self.config_file.refused:
            self._refused(notice)
            return
        if config.web.public_url:
            try:
                key = link_key(self.home)
            except AgentHostError as exc:
                log.error("notify.no_link_key", error=exc.message)
            else:
                notice = with_links(
                    notice, config.web.public_url, key, now=self.clock(), ttl=config.web.link_ttl
                )
        for name in setting.channels:
            channel = config.notify.channels.get(name)
            if channel is None:
                continue
            row: int | None = 0
            ledger = self._open_ledger()
            if ledger is not None:
                try:
                    row = ledger.claim(notice.key, notice.agent_id, notice.kind, name, notice.title)
                except AgentHostError as exc:
                    log.error("notify.ledger_failed", error=exc.message)
            if row is None:
                log.info("notify.already_sent", agent_id=notice.agent_id, key=notice.key)
                continue
            await self._slots.acquire()
            task = asyncio.get_running_loop().create_task(
                self._deliver(name, channel, notice, row, config.notify.retries)
            )
            self._deliveries.add(task)
            task.add_done_callback(self._delivered)

    def _refused(self, notice: Notice) -> None:
        """A notice due while config.toml is refused (another user's, writable by
        others): sent nowhere, as the file's channels are never read, and recorded as
        failed, with why, under the channel name ``config.toml``."""
        from agenthost.attention.channels import failed

        why = failed(f"not sent: {self.config_file.error}")
        log.error("notify.refused", agent_id=notice.agent_id, kind=notice.kind, why=why.why)
        ledger = self._open_ledger()
        if ledger is None:  # the log says so
            return
        try:
            row = ledger.claim(notice.key, notice.agent_id, notice.kind, CONFIG_NAME, notice.title)
        except AgentHostError as exc:
            log.error("notify.ledger_failed", error=exc.message)
            return
        if row is not None:
            self._record(row, "failed", 0, why)

    def _open_ledger(self) -> Ledger | None:
        if self.ledger is None:
            try:
                self.ledger = Ledger(self.home)
            except AgentHostError as exc:  # notices still go out, unrecorded, undeduped
                if exc.message != self._ledger_error:
                    log.error("notify.ledger_unusable", error=exc.message)
                self._ledger_error = exc.message
        return self.ledger

    def _delivered(self, task: asyncio.Task[None]) -> None:
        self._deliveries.discard(task)
        self._slots.release()

    async def _deliver(
        self, name: str, channel: Channel, notice: Notice, row: int, retries: int
    ) -> None:
        from agenthost.attention.channels import deliver, failed

        attempts = 0
        result = failed("not attempted")
        try:
            while True:
                attempts += 1
                result = await deliver(channel, notice)
                if result.ok or attempts > retries:
                    break
                self._record(row, "retrying", attempts, result)
                pause = min(BACKOFF_MAX, self.backoff_first * 2 ** (attempts - 1))
                await asyncio.sleep(pause)
        except asyncio.CancelledError:
            self._record(row, "failed", attempts, failed("the daemon stopped before it was sent"))
            raise
        self._record(row, "sent" if result.ok else "failed", attempts, result)
        log.info(
            "notify.sent" if result.ok else "notify.failed",
            agent_id=notice.agent_id,
            kind=notice.kind,
            channel=name,
            attempts=attempts,
            why=result.why,
        )

    def _record(self, row: int, status: Status, attempts: int, result: Delivery) -> None:
        if self.ledger is None or not row:
            return
        try:
            self.ledger.update(row, status, attempts, result.why)
        except AgentHostError as exc:
            log.error("notify.ledger_failed", error=exc.message)
