"""Human-readable rendering of events, history and status. Pure functions of data."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

import click
from wcwidth import wcswidth, wcwidth

from agenthost.protocol import AgentInfo, Budget, HistoryEntry, StatusResponse, StreamEvent
from agenthost.timefmt import go_duration, short_duration

RESULT_LINES = 3


class Style:
    """ANSI styling that turns itself off when colours are not wanted."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _s(self, text: str, **kw: object) -> str:
        return click.style(text, **kw) if self.color else text  # type: ignore[arg-type]

    def dim(self, text: str) -> str:
        return self._s(text, dim=True)

    def bold(self, text: str) -> str:
        return self._s(text, bold=True)

    def red(self, text: str) -> str:
        return self._s(text, fg="red")

    def green(self, text: str) -> str:
        return self._s(text, fg="green")

    def yellow(self, text: str) -> str:
        return self._s(text, fg="yellow")

    def cyan(self, text: str) -> str:
        return self._s(text, fg="cyan")


def fit(text: str, width: int | None) -> str:
    """``text`` on one line, cut to ``width`` terminal columns (wide characters count
    two) with an ellipsis; unchanged when ``width`` is None (not a terminal)."""
    if "\n" in text or "\t" in text or "\r" in text:
        text = " ".join(text.split())
    if width is None or wcswidth(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        w = max(wcwidth(char), 0)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "…"


def fold(
    text: str, lines: int = RESULT_LINES, indent: str = "    ", width: int | None = None
) -> str:
    """The first ``lines`` lines of ``text`` (each fitted to the terminal), and how many
    more there are."""
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
        return style.cyan("› ") + style.bold(entry.content or "")
    if entry.role == "assistant":
        text = entry.content or ""
        extra = entry.model_extra or {}
        if entry.is_error:  # a failed turn: the error, as the agent reported it
            return style.red("✗ " + text)
        if extra.get("interrupted") is True:
            return style.yellow("⏹ " + text)
        if extra.get("thought") is True:  # an ACP agent's reasoning, not its answer
            return style.dim("✻ " + text)
        aborted = extra.get("aborted") is True
        return style.dim(text + " (interrupted)") if aborted else text
    if entry.role == "permission":  # the record of a decision, beside the tool call
        allowed = (entry.model_extra or {}).get("decision", {}).get("behavior") == "allow"
        text = f"  ⚖ {entry.tool_name or 'tool'}: {entry.content or ''}"
        return style.green(text) if allowed else style.yellow(text)
    if entry.role == "governance":  # (1.4) a budget crossed or changed, a pause, a resume
        return style.yellow(f"  ⚑ {entry.content or ''}")
    if entry.tool_result is not None:
        text = fold(entry.tool_result or "(no output)", width=width)
        mark = "  ⎿ "
        return style.red(mark + text) if entry.is_error else style.dim(mark + text)
    name = entry.tool_name or "tool"
    room = None if width is None else max(8, width - wcswidth(name) - 4)
    summary = fit(entry.tool_input or "", room)
    return style.green("● ") + style.bold(name) + style.dim(f"({summary})")


def render_result(result: dict[str, object], style: Style) -> str:
    """The end of a turn: outcome, duration, cost, tokens."""
    parts = []
    duration = result.get("duration_ms")
    if isinstance(duration, int | float):
        parts.append(short_duration(duration / 1000))
    cost = result.get("cost_usd")
    if isinstance(cost, int | float):
        parts.append(f"${cost:.4f}")
    usage = result.get("usage")
    if isinstance(usage, dict):
        tin, tout = usage.get("input_tokens"), usage.get("output_tokens")
        if isinstance(tin, int) and isinstance(tout, int):
            parts.append(f"{tin} in / {tout} out tokens")
    if was_interrupted(result):
        head = style.yellow("⏹ turn interrupted")
    elif result.get("is_error") is True:
        head = style.red("✗ turn failed")
    else:
        head = style.green("✓ turn done")
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
    return style.red(f"! {text}")


def render_end(agent: AgentInfo) -> str:
    """The agent has exited: how, and its final state."""
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

    def render(self, event: StreamEvent) -> str | None:
        """The lines for one event, or None when it shows nothing."""
        error, self._error = self._error, None
        if event.type == "error":
            self._error = event.error
        elif event.type == "chat_entry" and event.chat_entry is not None:
            entry = event.chat_entry
            # a failed turn's history entry repeats the error event just shown, and an
            # interrupted one the result line that follows
            if entry.role == "assistant" and (
                (entry.is_error and entry.content == error)
                or (entry.model_extra or {}).get("interrupted") is True
            ):
                return None
        return self._render(event)

    def _render(self, event: StreamEvent) -> str | None:
        s = self.style
        if event.type == "output":
            data = event.data or ""
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
            return s.dim("entry│ ") + event.data if event.data else None
        if event.type == "state":
            state = event.state or "?"
            if state == "error":
                return s.red(f"· {state}")
            return s.dim(f"· {state}")
        if event.type == "error":
            return render_error(event, s)
        if event.type == "result" and event.result is not None:
            return render_result(event.result, s)
        if event.type == "permission_request" and event.request is not None:
            r = event.request
            room = None if self.width is None else max(8, self.width - len(r.tool_name) - 15)
            head = s.yellow(f"? {r.tool_name} wants to run: ") + s.bold(fit(r.tool_input, room))
            if self.interactive:
                return head + s.dim(
                    "\n  answer below: y (allow), n [reason] (deny) or a (allow for this session)"
                )
            return head + s.dim(
                f"\n  answer: agenthost respond {event.agent_id} {r.request_id} allow|deny"
            )
        if event.type == "permission_response" and event.decision is not None:
            d = event.decision
            if d.actor is not None:
                return None  # a 1.3 host records it as a `permission` entry next: shown once
            words = {"allow": "allowed", "deny": "denied", "cancelled": "withdrawn"}
            text = f"· {words.get(d.behavior, d.behavior)}"
            return s.dim(text + (f": {d.message}" if d.message else ""))
        return None  # an event type this version does not know


def uptime_of(info: AgentInfo) -> str:
    """How long the agent has run (or ran)."""
    end = info.ended_at.timestamp() if info.ended_at else time.time()
    return go_duration(end - info.started_at.timestamp())


def render_status(status: StatusResponse, style: Style) -> str:
    """``agenthost status`` as aligned key: value lines."""
    a, h = status.agent, status.host
    rows: list[tuple[str, str]] = [
        ("agent", a.id),
        ("state", _state(a.state, style)),
        ("backend", a.backend or ""),
        ("pid", str(a.pid) if a.pid else "-"),
        ("project", a.project or "-"),
        ("task", a.task or "-"),
        ("description", a.description or "-"),
        ("worktree", a.worktree),
        ("started", _local(a.started_at)),
        ("uptime", uptime_of(a)),
    ]
    if a.exit_code is not None:
        rows.append(("exit code", f"{a.exit_code}" + (f" ({a.signal})" if a.signal else "")))
    for key in ("session_id", "model", "turns"):
        value = getattr(a, key)
        if value is not None:
            rows.append((key.replace("_", " "), str(value)))
    if a.cost_usd is not None:
        rows.append(("cost", f"${a.cost_usd:.4f}"))
    if a.budget is not None:  # (1.4)
        rows.append(("budget", _budget(a.budget, style)))
    if a.paused_until is not None:  # (1.4)
        rows.append(("paused until", f"{_local(a.paused_until)}: {a.paused_reason or ''}"))
    if a.last_error:
        rows.append(("last error", style.red(a.last_error)))
    rows += [
        ("host pid", str(h.pid)),
        ("host version", f"{h.version} (protocol {h.protocol_version})"),
        ("socket", h.socket_path),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in rows)


def _budget(budget: Budget, style: Style) -> str:
    limits = [f"${budget.usd:.2f}" if budget.usd is not None else None]
    limits.append(f"{budget.tokens} tokens" if budget.tokens is not None else None)
    text = ", ".join(x for x in limits if x) or "no limit"
    text += f" (spent ${budget.spent_usd:.4f}, {budget.spent_tokens} tokens)"
    return style.red(f"{text}: {budget.exceeded}") if budget.exceeded else text


def _state(state: str, style: Style) -> str:
    if state == "error":
        return style.red(state)
    if state in ("running", "waiting", "paused"):
        return style.yellow(state)
    if state == "idle":
        return style.green(state)
    return state


def _local(value: datetime) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table."""

    def width(cell: str) -> int:
        return max(wcswidth(cell), len(cell))  # wcswidth is -1 for control characters

    def pad(cell: str, w: int) -> str:
        return cell + " " * (w - width(cell))

    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], width(cell))
    lines = ["  ".join(pad(h.upper(), w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(pad(c, w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)
