"""benchmarks/terminal_emulators.py runs and reports its figures for the chosen
emulator (never a speed assertion)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from termoracle import OracleUnavailable, node_path, unavailable

ROOT = Path(__file__).resolve().parent.parent


def test_the_terminal_emulators_benchmark_reports_its_figures(tmp_path: Path) -> None:
    try:
        node_path()
    except OracleUnavailable as exc:
        unavailable(f"the xterm.js oracle is unavailable: {exc}")
    out = tmp_path / "figures.json"
    name = "agenthost.terminal.screen"
    proc = subprocess.run(
        [sys.executable, "benchmarks/terminal_emulators.py", "--only", name, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        timeout=300,  # a hang guard, not a speed assertion
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    row = json.loads(out.read_text())[name]
    done, total = (int(n) for n in row["recordings"].split("/"))
    assert done == total >= 20  # every mark of every recording equals the oracle
    assert row["cpu_s_per_mb"] > 0 and row["pss_kib"] > 0
    assert all("cpu_s" in figures for figures in row["hostile"].values()), row["hostile"]
    assert row["snapshot"]["80x24"]["json_bytes"] > 0
