"""Smoke test of the benchmark harness (benchmarks/run.py --quick).

It checks that a tiny run completes and that its results JSON has every figure with a
sane type; it never asserts a speed, and it must not rewrite docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
DOCS = ROOT / "docs" / "performance.md"


def _snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def _check_throughput(rows: list[dict[str, Any]]) -> None:
    seen = {(r["kind"], r["clients"], r["system"]) for r in rows}
    assert seen == {
        (k, c, s) for k in ("lines", "demo") for c in (1, 10) for s in ("host", "relay")
    }
    for row in rows:
        assert row["complete"] is True, row["errors"]
        assert row["dropped"] == 0
        assert row["events_min"] == row["events_per_client"] > row["agent_lines"] > 0
        assert _positive(row["lines_per_s"]) and _positive(row["events_per_s"])
        assert _positive(row["duration_s"])
        assert isinstance(row["server_cpu_s"], float) and row["server_cpu_s"] >= 0


def _check_latency(rows: list[dict[str, Any]]) -> None:
    seen = {(r["rate"], r["clients"], r["system"]) for r in rows}
    assert seen == {(r, c, s) for r in (1000, 10000) for c in (1, 10) for s in ("host", "relay")}
    for row in rows:
        assert row["complete"] is True, row["errors"]
        latency = row["latency_us"]
        assert latency["samples"] > 0
        assert _positive(latency["p50"]) and latency["p99"] >= latency["p50"]


def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    docs_before = _snapshot(DOCS)
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--no-docs", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        timeout=120,  # a hang guard, not a speed assertion
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    assert _snapshot(DOCS) == docs_before
    results = json.loads(out.read_text())

    assert results["mode"] == "quick"
    assert results["summary"]["complete"] is True
    assert all(_positive(v) for v in results["summary"]["ratios"].values())
    _check_throughput(results["throughput"])
    _check_latency(results["latency"])
    modes = [r["mode"] for r in results["journal"]]
    assert modes == ["off", "sync none", "sync interval (default)", "sync always"]
    for row in results["journal"]:
        assert row["complete"] is True, row["errors"]
        assert _positive(row["lines_per_s"]) and _positive(row["ratio_to_off"])
    for row in results["default_ring"]:
        assert isinstance(row["complete"], bool) and isinstance(row["dropped"], int)
    for name, memory in results["memory"].items():
        assert _positive(memory["rss_mib"]) and _positive(memory["uss_mib"]), name
    startup = results["startup"]
    assert _positive(startup["ready_ms"]["p50"])
    assert startup["ping_ms"]["p50"] >= startup["ready_ms"]["p50"]
    ping = results["ping"]
    assert _positive(ping["p50_us"]) and ping["p99_us"] >= ping["p50_us"]
    for key in ("cpu", "cores", "ram_gib", "kernel", "python", "uvloop"):
        assert results["machine"][key]
    assert "Throughput" in proc.stdout.decode() and "Journal" in proc.stdout.decode()
