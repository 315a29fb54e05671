"""The approval policy applied in the host: the one place where a permission request
is decided before anyone is asked.

:class:`Approvals` is built at the first permission request (the host starts without
it, and without pydantic). For every new request it reads ``<home>/config.toml``
(:class:`agenthost.config.ConfigFile`: a stat when unchanged), asks
:func:`agenthost.attention.policy.decide`, and for ``allow`` or ``deny`` returns the
events that answer the agent exactly as ``host.respond`` would, published in the same
batch as the request: the request never makes the agent ``waiting``, yet its
``permission_request``, its ``permission_response`` (actor ``policy``, with the rule)
and its ``permission`` history entry are journaled, the audit trail.

It also keeps the session grants ("allow for this session", in memory: they end with
the host) and the ``ask_timeout`` timers that deny a request nobody answered.

It is handed what it uses (the stream, the adapter, the agent's identity and working
directory, whether the agent runs), never the host itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agenthost.agents.base import AdapterEvent, ErrorNote, PermissionDecided, Write
from agenthost.attention.policy import (
    Decision,
    Grant,
    Subject,
    decide,
    duration_text,
    grant_for,
    resolver,
    subject_of,
)
from agenthost.config import ConfigFile
from agenthost.errors import AgentHostError, Forbidden, InvalidPayload

if TYPE_CHECKING:
    from agenthost.agents.base import Adapter, PermissionAsk
    from agenthost.host.stream import AgentStream
    from agenthost.models import RespondRequest

log = structlog.get_logger("agenthost.approvals")


@dataclass(frozen=True, slots=True)
class Agent:
    """Who the requests come from, as the rules see it."""

    agent_id: str
    project: str
    cwd: str
    """The agent's working directory: relative paths are resolved against it."""


class Approvals:
    """The policy, the session grants and the ask timers of one host."""

    def __init__(
        self,
        home: Path,
        agent: Agent,
        stream: AgentStream,
        adapter: Adapter,
        running: Callable[[], bool],
    ) -> None:
        self.agent = agent
        self.stream = stream
        self.adapter = adapter
        self._running = running
        self.config = ConfigFile(home)
        self.grants: list[Grant] = []
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._reported: set[str] = set()  # config errors already published

    def _subject(self, request: dict[str, Any]) -> Subject:
        agent = self.agent
        return subject_of(request, agent.agent_id, agent.project, resolver(agent.cwd))

    # --- a new request -----------------------------------------------------------------

    def on_ask(self, ask: PermissionAsk, request: dict[str, Any]) -> list[AdapterEvent]:
        """What follows ``ask`` at once: the policy's answer, or nothing (a person
        decides; the ask timer runs). Never publishes (it runs inside publish)."""
        events: list[AdapterEvent] = []
        config = self.config.get()
        subject = self._subject(request)
        if self.config.error is not None:
            # a broken config.toml allows nothing: its rules may have been mid-edit
            if self.config.error not in self._reported:
                self._reported.add(self.config.error)
                note = "; the approval policy asks for everything until it is fixed"
                events.append(ErrorNote(self.config.error + note))
            what = "not trusted" if self.config.refused else "invalid"
            decision = Decision("ask", f"config.toml is {what}: a person decides")
        else:
            self._reported.clear()
            decision = decide(config.policy.rule, subject, self.grants)
        log.info(
            "policy.decided",
            request_id=ask.request_id,
            behavior=decision.behavior,
            rule=decision.rule,
            source=decision.source,
        )
        if decision.behavior == "ask":
            self._start_timer(ask.request_id, config.policy.ask_timeout)
            return events
        allow = decision.behavior == "allow"
        message = None if allow else f"denied by the approval policy: {decision.reason}"
        try:
            data = self.adapter.encode_permission_response(ask, allow, message, None)
        except AgentHostError as exc:  # e.g. an ACP request already withdrawn
            events.append(ErrorNote(f"the approval policy could not answer: {exc.message}"))
            return events
        decided = PermissionDecided(
            ask.request_id, decision.behavior, message, actor="policy", reason=decision.reason
        )
        return [*events, Write(data), decided]

    # --- ask_timeout -------------------------------------------------------------------

    def _start_timer(self, request_id: str, timeout: float | None) -> None:
        if timeout is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a library caller feeding events): no timer
            return
        self._timers[request_id] = loop.call_later(timeout, self._expire, request_id, timeout)

    def _expire(self, request_id: str, timeout: float) -> None:
        self._timers.pop(request_id, None)
        pending = self.stream.pending.get(request_id)
        if pending is None or not self._running():
            return
        ask = pending[0]
        reason = f"nobody answered within {duration_text(timeout)}"
        try:
            data = self.adapter.encode_permission_response(ask, False, reason, None)
        except AgentHostError as exc:
            log.warning("policy.timeout_unanswerable", request_id=request_id, error=exc.message)
            return
        self.stream.write(data)
        self.stream.publish(
            [PermissionDecided(request_id, "deny", reason, actor="timeout", reason=reason)]
        )

    def decided(self, request_id: str) -> None:
        """``request_id`` is no longer pending: its timer goes."""
        timer = self._timers.pop(request_id, None)
        if timer is not None:
            timer.cancel()

    def close(self) -> None:
        """Cancel every timer (the host is going)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    # --- session grants ----------------------------------------------------------------

    def check_remember(self, answer: RespondRequest) -> None:
        """Refuse ``remember: "session"`` on a denial, or when config.toml turned
        session grants off."""
        if answer.behavior != "allow":
            raise InvalidPayload(
                'remember "session" only goes with behavior "allow": a denial is never '
                "remembered (deny rules in config.toml are)"
            )
        config = self.config.get()
        if self.config.refused:
            raise Forbidden(
                "allow for this session is off while config.toml is not trusted: "
                f"{self.config.error}"
            )
        if not config.policy.session_grants:
            raise Forbidden(
                "allow for this session is turned off by config.toml "
                "([policy] session_grants = false)"
            )

    def remember(self, request: dict[str, Any], actor: str) -> Grant:
        """Allow what ``request`` asked (same tool, exact command) for the session."""
        grant = grant_for(self._subject(request), actor)
        if grant not in self.grants:
            self.grants.append(grant)
        log.info("policy.granted", tool=grant.tool, actor=actor)
        return grant
