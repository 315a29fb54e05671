"""A terminal agent's journal as an asciicast v2 recording (asciinema's format). Sans-IO.

The header line gives the terminal's first size and the start time; then one line per
``terminal`` event (``[seconds, "o", text]``) and per ``terminal_size`` event
(``[seconds, "r", "COLSxROWS"]``), the seconds counted from the first event. Bytes
that are not UTF-8 are written with U+FFFD, as a player would show them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from agenthost.errors import ProtocolError
from agenthost.names import EventType
from agenthost.terminal.chunks import event_bytes
from agenthost.terminal.sizes import DEFAULT_SIZE, format_size


def _seconds(event: Mapping[str, Any]) -> float | None:
    stamp = event.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def to_asciicast(events: Iterable[Mapping[str, Any]], title: str | None = None) -> Iterator[str]:
    """The lines (each ending in a newline) of an asciicast v2 file for ``events``
    (stream events in offset order; those of other types are skipped)."""
    start: float | None = None
    last = 0.0
    header_done = False
    for event in events:
        kind = event.get("type")
        if kind not in (EventType.TERMINAL, EventType.TERMINAL_SIZE):
            continue
        at = _seconds(event)
        if start is None:
            start = at if at is not None else 0.0
        # a clock that went back (a restart on another machine's time) never makes a
        # recording play backwards
        last = max(last, (at - start) if at is not None else last)
        if not header_done:
            header_done = True
            size = _size(event) if kind == EventType.TERMINAL_SIZE else None
            cols, rows = size or DEFAULT_SIZE
            header: dict[str, Any] = {
                "version": 2,
                "width": cols,
                "height": rows,
                "timestamp": int(start),
                "env": {"TERM": "xterm-256color"},
            }
            if title:
                header["title"] = title
            yield json.dumps(header) + "\n"
            if size is not None:
                continue
        if kind == EventType.TERMINAL:
            try:
                text = event_bytes(event).decode("utf-8", "replace")
            except ProtocolError:
                continue
            yield json.dumps([round(last, 6), "o", text]) + "\n"
        else:
            size = _size(event)
            if size is not None:
                yield json.dumps([round(last, 6), "r", format_size(size)]) + "\n"


def _size(event: Mapping[str, Any]) -> tuple[int, int] | None:
    cols, rows = event.get("cols"), event.get("rows")
    if isinstance(cols, int) and isinstance(rows, int) and cols > 0 and rows > 0:
        return cols, rows
    return None
