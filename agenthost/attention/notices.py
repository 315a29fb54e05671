"""When a notice is due, and what it says. Sans-IO: no event loop, an injected clock.

The daemon feeds :class:`Notices` what it learns of each agent: the events of its
stream (:meth:`Notices.event`), its exit (:meth:`Notices.exited`) and its host's end
(:meth:`Notices.gone`); each returns the notices due at once, and :meth:`Notices.due`
those whose delay has passed (the daemon asks at :meth:`Notices.next_due`).

- ``waiting``: an *episode* begins when the state becomes ``waiting`` and ends when it
  leaves it. One notice per episode, ``delay`` seconds after it began, and only if it
  is still open: a request answered at the terminal within the delay notifies nobody.
- ``failed``: a turn failed: the agent reported it (an ``error`` event marked
  ``turn_failed``) or its result has ``is_error``; one per turn (a turn begins when the
  state becomes ``running`` and ends at ``idle``, ``done`` or ``error``). An error the
  host itself saw (the agent's exit, a failed write to it) is not a failed turn: an
  agent killed mid-turn gets one notice, ``died``, not ``failed`` and then ``died``.
- ``died``: the agent exited in state ``error`` without a stop being asked, or its host
  vanished; one per host run.
- ``finished`` (opt-in): ``running`` -> ``idle``.

Old events (a daemon reattaching replays what it missed) notify nobody: only events
stamped within :func:`window` of now count. Each notice has a :attr:`Notice.key`
(agent, epoch, offset of the event that opened it, kind) that the ledger keeps, so a
daemon restarted mid-episode does not notify twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from agenthost.attention.links import Decision, new_link, sign, url
from agenthost.models import StreamEvent
from agenthost.timefmt import format_datetime

if TYPE_CHECKING:  # not at run time: the daemon imports this module before it is ready
    from agenthost.config import AgentNotify, NoticeKind

NOTICE_VERSION: Final = 1
SLACK: Final = 60.0
"""Seconds added to twice the delay to make the freshness window of replayed events."""

_WATCHED: Final = frozenset(
    {"state", "error", "result", "permission_request", "permission_response", "governance"}
)
_TURN_STATES: Final = frozenset({"starting", "running", "waiting"})

Settings = Callable[[str, str], "AgentNotify"]
"""What applies to an agent (id, project): ``NotifyConfig.for_agent`` of the config."""


def window(delay: float) -> float:
    """How old an event may be and still notify: a replayed older one does not."""
    return 2 * delay + SLACK


@dataclass(frozen=True, slots=True)
class Asked:
    """One pending permission request, as a notice names it."""

    request_id: str
    tool: str
    summary: str
    created_at: str
    """The request's ``created_at`` as RFC 3339 (what an approval link binds)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell a person about one agent."""

    kind: NoticeKind
    agent_id: str
    project: str
    title: str
    message: str
    at: float
    """When it happened (the event's time), Unix seconds."""
    epoch: str = ""
    offset: int = 0
    """The offset of the event that opened it (0 for a host's end)."""
    requests: tuple[Asked, ...] = ()
    state: str = ""
    approve_url: str | None = None
    deny_url: str | None = None
    page_url: str | None = None
    test: bool = False

    @property
    def key(self) -> str:
        """What the ledger dedupes on: the same key is never sent twice."""
        return f"{self.agent_id}|{self.epoch}|{self.offset}|{self.kind}"

    def to_json(self) -> dict[str, Any]:
        """The notice as the webhook and command channels send it."""
        return {
            "version": NOTICE_VERSION,
            "kind": self.kind,
            "agent_id": self.agent_id,
            "project": self.project,
            "title": self.title,
            "message": self.message,
            "at": _iso(self.at),
            "state": self.state,
            "epoch": self.epoch,
            "offset": self.offset,
            "requests": [
                {
                    "request_id": r.request_id,
                    "tool": r.tool,
                    "summary": r.summary,
                    "created_at": r.created_at,
                }
                for r in self.requests
            ],
            "approve_url": self.approve_url,
            "deny_url": self.deny_url,
            "url": self.page_url,
            "test": self.test,
        }


def with_links(
    notice: Notice, public_url: str | None, key: bytes, *, now: float, ttl: float
) -> Notice:
    """The notice with its agent's page and, for the oldest pending request, Approve and
    Deny links under ``public_url`` (unchanged without one)."""
    if not public_url:
        return notice
    base = public_url.rstrip("/")
    page = f"{base}/#/agent/{notice.agent_id}"
    if notice.kind != "waiting" or not notice.requests:
        return replace(notice, page_url=page)
    oldest = notice.requests[0]

    def link(decision: Decision) -> str:
        made = new_link(
            notice.agent_id, oldest.request_id, oldest.created_at, decision, now=now, ttl=ttl
        )
        return url(base, sign(made, key))

    return replace(notice, page_url=page, approve_url=link("allow"), deny_url=link("deny"))


def sample_notice(now: float) -> Notice:
    """The notice ``agenthost notify test`` sends."""
    return Notice(
        "waiting",
        "notify-test",
        "",
        "agenthost: test notice",
        "This is a test of the notification channels of config.toml.",
        now,
        test=True,
    )


@dataclass(slots=True)
class _Agent:
    """What is tracked of one agent."""

    project: str = ""
    epoch: str = ""
    state: str = ""
    pending: dict[str, Asked] = field(default_factory=dict)
    episode: tuple[int, float] | None = None
    """The open waiting episode: (offset of its state event, its time)."""
    due: float | None = None
    """When the open episode's notice is due (None: none will be sent)."""
    failed_turn: bool = False
    died: bool = False


class Notices:
    """The notices of every agent the daemon follows; ``clock`` is Unix time."""

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.clock = clock
        self._agents: dict[str, _Agent] = {}

    def _agent(self, agent_id: str) -> _Agent:
        return self._agents.setdefault(agent_id, _Agent())

    def forget(self, agent_id: str) -> None:
        """The daemon no longer follows ``agent_id``."""
        self._agents.pop(agent_id, None)

    def attached(self, agent_id: str, epoch: str, project: str, state: str) -> None:
        """The daemon (re)attached to the agent's host: its epoch, project and state."""
        agent = self._agent(agent_id)
        if epoch != agent.epoch:
            agent.pending.clear()
            agent.episode = agent.due = None
            agent.died = agent.failed_turn = False
        agent.epoch, agent.project = epoch, project or agent.project
        agent.state = agent.state or state

    def event(self, event: StreamEvent) -> list[Notice]:
        """One stream event; the notices it makes due now."""
        if event.type not in _WATCHED:  # output, chat: most events, nothing to decide
            return []
        agent = self._agent(event.agent_id)
        at = event.timestamp.timestamp()
        setting = self.settings(event.agent_id, agent.project)
        fresh = self.clock() - at <= window(setting.delay)
        out: list[Notice] = []
        if event.type == "permission_request" and event.request is not None:
            r = event.request
            # the host's own spelling of created_at: what an approval link binds
            agent.pending[r.request_id] = Asked(
                r.request_id, r.tool_name, r.tool_input, format_datetime(r.created_at)
            )
        elif event.type == "permission_response" and event.decision is not None:
            agent.pending.pop(event.decision.request_id, None)
        elif event.type == "state" and event.state:
            out += self._state(agent, event, at, fresh, setting)
        elif _turn_failed(event):
            in_turn = agent.state in _TURN_STATES  # an error while idle is the agent's end
            if in_turn and not agent.failed_turn and fresh and "failed" in setting.events:
                what = event.error or _result_text(event.result) or "the turn ended with an error"
                out.append(self._notice(agent, event, "failed", f"failed: {_short(what)}", at))
            agent.failed_turn = True
        elif event.type == "governance" and event.governance is not None:
            # (1.4) over its budget, the agent is stopped until a person raises it
            g = event.governance
            if g.action == "budget_exceeded" and fresh and "failed" in setting.events:
                out.append(
                    self._notice(agent, event, "failed", f"over budget: {_short(g.reason)}", at)
                )
        return out

    def _state(
        self, agent: _Agent, event: StreamEvent, at: float, fresh: bool, setting: AgentNotify
    ) -> list[Notice]:
        before, now_state = agent.state, event.state or ""
        agent.state = now_state
        out: list[Notice] = []
        if now_state == "waiting" and before != "waiting":
            agent.episode = (event.offset, at)
            wanted = fresh and "waiting" in setting.events
            agent.due = at + setting.delay if wanted else None
        elif now_state != "waiting":
            agent.episode = agent.due = None
        if now_state == "running":
            agent.failed_turn = False
        if now_state in ("done", "error", "idle"):
            agent.pending.clear()
        if now_state == "idle" and before == "running" and fresh:
            if "finished" in setting.events:
                out.append(self._notice(agent, event, "finished", "finished its turn", at))
        return out

    def _notice(
        self, agent: _Agent, event: StreamEvent, kind: NoticeKind, what: str, at: float
    ) -> Notice:
        return _made(kind, event.agent_id, agent, what, at, event.offset)

    def due(self) -> list[Notice]:
        """The waiting notices whose delay has passed (each returned once)."""
        now = self.clock()
        out = []
        for agent_id, agent in self._agents.items():
            if agent.due is None or agent.due > now or agent.episode is None:
                continue
            agent.due = None
            if "waiting" not in self.settings(agent_id, agent.project).events:
                continue  # muted since
            out.append(self._waiting(agent_id, agent, agent.episode))
        return out

    def next_due(self) -> float | None:
        """When :meth:`due` has something next (None: nothing scheduled)."""
        times = [a.due for a in self._agents.values() if a.due is not None]
        return min(times) if times else None

    def _waiting(self, agent_id: str, agent: _Agent, episode: tuple[int, float]) -> Notice:
        asked = tuple(agent.pending.values())
        if asked:
            first = asked[0]
            what = f"asks to use {first.tool}: {_short(first.summary)}"
            more = f" (and {len(asked) - 1} more)" if len(asked) > 1 else ""
            message = f"{first.tool}: {first.summary}{more}"
        else:
            what = "waits for an answer"
            message = "The agent is waiting for input."
        notice = _made("waiting", agent_id, agent, what, episode[1], episode[0])
        return replace(notice, message=message, requests=asked, state="waiting")

    def exited(
        self,
        agent_id: str,
        *,
        state: str,
        exit_code: int | None,
        signal: str | None,
        stop_requested: bool,
        at: float,
    ) -> list[Notice]:
        """The agent exited (its host may linger): ``died`` if it ended in error
        unasked."""
        if state != "error" or stop_requested:
            return []
        how = f"signal {signal}" if signal else f"exit code {exit_code}"
        return self._died(agent_id, f"died ({how})", at)

    def gone(self, agent_id: str, *, lost: bool, stop_requested: bool, at: float) -> list[Notice]:
        """The agent's host ended; ``lost``: without the daemon seeing its agent end."""
        if not lost or stop_requested:
            return []
        return self._died(agent_id, "died: its host vanished", at)

    def _died(self, agent_id: str, what: str, at: float) -> list[Notice]:
        agent = self._agent(agent_id)
        agent.episode = agent.due = None
        setting = self.settings(agent_id, agent.project)
        if agent.died or "died" not in setting.events:
            return []
        agent.died = True
        if self.clock() - at > window(setting.delay):
            return []
        return [_made("died", agent_id, agent, what, at, 0)]


def _turn_failed(event: StreamEvent) -> bool:
    """Whether ``event`` says a turn failed: the failure's ``error`` event (an adapter's
    ``turn_failed``), or a result that is an error and not an interrupt."""
    if event.type == "error":
        return (event.model_extra or {}).get("turn_failed") is True
    if event.type != "result" or not event.result:
        return False
    return event.result.get("is_error") is True and event.result.get("interrupted") is not True


def _iso(ts: float) -> str:
    """RFC 3339 without a zero fraction (``...T08:00:01Z``): the notice's ``at``."""
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _made(
    kind: NoticeKind, agent_id: str, agent: _Agent, what: str, at: float, offset: int
) -> Notice:
    """A notice titled ``<agent> (<project>) <what>``, with ``what`` as a sentence for
    its message."""
    where = f" ({agent.project})" if agent.project else ""
    return Notice(
        kind,
        agent_id,
        agent.project,
        f"{agent_id}{where} {what}",
        what[:1].upper() + what[1:],
        at,
        agent.epoch,
        offset,
        state=agent.state,
    )


def _short(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _result_text(result: dict[str, Any] | None) -> str:
    value = (result or {}).get("result")
    return value if isinstance(value, str) else ""
