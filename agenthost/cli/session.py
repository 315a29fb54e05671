"""An attach session: follow an agent's stream across connection losses.

The session prints each event once. It remembers the last offset it showed and the
stream's epoch; when the host goes away (a restart, a crash, a dropped connection) it
says so, retries with backoff, and resumes right after that offset, or, if the host
came back with a new stream (another epoch), from that stream's start. It ends when the
user detaches, when ``--no-follow`` reached the head, or when the agent ended.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

import click

from agenthost.cli.common import Exit
from agenthost.cli.render import EventRenderer, Style, fit, render_end
from agenthost.client import AsyncClient, Subscription
from agenthost.errors import AgentHostError, HostNotFound
from agenthost.protocol import FINAL_STATES, PermissionRequest, StatusResponse, StreamEvent

STRUCTURED_BACKENDS = frozenset({"demo", "claude", "codex"})
RETRY_FIRST, RETRY_MAX = 0.2, 5.0  # seconds between reconnection attempts


@dataclass(frozen=True)
class Start:
    """Where the replay starts: after ``offset``, the ``last`` N events, or ``since``."""

    offset: int | None = None
    last: int | None = None
    since: datetime | None = None


class AttachSession:
    """Follows one agent; events go to ``out`` (rendered, or JSON lines)."""

    def __init__(
        self,
        agent_id: str,
        home: Path,
        *,
        start: Start,
        follow: bool,
        as_json: bool,
        raw: bool = False,
        style: Style | None = None,
        width: int | None = None,
        interactive: bool = False,
        out: TextIO | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.home = home
        self.start = start
        self.follow = follow
        self.as_json = as_json
        self.raw = raw
        self.style = style or Style(False)
        self.width = width
        self.interactive = interactive
        self._out = out  # None: whatever sys.stdout is when printing (it may be patched)
        self._note = note
        self.client: AsyncClient | None = None
        self.connected_once = False
        self.epoch: str | None = None
        self.last_offset = 0
        self.state = "?"
        self.pending: dict[str, PermissionRequest] = {}
        self.on_change: Callable[[], None] = lambda: None  # the prompt redraws
        self._renderer: EventRenderer | None = None

    # --- output ---------------------------------------------------------------------

    def note(self, text: str, *, alarm: bool = False) -> None:
        """A line about the session itself (on stderr, never in --json output)."""
        line = fit(f"── {text}", self.width)
        line = self.style.red(line) if alarm else self.style.dim(line)
        if self._note is not None:
            self._note(line)
        elif not self.as_json:
            click.echo(line, err=True)

    def show(self, event: StreamEvent) -> None:
        out = self._out or sys.stdout
        if self.as_json:
            out.write(json.dumps(event.model_dump(mode="json", exclude_none=True)) + "\n")
            out.flush()
            return
        assert self._renderer is not None
        text = self._renderer.render(event)
        if text is not None:
            print(text, file=out, flush=True)

    # --- the loop ---------------------------------------------------------------------

    async def run(self) -> Exit:
        """Follow until the end; the exit status says why it ended."""
        delay = RETRY_FIRST
        first = True
        while True:
            client = AsyncClient(self.agent_id, home=self.home)
            try:
                await client.connect()
            except HostNotFound:
                if first:
                    raise  # nothing to follow: say why and exit (status 3)
                await asyncio.sleep(delay)  # the host is away: wait before trying again
                delay = min(delay * 2, RETRY_MAX)
                continue
            self.client = client
            self.connected_once = True
            try:
                result = await self._follow(client, first)
                if result is not None:
                    return result
            except AgentHostError as exc:
                if first:
                    raise
                self.note(f"{exc}")
            finally:
                self.client = None
                await client.close()
            first = False
            delay = RETRY_FIRST
            self.note("connection to the host lost; reconnecting…")
            await asyncio.sleep(delay)

    async def _follow(self, client: AsyncClient, first: bool) -> Exit | None:
        status = await client.status()
        self.state = status.agent.state
        if first:
            self._renderer = EventRenderer(
                self.style,
                structured=status.agent.backend in STRUCTURED_BACKENDS,
                raw=self.raw,
                width=self.width,
                interactive=self.interactive,
            )
            sub = await client.attach(await self._first_offset(client))
            self._summary(status, sub)
        else:
            sub = await self._reattach(client)
        self.epoch = sub.response.epoch
        self.pending = {r.request_id: r for r in sub.response.pending}
        self.on_change()
        head = sub.response.stream_offset
        if not self.follow and self.last_offset >= head:
            return Exit.OK
        async for event in sub:
            if event.offset <= self.last_offset:
                continue  # shown before the connection was lost
            self.last_offset = event.offset
            self._track(event)
            if self.start.since is None or event.timestamp >= self.start.since:
                self.show(event)
            if not self.follow and event.offset >= head:
                return Exit.OK
            if self.follow and event.type == "state" and self.state in FINAL_STATES:
                return await self._ended(client)
        return None  # the connection ended: reconnect

    async def _first_offset(self, client: AsyncClient) -> int:
        if self.start.last is not None:
            head = (await client.history(1)).offset
            return max(0, head - self.start.last)
        return self.start.offset or 0

    async def _reattach(self, client: AsyncClient) -> Subscription:
        sub = await client.attach(self.last_offset)
        if sub.response.epoch == self.epoch:
            self.note(f"reconnected; resuming after offset {self.last_offset}")
            return sub
        # a new stream (the host restarted without its journal): its offsets are not ours
        self.note("the host came back with a new stream; showing it from its start")
        await client.detach()
        self.last_offset = 0
        return await client.attach(0)

    def _summary(self, status: StatusResponse, sub: Subscription) -> None:
        a = status.agent
        replay = max(0, sub.response.stream_offset - sub.client.last_offset)
        parts = [a.id, a.backend or "?", a.state]
        if a.task:
            parts.append(f"task {a.task}")
        if a.project:
            parts.append(f"project {a.project}")
        parts.append(f"replaying {replay} event{'' if replay == 1 else 's'}")
        if sub.response.truncated:
            parts.append("older events were pruned")
        self.note(" · ".join(parts))
        if self.interactive:
            self.note("type + Enter sends · Ctrl-C interrupts · Ctrl-] detaches")

    def _track(self, event: StreamEvent) -> None:
        changed = False
        if event.type == "state" and event.state:
            self.state = event.state
            changed = True
        elif event.type == "permission_request" and event.request is not None:
            self.pending[event.request.request_id] = event.request
            changed = True
        elif event.type == "permission_response" and event.decision is not None:
            changed = self.pending.pop(event.decision.request_id, None) is not None
        if changed:
            self.on_change()

    async def _ended(self, client: AsyncClient) -> Exit:
        failed = self.state != "done"
        try:  # how it ended; the host may be gone already (--linger 0)
            self.note(render_end((await client.status()).agent), alarm=failed)
        except AgentHostError:
            self.note(f"the agent ended (state {self.state})", alarm=failed)
        return Exit.AGENT_FAILED if failed else Exit.OK
