"""Smoke test of the daemon rediscovery benchmark (benchmarks/daemon.py --quick).

It checks that a tiny run completes and reports every figure; it never asserts a
speed, and it must not rewrite docs/daemon.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "daemon.py"
DOC = ROOT / "docs" / "daemon.md"


def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    before = DOC.read_bytes()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        cwd=ROOT / "benchmarks",
        capture_output=True,
        timeout=170,  # a hang guard, not a speed assertion
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    assert DOC.read_bytes() == before
    results = json.loads(out.read_text())
    assert results["mode"] == "quick"
    assert [row["hosts"] for row in results["rows"]] == [3, 6]
    for row in results["rows"]:
        assert len(row["runs"]) == 2
        for key in ("reconcile_ms", "ready_ms", "ping_ms"):
            assert row[key] > 0
        assert row["ping_ms"] >= row["ready_ms"] >= row["reconcile_ms"]
    assert "| 6 |" in proc.stdout.decode()
