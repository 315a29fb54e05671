"""Painting a terminal agent's events on a screen: a restarted host's screen, the
screen as of an older offset, ``export --format text``. Sans-IO."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agenthost.errors import AgentHostError
from agenthost.names import EventType
from agenthost.terminal.chunks import event_bytes
from agenthost.terminal.screen import Screen
from agenthost.terminal.sizes import DEFAULT_SIZE

EXPORT_SCROLLBACK = 100_000
"""Lines ``export --format text`` keeps above the screen."""


def terminal_event(record: bytes) -> dict[str, Any] | None:
    """A journal record parsed, when it is a ``terminal`` or ``terminal_size`` event
    (the others are never parsed: most of a terminal agent's records are its bytes)."""
    if b'"type":"terminal' not in record[:80]:
        return None
    try:
        event = json.loads(record)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def paint(screen: Screen, event: Mapping[str, Any]) -> bool:
    """Paint one event on ``screen``; False for a damaged one (skipped)."""
    kind = event.get("type")
    if kind == EventType.TERMINAL:
        try:
            screen.feed(event_bytes(event))
        except AgentHostError:
            return False
    elif kind == EventType.TERMINAL_SIZE:
        cols, rows = event.get("cols"), event.get("rows")
        if not (isinstance(cols, int) and isinstance(rows, int) and 0 < cols and 0 < rows):
            return False
        screen.resize(min(cols, 1000), min(rows, 1000))
    return True


def paint_all(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the terminal showed, as text: the lines scrolled off, then the screen, with
    trailing blank lines removed."""
    screen = Screen(*DEFAULT_SIZE, scrollback=EXPORT_SCROLLBACK)
    for event in events:
        paint(screen, event)
    lines = screen.all_lines()
    while lines and not lines[-1]:
        lines.pop()
    return lines
