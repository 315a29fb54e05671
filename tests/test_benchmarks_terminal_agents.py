"""Smoke test of benchmarks/terminal.py --quick (terminal agents against a pty relay
and tmux).

A tiny run must complete with every byte checked, report every figure and leave
docs/performance.md alone; it never asserts a speed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TERMINAL = ROOT / "benchmarks" / "terminal.py"
DOCS = ROOT / "docs" / "performance.md"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.mark.timeout(300)
def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "terminal.json"
    before = DOCS.read_bytes()
    proc = subprocess.run(
        [sys.executable, str(TERMINAL), "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert DOCS.read_bytes() == before
    results = json.loads(out.read_text())
    cells = results["floods"]
    seen = {(c["flood"], c["clients"], c["system"]) for c in cells}
    assert seen == {
        (f, n, s) for f in ("text", "yes") for n in (1, 10) for s in ("host", "relay", "tmux")
    }
    for cell in cells:
        assert cell["complete"] is True, cell["errors"]
        assert cell["mb"] > 0 and cell["mb_per_s"] > 0 and cell["cpu_ms_per_mb"] > 0
        if cell["system"] != "tmux":  # every byte of the terminal, to every client
            assert cell["bytes_per_client"] == round(cell["mb"] * 1e6)
        if cell["system"] == "host":
            assert cell["events"] > 0
    assert {s["size"] for s in results["snapshots"]} == {"80x24", "200x60"}
    for snap in results["snapshots"]:
        assert snap["response_bytes"] > snap["dump_bytes"] > 0
        assert snap["host_cpu_ms"] > 0 and snap["screen_cpu_ms"] > 0
    assert {"pty, idle", "lines, idle"} <= set(results["memory"])
    for figure in results["memory"].values():
        assert 0 < figure["private"] <= figure["rss"] and 0 < figure["pss"] <= figure["rss"]
    assert all(v > 0 for v in results["emulator_ms_per_mb"].values())
    assert "| text | 10 | host |" in proc.stdout
