"""Figures for docs/reliability.md, recorded by the reliability tests as they run.

A test asks for the ``figure`` fixture and records what it measured (events/s, RSS,
descriptors before and after, ...). The figures are printed in pytest's terminal
summary, and with ``AGENTHOST_FIGURES=FILE`` also appended to FILE as JSON lines, so
``make reliability`` (which sets it) leaves a machine-readable record next to the run.
Tests never assert wall-clock limits on these; they assert correctness and bounds
(nothing missed, memory bounded) and only *record* the speed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from hosttools import HostProc

Figure = Callable[..., None]

# Both this file and tests/conftest.py are imported as the module ``conftest``, and
# pytest leaves the last one loaded under that name: when tests/reliability is among
# the paths given to pytest, this one. Test modules elsewhere do
# ``from conftest import HostFactory``, so this name must exist here too (the same
# alias as in tests/conftest.py).
HostFactory = Callable[..., HostProc]

_FIGURES: list[dict[str, Any]] = []


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Figure:
    """``figure(name, value, unit, **context)``: record one measured figure."""

    def record(name: str, value: float, unit: str, **context: Any) -> None:
        entry = {
            "test": request.node.nodeid,
            "name": name,
            "value": value,
            "unit": unit,
            "at": time.time(),
            **context,
        }
        _FIGURES.append(entry)
        path = os.environ.get("AGENTHOST_FIGURES")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("reliability figures")
    for f in _FIGURES:
        value = f["value"]
        shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
        terminalreporter.write_line(f"{f['name']}: {shown} {f['unit']}   ({f['test']})")
