"""Time formatting shared by the protocol, the host and the CLI (pure functions)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def rfc3339(ts: float) -> str:
    """Format a POSIX timestamp as RFC 3339 UTC with microseconds and a ``Z`` suffix."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_rfc3339() -> str:
    """The current wall-clock time as :func:`rfc3339`."""
    return rfc3339(time.time())


def format_datetime(value: datetime) -> str:
    """Format an aware or naive-UTC datetime as RFC 3339 UTC ending in ``Z``."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def go_duration(seconds: float) -> str:
    """Format a duration the way Go's ``time.Duration`` prints whole seconds: ``1h2m3s``."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def short_duration(seconds: float) -> str:
    """A short human duration with one decimal under a minute: ``2.5s``, ``3m4s``."""
    if seconds < 59.95:  # would round to "60.0s"
        return f"{seconds:.1f}s"
    return go_duration(seconds)


def when(value: str | datetime) -> datetime:
    """A timestamp of the protocol (RFC 3339 text, or a datetime already)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def uptime(started_at: str | datetime, ended_at: str | datetime | None) -> str:
    """How long an agent has run (or ran), Go-style (``1h2m3s``)."""
    end = when(ended_at).timestamp() if ended_at else time.time()
    return go_duration(end - when(started_at).timestamp())
