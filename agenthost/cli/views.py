"""What the scripting verbs print, from the JSON-shaped dicts of the protocol.

One renderer for both ways a verb runs: the click commands pass their models'
``model_dump(mode="json")``, the fast path (:mod:`agenthost.cli.fast`) the payload as
the host sent it. This module imports neither click nor pydantic (nor ``typing`` at
run time): the fast path's start-up is what it costs. Text from a host or an agent is
escaped here (:func:`agenthost.textsafe.escape`) before our styling goes around it.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime

from agenthost.textsafe import escape, escape_json
from agenthost.timefmt import uptime as uptime
from agenthost.timefmt import when as when

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Json = Mapping[str, Any]


def use_color(stream: Any = None) -> bool:
    """Colours only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


_ANSI = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class Style:
    """ANSI styling that turns itself off when colours are not wanted (the same bytes
    as ``click.style``, without importing click)."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _s(self, text: str, name: str) -> str:
        return f"\x1b[{_ANSI[name]}m{text}\x1b[0m" if self.color else text

    def dim(self, text: str) -> str:
        return self._s(text, "dim")

    def bold(self, text: str) -> str:
        return self._s(text, "bold")

    def red(self, text: str) -> str:
        return self._s(text, "red")

    def green(self, text: str) -> str:
        return self._s(text, "green")

    def yellow(self, text: str) -> str:
        return self._s(text, "yellow")

    def cyan(self, text: str) -> str:
        return self._s(text, "cyan")


def json_text(obj: object) -> str:
    """One JSON document as ``--json`` prints it: readable (non-ASCII text as it is),
    with the characters a terminal acts on written as ``\\uXXXX`` escapes."""
    import json

    return escape_json(json.dumps(obj, indent=2, default=str, ensure_ascii=False))


def local_time(value: str | datetime) -> str:
    """A timestamp in this machine's time zone, as the views show it."""
    return when(value).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def state_text(state: str, style: Style) -> str:
    """An agent's state, coloured by what it asks of a person."""
    state = escape(state)
    if state == "error":
        return style.red(state)
    if state in ("running", "waiting", "paused"):
        return style.yellow(state)
    if state == "idle":
        return style.green(state)
    return state


def budget_text(budget: Json, style: Style) -> str:
    """An agent's budget: its limits, what it spent, and why it is over (in red)."""
    from agenthost.money import usd

    limits = [usd(budget["usd"]) if budget.get("usd") is not None else None]
    limits.append(f"{budget['tokens']} tokens" if budget.get("tokens") is not None else None)
    text = ", ".join(x for x in limits if x) or "no limit"
    spent_usd, spent_tokens = budget.get("spent_usd", 0.0), budget.get("spent_tokens", 0)
    text += f" (spent {usd(spent_usd)}, {spent_tokens} tokens)"
    exceeded = budget.get("exceeded")
    return style.red(f"{text}: {escape(exceeded)}") if exceeded else text


def status_text(status: Json, style: Style, branch: str | None = None) -> str:
    """``agenthost status`` as aligned key: value lines, from a ``host.status`` payload.
    ``branch``: the agent runs in a worktree agenthost made for it (``run
    --worktree``), on this branch ("" if it cannot be told); None: its directory is a
    plain one (``cwd``)."""
    a, h = status["agent"], status["host"]
    if branch is None:
        place = ("cwd", escape(a.get("worktree") or "-"))
    else:
        on = f" (branch {escape(branch)})" if branch else ""
        place = ("worktree", escape(a.get("worktree") or "") + on)
    terminal = a.get("terminal")
    rows: list[tuple[str, str]] = [
        ("agent", escape(a["id"])),
        ("state", state_text(a["state"], style)),
        ("backend", escape(a.get("backend") or "")),
        *([("terminal", f"{terminal['cols']}x{terminal['rows']}")] if terminal else []),
        ("pid", str(a["pid"]) if a.get("pid") else "-"),
        ("project", escape(a.get("project") or "-")),
        ("task", escape(a.get("task") or "-")),
        ("description", escape(a.get("description") or "-")),
        place,
        ("sandbox", escape(a["sandbox"]) if a.get("sandbox") else "off (unconfined)"),
        ("started", local_time(a["started_at"])),
        ("uptime", uptime(a["started_at"], a.get("ended_at"))),
    ]
    if a.get("exit_code") is not None:
        signal = f" ({escape(a['signal'])})" if a.get("signal") else ""
        rows.append(("exit code", f"{a['exit_code']}{signal}"))
    for key in ("session_id", "model", "turns"):
        value = a.get(key)
        if value is not None:
            rows.append((key.replace("_", " "), escape(str(value))))
    if a.get("cost_usd") is not None:
        from agenthost.money import usd

        rows.append(("cost", usd(a["cost_usd"])))
    if a.get("budget") is not None:  # (1.4)
        rows.append(("budget", budget_text(a["budget"], style)))
    if a.get("paused_until") is not None:  # (1.4)
        reason = escape(a.get("paused_reason") or "")
        rows.append(("paused until", f"{local_time(a['paused_until'])}: {reason}"))
    if a.get("last_error"):
        rows.append(("last error", style.red(escape(a["last_error"]))))
    rows += [
        ("host pid", str(h["pid"])),
        ("host version", escape(f"{h['version']} (protocol {h['protocol_version']})")),
        ("socket", escape(h["socket_path"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in rows)


def ping_text(agent_id: str, ping: Json) -> str:
    """``agenthost ping``: the host's version, protocol and uptime."""
    said = f"host {ping['version']}, protocol {ping['protocol_version']}, up {ping['uptime']}"
    return f"{agent_id}: {escape(said)}"


def sent_text(agent_id: str, sent: Json) -> str:
    """``agenthost send``: where the host recorded the message."""
    note = " (duplicate: already sent)" if sent.get("duplicate") else ""
    # a 1.0 host as first published does not report where it recorded the input
    where = " (the host reports no offset)"
    if sent.get("offset") is not None:
        where = f" at offset {sent['offset']}"
    return f"sent to {agent_id}{where}{note}"


def responded_text(agent_id: str, answer: Json, for_session: bool) -> str:
    """``agenthost respond``: what was answered."""
    done = "allowed" if answer["behavior"] == "allow" else "denied"
    rest = " (and the same for the rest of the session)" if for_session else ""
    return f"{done} {escape(answer['request_id'])} for {agent_id}{rest}"


def fit(text: str, width: int | None) -> str:
    """``text`` (escaped already) on one line, cut to ``width`` terminal columns (wide
    characters count two) with an ellipsis; unchanged when ``width`` is None (not a
    terminal). Never for what a person is asked to approve (its approval_text())."""
    if "\n" in text or "\t" in text or "\r" in text:
        text = " ".join(text.split())
    if width is None:
        return text
    if _plain(text):
        return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
    from wcwidth import wcswidth, wcwidth  # (not for serve: only what prints tables)

    if wcswidth(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        w = max(wcwidth(char), 0)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "…"


def _plain(text: str) -> bool:
    # printable ASCII: one column a character, as wcwidth says, without its ~15 ms import
    return text.isascii() and text.isprintable()


def columns(text: str) -> int:
    """The terminal columns of one line of escaped text (wide characters count two; never
    less than its characters, as wcwidth says -1 for what it cannot tell)."""
    if _plain(text):
        return len(text)
    from wcwidth import wcswidth

    return max(wcswidth(text), len(text))


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], cut: Mapping[str, int] | None = None
) -> str:
    """A plain aligned text table of ``rows`` of raw text (an agent's included): each
    cell escaped, a newline in a cell going on on the next line in its column. The
    cells of the columns of ``cut`` (header: width) are put on one line and cut to that
    width."""
    limits = [(cut or {}).get(h) for h in headers]

    def lines_of(cell: str, limit: int | None) -> list[str]:
        text = escape(cell, "\n")
        return [fit(text, limit)] if limit is not None else text.split("\n")

    def pad(line: str, w: int) -> str:
        return line + " " * (w - columns(line))

    grid = [[lines_of(c, n) for c, n in zip(row, limits, strict=True)] for row in rows]
    widths = [len(h) for h in headers]
    for cells in grid:
        for i, cell in enumerate(cells):
            widths[i] = max(widths[i], *map(columns, cell))
    lines = ["  ".join(pad(h.upper(), w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for cells in grid:
        for n in range(max(len(cell) for cell in cells)):
            line = [cell[n] if n < len(cell) else "" for cell in cells]
            lines.append("  ".join(map(pad, line, widths)).rstrip())
    return "\n".join(lines)


def pending_text(requests: Sequence[Json]) -> str | None:
    """``agenthost pending``: the requests as a table, the command last and whole (it is
    what a person approves: it wraps, and a command of several lines goes on in its
    column); None when none waits."""
    from agenthost.approval import approval_text

    if not requests:
        return None
    headers = ["request", "tool", "input"]
    rows = [[r["request_id"], r["tool_name"]] for r in requests]
    if any(r.get("options") for r in requests):  # an ACP agent's own answers: --option
        headers.insert(2, "options")
        for row, r in zip(rows, requests, strict=True):
            row.append(" ".join(f"{o['id']}({o['kind']})" for o in r.get("options") or []))
    for row, r in zip(rows, requests, strict=True):
        row.append(approval_text(r.get("tool_input", ""), r.get("input") or {}))
    return table(headers, rows)
