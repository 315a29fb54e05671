"""Usage limits, sans-IO: when a limit resets, whether to pause for it, and what to tell
the agent when it resumes.

What the agents say (tests/e2e/CLAUDE_FINDINGS.md and CODEX_FINDINGS.md, observed with
the real CLIs against fake APIs):

* Claude Code (signed in with a subscription) prints a ``rate_limit_event`` line,
  ``{"rate_limit_info": {"status": "rejected", "resetsAt": 1795480324, ...}}``, before the
  failed turn, whose text is ``You've hit your 5-hour limit · resets 12:32am (UTC)``.
  Older versions said ``Claude AI usage limit reached|1795480324``. With an API key, a
  429 carries no reset time at all: that stays a plain failed turn.
* Codex fails the turn with ``codexErrorInfo: usageLimitExceeded`` and the text ``...
  try again at 12:32 AM.`` (the local time of the agent's machine), or ``try again in
  5 minutes`` / ``try again in 2 days 3 hours``.

An epoch is exact; a time read from a text has minute precision at best, so the pause
lasts to the end of that minute. Every pause ends :data:`MARGIN` seconds after the
reset (the provider's clock and ours differ), and a reset more than :data:`MAX_PAUSE`
away, or unreadable, is no pause: the turn is a plain failure, as without this module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any, Final

MARGIN: Final = 2.0
"""Seconds added after a reset time before the agent is resumed."""
MINUTE_PRECISION: Final = 60.0
"""A reset time read from a text (``12:32 AM``) means some time in that minute."""
MAX_PAUSE: Final = 8 * 24 * 3600.0
"""The longest pause taken: weekly limits reset within a week; farther is garbage."""
MESSAGE_LIMIT: Final = 4000
"""Characters of the resume message (the agent's partial answer is cut to fit)."""

_EPOCH_TEXT: Final = re.compile(r"usage limit reached\|(\d{9,11})\b", re.IGNORECASE)
_CLOCK: Final = re.compile(
    r"(?:resets|try again at|try again after)\s+"
    r"(?:(?P<month>[A-Z][a-z]{2,8})\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4}),?\s+)?)?"
    r"(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?",
    re.IGNORECASE,
)
_IN: Final = re.compile(
    r"try again in\s+((?:\d+\s*(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?)[\s,and]*)+)",
    re.IGNORECASE,
)
_PART: Final = re.compile(r"(\d+)\s*(s|m|h|d)", re.IGNORECASE)
_UNIT: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MONTHS: Final = {
    m: i + 1
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}


_LIMIT_TEXT: Final = re.compile(
    r"usage limit|hit your .{0,40}limit|limit reached|rate limit.{0,80}\b(?:reset|try again)",
    re.IGNORECASE,
)


def looks_like_limit(text: str) -> bool:
    """Whether a failed turn's text is about a usage or rate limit (the host then looks
    for its reset time; a limit without one stays a plain failure)."""
    return bool(_LIMIT_TEXT.search(text))


@dataclass(frozen=True, slots=True)
class Pause:
    """Pause the agent until ``until`` (a POSIX time), for ``reason``."""

    until: float
    reason: str


def reset_from_event(obj: Mapping[str, Any]) -> float | None:
    """The reset time of a Claude Code ``rate_limit_event`` that rejected a request."""
    info = obj.get("rate_limit_info")
    if not isinstance(info, Mapping) or info.get("status") != "rejected":
        return None
    return _epoch(info.get("resetsAt"))


def _epoch(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0 or value > 1e11:
        return None
    return float(value)


def reset_from_text(text: str, now: datetime) -> float | None:
    """The reset time a usage-limit message gives, read against ``now`` (aware: its
    zone is the agent's local time, which a bare ``12:32 AM`` is in); None if none."""
    if now.tzinfo is None:
        raise ValueError("now must be aware")
    match = _EPOCH_TEXT.search(text)
    if match is not None:
        return _epoch(int(match.group(1)))
    match = _IN.search(text)
    if match is not None:
        seconds = sum(int(n) * _UNIT[u.lower()] for n, u in _PART.findall(match.group(1)))
        return now.timestamp() + seconds if seconds else None
    match = _CLOCK.search(text)
    if match is None:
        return None
    zone = _zone_in(text, now.tzinfo)
    return _clock_time(match, now.astimezone(zone))


def _zone_in(text: str, default: tzinfo | None) -> tzinfo | None:
    """A ``(UTC)`` or ``(Europe/Paris)`` after the time, else the agent's own zone."""
    found = re.search(r"\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\)", text)
    if found is None:
        return default
    name = found.group(1)
    if name.upper() in ("UTC", "GMT", "Z"):
        from datetime import UTC

        return UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # an unknown zone: the agent's own
        return default


def _clock_time(match: re.Match[str], now: datetime) -> float | None:
    hour, minute = int(match.group("hour")), int(match.group("minute") or 0)
    ampm = (match.group("ampm") or "").replace(".", "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    if match.group("month"):
        month = _MONTHS.get(match.group("month")[:3].lower())
        if month is None:
            return None
        year = int(match.group("year") or now.year)
        try:
            when = now.replace(
                year=year, month=month, day=int(match.group("day")), hour=hour, minute=minute
            )
        except ValueError:
            return None
        if match.group("year") is None and when < now - timedelta(days=1):
            when = when.replace(year=year + 1)  # "Jan 2" said on Dec 31
    else:
        when = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if when + timedelta(seconds=MINUTE_PRECISION) <= now:
            when += timedelta(days=1)  # a time of day that has passed: tomorrow's
    return when.timestamp() + MINUTE_PRECISION  # the end of that minute


def pause_for(reset_at: float | None, text: str, now: float) -> Pause | None:
    """The pause a usage limit that resets at ``reset_at`` calls for, or None (no known
    reset, or an absurd one: the failure stays a failure)."""
    if reset_at is None or not math.isfinite(reset_at):
        return None
    until = max(reset_at, now) + MARGIN
    if until - now > MAX_PAUSE:
        return None
    return Pause(until, text.strip() or "usage limit reached")


def resume_message(entries: Sequence[Mapping[str, Any]], limit_text: str) -> str:
    """What the agent is told when it resumes: the request that was cut off, what it
    had answered so far, and its tool calls that got no result (``entries``: the
    history, oldest first; only the last user message and what follows count)."""
    start = max((i for i, e in enumerate(entries) if e.get("role") == "user"), default=-1)
    turn = list(entries[start + 1 :]) if start >= 0 else list(entries)
    request = str(entries[start].get("content") or "") if start >= 0 else ""
    answered = [
        str(e.get("content") or "")
        for e in turn
        if e.get("role") == "assistant" and not e.get("is_error") and e.get("content")
    ]
    results = {e.get("tool_use_id") for e in turn if e.get("tool_result") is not None}
    pending = [
        f"{e.get('tool_name') or 'tool'}: {e.get('tool_input') or ''}".strip()
        for e in turn
        if e.get("tool_name")
        and e.get("tool_result") is None
        and e.get("role") != "permission"
        and e.get("tool_use_id") not in results
    ]
    lines = [
        f"Your previous turn was stopped by a usage limit ({limit_text.strip()}). "
        "The limit has reset: please continue the work where you left off."
    ]
    if request:
        lines.append(f"The request was: {_clip(request, 1000)}")
    if answered:
        lines.append(f"What you had answered so far: {_clip(' '.join(answered), 2000)}")
    if pending:
        lines.append("Tool calls that did not finish: " + "; ".join(pending[:10]))
    return _clip("\n".join(lines), MESSAGE_LIMIT)


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"
