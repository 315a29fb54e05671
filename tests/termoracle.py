"""The oracle that terminal screens are judged against (issue 30): ``@xterm/headless``,
the xterm.js the browser runs, fed the same bytes in Node (tests/fixtures/xterm_oracle.mjs).

It is an npm package installed once into the cache of tests/e2e/clis.py (``make
e2e-clis``), pinned there like the agent CLIs. :func:`oracle_screen` skips the calling
test when Node or the package is missing (and fails it in CI, where
``AGENTHOST_E2E_REQUIRED=1``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "e2e"))
from clis import CliUnavailable, ensure_cli, unavailable  # noqa: E402

SCRIPT = Path(__file__).parent / "fixtures" / "xterm_oracle.mjs"
PACKAGES = ("xterm-headless", "xterm-unicode11")

Chunk = bytes | tuple[int, int]
"""Bytes written to the terminal, or ``(cols, rows)``: a resize at that point."""


@dataclass(frozen=True)
class OracleScreen:
    """What xterm.js shows after the chunks: the visible rows as text (trailing spaces
    stripped), the cursor, whether the alternate screen is on, the title, its modes
    (xterm.js's ``IModes`` plus ``mouseEncoding``) and the normal buffer's scrollback."""

    cols: int
    rows: int
    lines: list[str]
    cursor: tuple[int, int, bool]
    alternate: bool
    title: str | None
    modes: dict[str, Any] = field(default_factory=dict)
    scrollback: list[str] = field(default_factory=list)


class OracleUnavailable(Exception):
    """Node or @xterm/headless cannot be had here."""


def node_path() -> str:
    """NODE_PATH for the oracle script: the cached installs of its packages, installing
    them first if needed (raise :class:`OracleUnavailable` when that cannot be done)."""
    if shutil.which("node") is None:
        raise OracleUnavailable("node is not installed")
    try:
        roots = [ensure_cli(name).parents[2] for name in PACKAGES]
    except CliUnavailable as exc:
        raise OracleUnavailable(str(exc)) from exc
    return os.pathsep.join(str(root) for root in roots)


def _items(chunks: Sequence[Chunk]) -> list[object]:
    return [
        list(chunk) if isinstance(chunk, tuple) else base64.b64encode(chunk).decode()
        for chunk in chunks
    ]


def run_oracle(
    chunks: Sequence[Chunk], cols: int, rows: int, scrollback: int = 1000
) -> OracleScreen:
    """The oracle's screen after ``chunks`` on a ``cols`` x ``rows`` terminal."""
    return run_oracles([(chunks, cols, rows)], scrollback)[0]


def run_oracles(
    cases: Sequence[tuple[Sequence[Chunk], int, int]], scrollback: int = 1000
) -> list[OracleScreen]:
    """:func:`run_oracle` for each ``(chunks, cols, rows)``, in one Node process."""
    batch = [
        {"cols": cols, "rows": rows, "scrollback": scrollback, "chunks": _items(chunks)}
        for chunks, cols, rows in cases
    ]
    result = subprocess.run(
        ["node", str(SCRIPT), "--batch"],
        input=json.dumps(batch).encode(),
        capture_output=True,
        env={**os.environ, "NODE_PATH": node_path()},
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"xterm oracle failed: {result.stderr.decode(errors='replace')}")
    return [_screen(data) for data in json.loads(result.stdout)]


def _screen(data: dict[str, Any]) -> OracleScreen:
    cursor = data["cursor"]
    return OracleScreen(
        cols=data["cols"],
        rows=data["rows"],
        lines=data["lines"],
        cursor=(cursor["col"], cursor["row"], cursor["visible"]),
        alternate=data["alternate"],
        title=data["title"],
        modes=data["modes"],
        scrollback=data["scrollback"],
    )


def oracle_screen(
    chunks: Sequence[Chunk], cols: int, rows: int, scrollback: int = 1000
) -> OracleScreen:
    """For a test: :func:`run_oracle`, or skip the test when the oracle is unavailable
    (fail it in CI)."""
    return oracle_screens([(chunks, cols, rows)], scrollback)[0]


def oracle_screens(
    cases: Sequence[tuple[Sequence[Chunk], int, int]], scrollback: int = 1000
) -> list[OracleScreen]:
    """For a test: :func:`run_oracles`, or skip the test when the oracle is
    unavailable (fail it in CI)."""
    try:
        return run_oracles(cases, scrollback)
    except OracleUnavailable as exc:
        unavailable(f"the xterm.js oracle is unavailable: {exc}")
        raise  # not reached: unavailable() always raises
