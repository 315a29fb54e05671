"""What the goals tables of report.py and goals15.py share: a goal row, a lookup."""

from __future__ import annotations

from typing import Any

NOT_MEASURED = "not measured"


def find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    """The first row whose fields have the values of ``match``."""
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def goal(
    key: str,
    figure: str,
    goal: str,
    measured: str = NOT_MEASURED,
    relay: str = "–",
    parts: list[tuple[str, bool]] | None = None,
) -> dict[str, Any]:
    """One row of a goals table. ``parts``: each condition of the goal and whether it
    holds (None: not measured); a run that was incomplete fails its goal."""
    return {
        "key": key,
        "figure": figure,
        "goal": goal,
        "measured": measured,
        "relay": relay,
        "met": None if parts is None else all(ok for _, ok in parts),
        "failed": [name for name, ok in parts or [] if not ok],
        "parts": len(parts or []),
    }


def complete(*rows: dict[str, Any]) -> list[tuple[str, bool]]:
    """The condition every goal has: its runs were complete."""
    return [("run complete", all(r["complete"] for r in rows))]
