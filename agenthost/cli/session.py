"""An attach session: follow an agent's stream across connection losses.

The session prints each event once. It remembers the last offset it showed and the
stream's epoch; when the host goes away (a restart, a crash, a dropped connection) it
says so, retries with backoff, and resumes right after that offset, or, if the host
came back with a new stream (another epoch), from that stream's start. It ends when the
user detaches, when ``--no-follow`` reached the head, or when the agent ended for good.

"Ended for good" is decided from the live state, never from a replayed event: an id
can be run again (a new host continues the same stream), so the replay may hold an
earlier run's end. The session asks the host whether its agent has exited, and the
daemon whether it will start the agent again (``--restart on-failure``); while a
restart is coming it keeps following, across the new host's start.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from agenthost.agents import structured_output
from agenthost.cli.common import Exit
from agenthost.cli.render import EventRenderer, Style, fit, render_end, render_request
from agenthost.client import AsyncClient
from agenthost.errors import AgentHostError, HostNotFound, NotConnected
from agenthost.follow import (
    Attached,
    Backoff,
    Follow,
    Gap,
    Lost,
    from_tail,
    while_link_fails,
)
from agenthost.protocol import (
    FINAL_STATES,
    AgentInfo,
    AttachResponse,
    PermissionRequest,
    StatusResponse,
    StreamEvent,
)
from agenthost.terminal.chunks import event_bytes
from agenthost.textsafe import escape

if TYPE_CHECKING:
    from agenthost.daemon.protocol import DaemonAgent
    from agenthost.models import Screen
    from agenthost.remote import Remote

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
        home: Path | None,
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
        remote: Remote | None = None,
        snapshot: bool = False,
    ) -> None:
        self.agent_id = agent_id
        self.home = home
        """The agent's home (with a ``remote``: on that machine, None for its default)."""
        self.remote = remote
        self._link_policy = while_link_fails() if remote is not None else None
        self.start = start
        self.follow = follow
        self.as_json = as_json
        self.raw = raw
        self.style = style or Style(False)
        self.width = width
        self.interactive = interactive
        self._out = out  # None: whatever sys.stdout is when printing (it may be patched)
        self._note = note
        self.client: AsyncClient | None = None  # while attached: requests may use it
        self.connected_once = False
        self.state = "?"
        self.backend: str | None = None  # the agent's kind, as its host last said
        self.pending: dict[str, PermissionRequest] = {}
        self._shown: set[str] = set()  # the permission requests printed (their ids)
        self.on_change: Callable[[], None] = lambda: None  # the prompt redraws
        self._renderer: EventRenderer | None = None
        self._restart: AgentInfo | None = None  # the end of a run the daemon restarts
        self._follow: Follow | None = None
        self._head = 0  # the stream's last offset when the current attach was made
        self._result: Exit | None = None  # how the session ended, decided in a hook
        self.snapshot = snapshot
        self.announce = True
        """Whether the first attach is summed up in a note (the header line)."""
        self.detach_label = "Ctrl-]"
        """How the detach key is named in the hint line."""
        """A terminal agent starts from its screen (see :class:`~agenthost.follow.Follow`)."""
        self.terminal = False
        """Whether the agent is a terminal agent (``--agent pty``), as its host last said."""

    # --- output ---------------------------------------------------------------------

    def note(self, text: str, *, alarm: bool = False) -> None:
        """A line about the session itself (on stderr, never in --json output); ``text``
        may quote an agent or a host: it is escaped here."""
        line = fit(f"── {escape(text)}", self.width)
        line = self.style.red(line) if alarm else self.style.dim(line)
        if self._note is not None:
            self._note(line)
        elif not self.as_json:
            click.echo(line, err=True)

    def detached(self) -> None:
        """Say that the session left the agent running, and how to come back."""
        self.note(f"detached; the agent keeps running ({self.attach_command()})")

    def attach_command(self) -> str:
        """The command that attaches to this agent again (``--home`` when it is not
        the one a plain ``agenthost`` finds, ``--remote`` for another machine)."""
        import shlex

        from agenthost.paths import default_home

        words = ["agenthost", "attach"]
        if self.remote is not None:
            words += ["--remote", str(self.remote)]
        default = default_home().absolute() if self.remote is None else None
        if self.home is not None and self.home != default:
            words += ["--home", str(self.home)]
        return shlex.join([*words, self.agent_id])

    def show(self, event: StreamEvent) -> None:
        out = self._out or sys.stdout
        if self.as_json:
            out.write(json.dumps(event.model_dump(mode="json", exclude_none=True)) + "\n")
            out.flush()
            return
        if self.terminal:
            # a terminal agent's text is its terminal's bytes, as it wrote them
            if event.type == "terminal":
                data = terminal_bytes(event)
                out.flush()
                if hasattr(out, "buffer"):
                    out.buffer.write(data)
                    out.buffer.flush()
                else:  # a text stream of a test
                    out.write(data.decode(errors="replace"))
            return
        assert self._renderer is not None
        text = self._renderer.render(event)
        if text is not None:
            print(text, file=out, flush=True)
            if event.type == "permission_request" and event.request is not None:
                self._shown.add(event.request.request_id)

    def paint(self, screen: Screen) -> None:
        """Show a terminal agent's screen, where its stream starts (or starts again for
        a new stream): as text, its rows without the empty ones at the bottom."""
        if self.as_json:
            return
        lines = list(screen.lines)
        while lines and not lines[-1]:
            lines.pop()
        out = self._out or sys.stdout
        for line in lines:
            print(escape(line), file=out)
        out.flush()

    def show_pending(self) -> None:
        """Print the pending permission requests this session has not shown (asked
        before the replay's start or ``--since``, or while it was away): whoever is
        asked to answer one sees it whole above the question."""
        if self.as_json or self._renderer is None or self.terminal:
            return  # (a terminal agent's screen shows its questions)
        for request in self.pending.values():
            if request.request_id not in self._shown:
                self._shown.add(request.request_id)
                text = render_request(
                    request, self.agent_id, self.style, interactive=self.interactive
                )
                print(text, file=self._out or sys.stdout, flush=True)

    @property
    def interrupt_signals(self) -> bool:
        """Whether the agent's interrupt is SIGINT to its process group (an agent
        without turns, e.g. ``lines``) rather than the end of a turn."""
        return not structured_output(self.backend)

    @property
    def epoch(self) -> str:
        """The stream followed ("" before the first attach)."""
        return self._follow.position.epoch if self._follow is not None else ""

    @property
    def last_offset(self) -> int:
        """The offset of the last event received (or skipped over as evicted)."""
        return self._follow.position.offset if self._follow is not None else 0

    # --- the loop ---------------------------------------------------------------------

    async def run(self) -> Exit:
        """Follow until the end; the exit status says why it ended."""
        client = AsyncClient(self.agent_id, home=self.home, remote=self.remote)
        follow = self._follow = Follow(
            client,
            # (a snapshot is where a terminal agent starts: no replay option was given)
            start=None if self.snapshot else self._first_offset,
            keep_trying=self._keep_trying,
            on_attached=self._attached,
            backoff=Backoff(RETRY_FIRST, RETRY_MAX),
            snapshot=self.snapshot,
        )
        try:
            async for item in follow:
                if isinstance(item, Gap):
                    self._gap(item)
                elif (end := await self._event(client, item)) is not None:
                    return end
        finally:
            self.client = None
            await client.close()
        assert self._result is not None, "a follow ends when a hook decided so"
        return self._result

    async def _attached(self, attached: Attached) -> None:
        """A (re)attach: the host's state and where the stream stands."""
        assert self._follow is not None
        client = self._follow.client
        assert isinstance(client, AsyncClient)
        status, response = attached.status, attached.response
        self.state = status.agent.state
        self.backend = status.agent.backend
        self.terminal = status.agent.terminal is not None
        if self._follow.attaches == 1:
            self._renderer = EventRenderer(
                self.style,
                structured=structured_output(self.backend),
                raw=self.raw,
                width=self.width,
                interactive=self.interactive,
            )
            self._summary(status, response)
        elif not attached.new_epoch:
            self.note(f"reconnected; resuming after offset {attached.from_offset}")
        if response.screen is not None:
            self.paint(response.screen)
        self.client = client
        self.connected_once = True
        self.pending = {r.request_id: r for r in response.pending}
        self.on_change()
        self._restart = None  # a host answers: a restart we waited for happened
        self._head = response.stream_offset
        await self.connected(client)
        if self.last_offset >= self._head:
            self.show_pending()
            if not self.follow:
                self._finish(Exit.OK)
            elif self.state in FINAL_STATES and (end := await self._end(client)) is not None:
                self._finish(end)

    async def _event(self, client: AsyncClient, event: StreamEvent) -> Exit | None:
        """Show one event; the exit status if the session ends with it."""
        self._track(event)
        if self.start.since is None or event.timestamp >= self.start.since:
            self.show(event)
        head = self._head
        if event.offset >= head:  # at the head of the replay, or live
            self.show_pending()
        if not self.follow:
            return Exit.OK if event.offset >= head else None
        # A final state counts only where it is the latest: at the head of the replay
        # (earlier ones belong to runs that were followed by another) or live.
        current = event.offset == head or (event.offset > head and event.type == "state")
        if current and self.state in FINAL_STATES:
            return await self._end(client)
        return None

    def _gap(self, gap: Gap) -> None:
        if gap.reason == "new_epoch":
            # the host restarted without its journal: its offsets are not ours
            start = "its screen" if gap.before > 1 and self.snapshot else "it from its start"
            self.note(f"the host came back with a new stream; showing {start}")
        else:
            self.note(f"{gap} (the host did not keep them)", alarm=True)

    def _finish(self, result: Exit) -> None:
        self._result = result
        assert self._follow is not None
        self._follow.stop()

    async def _keep_trying(self, lost: Lost) -> bool:
        """After a lost connection: whether to try again (the restart logic)."""
        self.client = None
        if isinstance(lost.error, HostNotFound):
            if self._restart is not None:
                if not await self._restart_coming(self._restart, host_gone=True):
                    self._result = self._ended(self._restart)  # the daemon will not restart it
                    return False
            elif lost.attaches == 0:
                self._restart = await self._restart_pending()
                if self._restart is None:
                    raise lost.error  # nothing to follow: say why and exit (status 3)
            return True  # the host is away: try again after a pause
        if lost.attaches == 0:
            raise lost.error
        if self._link_policy is not None and not self._link_policy(lost):
            raise lost.error  # another machine: not the link any more, or for too long
        if not isinstance(lost.error, NotConnected):
            self.note(f"{lost.error}")
        self.note("connection to the host lost; reconnecting…")
        return True

    async def _first_offset(self, client: AsyncClient) -> int:
        if self.start.last is not None:
            return await from_tail(self.start.last)(client)
        return self.start.offset or 0

    def _summary(self, status: StatusResponse, response: AttachResponse) -> None:
        if not self.announce:
            return
        a = status.agent
        replay = max(0, response.stream_offset - self.last_offset)
        parts = [a.id, a.backend or "?", a.state]
        if a.task:
            parts.append(f"task {a.task}")
        if a.project:
            parts.append(f"project {a.project}")
        if response.screen is not None:
            parts.append(f"its screen as of offset {response.screen.offset}")
        else:
            parts.append(f"replaying {replay} event{'' if replay == 1 else 's'}")
        if response.truncated:
            parts.append("older events were pruned")
        self.note(" · ".join(parts))
        if self.interactive:
            ctrl_c = (
                "Ctrl-C twice: SIGINT to the agent"
                if self.interrupt_signals
                else "Ctrl-C interrupts"
            )
            self.note(f"type + Enter sends · {ctrl_c} · {self.detach_label} detaches")

    async def connected(self, client: AsyncClient) -> None:
        """Called after each attach, before its events (a hook for subclasses)."""

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

    async def _end(self, client: AsyncClient) -> Exit | None:
        """The stream says the agent ended. The exit status if the session ends here;
        None to keep following (the host runs another agent since, or a restart comes)."""
        try:
            info: AgentInfo | None = (await client.status()).agent
        except AgentHostError:
            info = None  # the host is gone already (--linger 0): the stream's word stands
        if info is not None and info.state not in FINAL_STATES:
            self.state = info.state  # an earlier run's end: the current agent runs
            self.on_change()
            return None
        if info is None:
            info = AgentInfo(id=self.agent_id, state=self.state, started_at=datetime.now(UTC))
        if not await self._restart_coming(info, host_gone=False):
            return self._ended(info)
        self._restart = info
        self.note(f"{render_end(info)}; the daemon will start it again", alarm=True)
        return None

    async def _restart_pending(self) -> AgentInfo | None:
        """No host yet: if the daemon is about to start one (a restart's backoff), how
        the last run ended, else None."""
        from agenthost.daemon.protocol import AgentStatus

        record = await daemon_record(self.home, self.agent_id, self.remote)
        if record is None or record.status not in (AgentStatus.SPAWNING, AgentStatus.RESTARTING):
            return None
        end = record.ended_at or datetime.now(UTC)
        info = AgentInfo(
            id=self.agent_id,
            state=record.state or "error",
            started_at=end,  # how long it ran is unknown here: as if not at all
            ended_at=end,
            exit_code=record.exit_code,
            signal=record.signal,
        )
        self.note(f"no host yet: {render_end(info)}; the daemon will start it again")
        return info

    async def _restart_coming(self, info: AgentInfo, *, host_gone: bool) -> bool:
        record = await daemon_record(self.home, self.agent_id, self.remote)
        return restart_coming(record, info, host_gone)

    def _ended(self, info: AgentInfo) -> Exit:
        failed = info.state != "done"
        self.note(render_end(info), alarm=failed)
        return Exit.AGENT_FAILED if failed else Exit.OK


def terminal_bytes(event: StreamEvent) -> bytes:
    """The bytes of a ``terminal`` event (ProtocolError when it carries none)."""
    return event_bytes({"data": event.data, "data_b64": event.data_b64})


async def daemon_record(
    home: Path | None, agent_id: str, remote: Remote | None = None
) -> DaemonAgent | None:
    """What the home's daemon knows of the agent; None without a daemon that answers,
    or when it does not know the agent (then nothing restarts it). With ``remote``:
    the daemon of that machine (``home`` there)."""
    from agenthost.daemon.client import DaemonClient, daemon_alive

    if remote is None and (home is None or not daemon_alive(home)):
        return None
    try:
        async with DaemonClient(
            home, connect_timeout=1.0, request_timeout=5.0, remote=remote
        ) as daemon:
            agents = await daemon.list()
    except AgentHostError:
        return None
    return next((a for a in agents if a.agent_id == agent_id), None)


def restart_coming(record: DaemonAgent | None, end: AgentInfo, host_gone: bool) -> bool:
    """Whether the daemon will start the agent again after the run that ended as
    ``end`` says.

    The daemon decides a moment after the agent's end (it first learns the exit status,
    then stops the lingering host); until its status shows the decision, the decision
    is predicted with the daemon's own policy functions from the same facts. With
    ``host_gone`` (the session lost the host) a daemon that still says ``running`` has
    not noticed yet: the decision is still to come.
    """
    from agenthost.daemon.policy import Outcome, decide, is_failure
    from agenthost.daemon.protocol import AgentStatus

    if record is None:
        return False
    status = record.status
    if status in (AgentStatus.SPAWNING, AgentStatus.RESTARTING):
        return True
    if host_gone and status in (AgentStatus.RUNNING, AgentStatus.UNREACHABLE):
        return True
    undecided = (AgentStatus.RUNNING, AgentStatus.UNREACHABLE, AgentStatus.EXITED)
    if status not in undecided or not record.managed or record.spec is None:
        return False
    exit_code = record.exit_code if end.exit_code is None else end.exit_code
    signal = end.signal or record.signal
    failure = is_failure(
        Outcome.EXITED,
        exit_code=exit_code,
        state=end.state,
        signal=signal,
        stop_requested=end.stop_requested is True,
    )
    ran_for = (end.ended_at - end.started_at).total_seconds() if end.ended_at else 0.0
    decision = decide(
        record.spec.restart, failure=failure, restarts=record.restarts, ran_for=ran_for
    )
    return decision.restart
