"""What Claude Code's or Codex's own TUI tells the host through its hooks.

A terminal agent running ``claude`` or ``codex`` (or one given ``--agent-opt
hooks=claude|codex``) is started with the CLI's own settings pointing its hooks at a
socket of this host (:mod:`agenthost.terminal.hooksetup`, for this agent only, never
in the user's settings files). Each hook call is turned into events by
:class:`~agenthost.terminal.hookevents.HookMapper`: states, the session, and permission
requests. A ``PermissionRequest`` hook waits here for its answer: the approval policy's
at once, or a person's through ``host.respond`` (a one-tap link, the page, the CLI);
the answer goes back to the hook, never into the terminal. A person may also answer in
the TUI itself: then the hook is released without an answer.

A part of the host that does not know the host: it is handed a way to publish events,
and it answers through the adapter's ``encode_permission_response`` (the pty adapter
calls :meth:`TuiHooks.answer`).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from agenthost.agents.base import AdapterEvent, PermissionAsk
from agenthost.errors import AgentHostError
from agenthost.host.hooks import HookServer
from agenthost.terminal.hookevents import DECIDING_KINDS, HookMapper, decision_json

log = structlog.get_logger("agenthost.tuihooks")


class TuiHooks:
    """The hook socket of one terminal agent and the requests its hooks wait on."""

    def __init__(self, path: Path, publish: Callable[[list[AdapterEvent]], int]) -> None:
        self.path = path
        self.token = secrets.token_urlsafe(32)  # per run: a new host, a new token
        self.publish = publish
        self.mapper = HookMapper()
        self.server = HookServer(path, self.token, self._on_hook)
        self._waiting: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self._ids = itertools.count(1)

    def relocate(self, path: Path) -> None:
        """Listen at ``path`` instead (before :meth:`start`): a sandboxed agent reaches
        its host only through the sandbox's own directory."""
        self.path = path
        self.server = HookServer(path, self.token, self._on_hook)

    async def start(self) -> None:
        """Listen (raise ConfigError when the socket cannot be made)."""
        await self.server.start()

    async def close(self) -> None:
        """Stop listening; hooks still waiting fall back to the TUI's own dialog."""
        await self.server.close()

    async def _on_hook(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        if kind not in DECIDING_KINDS:
            self._publish(self.mapper.events(kind, payload))
            return None
        request_id = f"hook-{next(self._ids)}"
        # waiting before publishing: the policy may answer inside the publish
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            self._publish(self.mapper.events(kind, payload, request_id))
            return await future
        except asyncio.CancelledError:
            # the CLI killed the hook: the person answered in the TUI (No, Esc)
            if self._waiting.pop(request_id, None) is not None:
                self._publish(self.mapper.withdrawn(request_id))
            raise
        finally:
            self._waiting.pop(request_id, None)

    def _publish(self, events: list[AdapterEvent]) -> None:
        if events:
            self.publish(events)

    def answer(self, ask: PermissionAsk, allow: bool, message: str | None) -> None:
        """Answer ``ask`` through the hook that waits on it (the policy's answer, a
        person's, a timeout's). Raise AgentHostError when no hook waits any more."""
        future = self._waiting.pop(ask.request_id, None)
        if future is None or future.done():
            raise AgentHostError(f"the hook of request {ask.request_id} is gone")
        self.mapper.answered(ask.request_id)
        future.set_result(decision_json(ask, allow, message))
        log.info("hook.answered", request_id=ask.request_id, allow=allow)

    def decided(self, request_id: str) -> None:
        """``request_id`` stopped being pending some other way (answered in the TUI,
        the turn ended): its hook is released without an answer."""
        future = self._waiting.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(None)
