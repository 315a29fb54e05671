"""Cron expressions and time zones, for schedules. Sans-IO.

The expressions are croniter's (five fields, names and ``@daily``-style aliases); the
times are computed in the schedule's zone, so ``0 3 * * *`` in ``Europe/Paris`` is 03:00
there in winter and in summer. A time that does not exist on a spring-forward day is
taken at the first minute after the gap; a time that happens twice in the autumn, once.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone(tz: str | None) -> tzinfo:
    """The zone named ``tz`` (IANA), or the machine's local zone when None."""
    if tz is None:
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    if not tz or "\x00" in tz or tz.startswith(("/", ".")) or ".." in tz:
        raise ValueError(f"unknown time zone {tz!r} (an IANA name such as Europe/Paris)")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {tz!r} (an IANA name such as Europe/Paris)") from None


def check_cron(expression: str, tz: str | None = None) -> None:
    """Raise ValueError, with the reason, unless ``expression`` is a five-field cron
    expression (seconds and years are not taken) and ``tz`` a known zone."""
    from croniter import croniter  # 20 ms: only where a schedule is read or made

    zone(tz)
    fields = expression.split()
    if expression.strip().startswith("@"):
        if not croniter.is_valid(expression.strip()):
            raise ValueError(f"not a cron expression: {expression!r}")
        return
    if len(fields) != 5:
        raise ValueError(
            f"a cron expression has five fields (minute hour day month weekday), "
            f"not {len(fields)}: {expression!r}"
        )
    if not croniter.is_valid(" ".join(fields)):
        raise ValueError(f"not a cron expression: {expression!r}")


def next_after(expression: str, tz: str | None, after: float) -> float:
    """The first due time strictly after ``after`` (seconds since the epoch)."""
    from croniter import croniter

    start = datetime.fromtimestamp(after, UTC).astimezone(zone(tz))
    due: datetime = croniter(expression.strip(), start).get_next(datetime)
    return due.timestamp()
