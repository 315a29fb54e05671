"""Human-readable rendering of events, history and status. Pure functions of data.

What an agent said (and any text from a host) is escaped here, with
:func:`agenthost.textsafe.escape`, before our own styling is put around it: a function
that takes a model returns text a terminal may be sent as it is. :func:`fit` and
:func:`fold` lay out text that is escaped already; :func:`table` escapes its cells.
"""

from __future__ import annotations

import math

from wcwidth import wcswidth

from agenthost.cli.views import Style as Style
from agenthost.cli.views import fit as fit
from agenthost.cli.views import status_text, uptime
from agenthost.cli.views import table as table
from agenthost.money import usd
from agenthost.textsafe import LINES, escape
from agenthost.timefmt import short_duration

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the models cost ~70 ms to import: only where a command uses them)
    from agenthost.protocol import (
        AgentInfo,
        HistoryEntry,
        PermissionRequest,
        StatusResponse,
        StreamEvent,
    )

RESULT_LINES = 3
DONE, FAILED, INTERRUPTED = "✓ turn done", "✗ turn failed", "⏹ turn interrupted"
"""How a turn ended, in the words the page uses too (docs/agents.md): a failed turn
reads ``✗ turn failed: <the agent's error text>``, its text once."""


def fold(
    text: str, lines: int = RESULT_LINES, indent: str = "    ", width: int | None = None
) -> str:
    """The first ``lines`` lines of ``text`` (escaped already; each fitted to the
    terminal), and how many more there are."""
    parts = text.rstrip("\n").split("\n")
    room = None if width is None else max(8, width - len(indent))
    shown = [fit(line, room) for line in parts[:lines]]
    out = shown[0] if shown else ""
    for line in shown[1:]:
        out += "\n" + indent + line
    if len(parts) > lines:
        out += f"\n{indent}… (+{len(parts) - lines} lines)"
    return out


def render_entry(entry: HistoryEntry, style: Style, width: int | None = None) -> str:
    """One chat entry as a person reads it: a tool call is one line, a result a few."""
    if entry.role == "user":
        return style.cyan("› ") + style.bold(escape(entry.content or "", LINES))
    if entry.role == "assistant":
        text = escape(entry.content or "", LINES)
        extra = entry.model_extra or {}
        if entry.is_error:  # a failed turn: the error, as the agent reported it
            return style.red(f"{FAILED}: {text}")
        if extra.get("interrupted") is True:
            return style.yellow("⏹ " + text)
        if extra.get("thought") is True:  # an ACP agent's reasoning, not its answer
            return style.dim("✻ " + text)
        aborted = extra.get("aborted") is True
        return style.dim(text + " (interrupted)") if aborted else text
    if entry.role == "permission":  # the record of a decision, beside the tool call
        allowed = (entry.model_extra or {}).get("decision", {}).get("behavior") == "allow"
        text = escape(f"{entry.tool_name or 'tool'}: {entry.content or ''}")
        return style.green(f"  ⚖ {text}") if allowed else style.yellow(f"  ⚖ {text}")
    if entry.role == "governance":  # (1.4) a budget crossed or changed, a pause, a resume
        return style.yellow(f"  ⚑ {escape(entry.content or '')}")
    if entry.tool_result is not None:
        text = fold(escape(entry.tool_result or "(no output)", LINES), width=width)
        mark = "  ⎿ "
        return style.red(mark + text) if entry.is_error else style.dim(mark + text)
    name = escape(entry.tool_name or "tool")
    room = None if width is None else max(8, width - wcswidth(name) - 4)
    summary = fit(escape(entry.tool_input or "", LINES), room)
    return style.green("● ") + style.bold(name) + style.dim(f"({summary})")


def render_request(
    request: PermissionRequest, agent_id: str, style: Style, *, interactive: bool
) -> str:
    """A permission request: the tool, and the command it asks to run, whole (lines
    after the first indented), and how to answer."""
    tool = escape(request.tool_name)
    command = escape(request.approval_text(), LINES).replace("\n", "\n    ")
    head = style.yellow(f"? {tool} wants to run: ") + style.bold(command)
    if interactive:
        return head + style.dim(
            "\n  answer below: y (allow), n [reason] (deny) or a (allow for this session)"
        )
    answer = escape(f"agenthost respond {agent_id} {request.request_id} allow|deny")
    return head + style.dim(f"\n  answer: {answer}")


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None  # type: ignore[arg-type]


def turn_figures(result: dict[str, object]) -> list[str]:
    """What a turn's result says it took: its duration, its cost and its tokens (this
    turn's; the session's total cost, labelled, from an agent that reports only that)."""
    parts = []
    duration = _number(result.get("duration_ms"))
    if duration is not None:
        parts.append(short_duration(duration / 1000))
    turn_cost, total = _number(result.get("turn_cost_usd")), _number(result.get("cost_usd"))
    if turn_cost is not None:
        parts.append(usd(turn_cost))
    usage = result.get("usage")
    if isinstance(usage, dict):
        tin, tout = usage.get("input_tokens"), usage.get("output_tokens")
        if isinstance(tin, int) and isinstance(tout, int):
            parts.append(f"{tin} in / {tout} out tokens")
    if turn_cost is None and total is not None:
        parts.append(f"total {usd(total)}")
    return parts


def render_result(result: dict[str, object], style: Style, failure: str | None = None) -> str:
    """The end of a turn: how it ended, then its duration, cost and tokens.
    ``failure``: the text of the turn's failure, reported before its result."""
    parts = turn_figures(result)
    if was_interrupted(result):
        head = style.yellow(INTERRUPTED)
    elif failure is not None:
        head = style.red(f"{FAILED}: {escape(failure, LINES)}")
    elif result.get("is_error") is True:
        head = style.red(FAILED)
    else:
        head = style.green(DONE)
    return head + (style.dim(" · " + " · ".join(parts)) if parts else "")


def was_interrupted(result: dict[str, object]) -> bool:
    """Whether a turn's result says an interrupt ended it (``interrupted``; before that
    field existed: Claude Code's ``aborted_*`` terminal reasons, Codex's subtype)."""
    if result.get("interrupted") is True:
        return True
    reason = result.get("terminal_reason")
    return result.get("subtype") == "interrupted" or (
        isinstance(reason, str) and reason.startswith("aborted")
    )


def render_error(event: StreamEvent, style: Style) -> str:
    """An ``error`` event: the message, and the model API's HTTP status when known."""
    text = event.error or "error"
    status = (event.model_extra or {}).get("http_status")
    if isinstance(status, int) and str(status) not in text:
        text += f" (HTTP {status})"
    return style.red(f"! {escape(text, LINES)}")


def render_end(agent: AgentInfo) -> str:
    """The agent has exited: how, and its final state (not escaped: a line for
    :meth:`agenthost.cli.session.AttachSession.note`, which escapes)."""
    if agent.signal:
        how = f"was killed by {agent.signal}"
    elif agent.exit_code is not None:
        how = f"exited with code {agent.exit_code}"
    else:
        how = "ended"
    return f"the agent {how} (state {agent.state})"


class EventRenderer:
    """Turns stream events into lines for a terminal.

    ``structured``: the agent prints a JSON protocol on stdout (demo, Claude Code,
    Codex), so raw stdout lines are hidden (their content is shown as chat entries)
    unless ``raw`` is set. ``width``: the terminal's width, to keep one-line items on
    one line (None: do not cut). ``interactive``: permission requests are answered in
    this terminal (otherwise the line says how to answer them).
    """

    def __init__(
        self,
        style: Style,
        *,
        structured: bool,
        raw: bool = False,
        width: int | None = None,
        interactive: bool = False,
    ) -> None:
        self.style = style
        self.structured = structured
        self.raw = raw
        self.width = width
        self.interactive = interactive
        self._error: str | None = None  # the text of an error event just shown
        self._failure: str | None = None  # this turn's failure, to show with its result

    def render(self, event: StreamEvent) -> str | None:
        """The lines for one event, or None when it shows nothing.

        A failed turn is reported as an ``error`` event marked ``turn_failed``, then
        the same text as an ``is_error`` history entry, then the turn's ``result``:
        it is shown once, on the result's line (``✗ turn failed: TEXT · 1.2s ·
        …``), or before the next state or message if no result comes. An error
        event of a host older than the mark is shown as it comes (``! TEXT``)."""
        error, self._error = self._error, None
        if event.type == "error" and (event.model_extra or {}).get("turn_failed") is True:
            self._failure = event.error or ""
            return None
        if event.type == "error":
            self._error = event.error
        elif event.type == "result" and event.result is not None:
            failure, self._failure = self._failure, None
            return render_result(event.result, self.style, failure)
        elif event.type == "chat_entry" and event.chat_entry is not None:
            entry = event.chat_entry
            # a failed turn's history entry repeats the error event, and an interrupted
            # one the result line that follows
            if entry.role == "assistant" and (
                (entry.is_error and entry.content in (error, self._failure))
                or (entry.model_extra or {}).get("interrupted") is True
            ):
                return None
        text = self._render(event)
        if self._failure is not None and (
            event.type == "state"
            or (event.chat_entry is not None and event.chat_entry.role == "user")
        ):  # the turn is over without a result (or the next one begins): say how it ended
            failed = self.style.red(f"{FAILED}: {escape(self._failure, LINES)}")
            self._failure = None
            text = failed if text is None else f"{failed}\n{text}"
        return text

    def _render(self, event: StreamEvent) -> str | None:
        s = self.style
        if event.type == "output":
            data = escape(event.data or "", LINES)
            if event.stream == "stderr":
                return s.dim("stderr│ ") + data
            if self.structured and not self.raw:
                return None
            return data
        if event.type == "chat_entry":
            if event.chat_entry is not None:
                return render_entry(event.chat_entry, s, self.width)
            # an entry of a shape this client does not know (a host of 1.0 as first
            # published): the decoder put its JSON in ``data``; show it, not nothing
            return s.dim("entry│ ") + escape(event.data) if event.data else None
        if event.type == "state":
            state = escape(event.state or "?")
            if state == "error":
                return s.red(f"· {state}")
            return s.dim(f"· {state}")
        if event.type == "error":
            return render_error(event, s)
        if event.type == "permission_request" and event.request is not None:
            return render_request(event.request, event.agent_id, s, interactive=self.interactive)
        if event.type == "permission_response" and event.decision is not None:
            d = event.decision
            if d.actor is not None:
                return None  # a 1.3 host records it as a `permission` entry next: shown once
            words = {"allow": "allowed", "deny": "denied", "cancelled": "withdrawn"}
            text = f"· {words.get(d.behavior, d.behavior)}"
            return s.dim(escape(text + (f": {d.message}" if d.message else "")))
        return None  # an event type this version does not know


def uptime_of(info: AgentInfo) -> str:
    """How long the agent has run (or ran)."""
    return uptime(info.started_at, info.ended_at)


def render_status(status: StatusResponse, style: Style, branch: str | None = None) -> str:
    """``agenthost status`` as aligned key: value lines (:func:`status_text`, which the
    fast path calls with the host's payload as it came)."""
    return status_text(status.model_dump(mode="json"), style, branch)
