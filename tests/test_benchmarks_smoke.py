"""Smoke test of the benchmark harness (benchmarks/run.py --quick).

It checks that a tiny run completes, that its results JSON has every figure with a
sane type, that the goals table has every goal, and that the plots are valid PNG files;
it never asserts a speed, and it must not rewrite docs/performance.md or its plots.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
DOCS = ROOT / "docs" / "performance.md"
PLOTS = ROOT / "docs" / "img"
PNG = b"\x89PNG\r\n\x1a\n"
GOALS = [
    "lines_10_clients",
    "lines_1_client",
    "latency_p99",
    "ping_p50",
    "attach_replay",
    "startup",
    "memory",
    "daemon_restart",
    "journal",
]
GOALS15 = [
    "i15_spawned_cpu",
    "i15_spawned_pss",
    "i15_serve_cpu",
    "i15_flood_rss",
    "i15_cpu_per_line",
    "i15_daemon_ready",
    "i15_throughput",
]


def _snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _snapshot_dir(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.glob("*")} if path.is_dir() else {}


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def _check_throughput(rows: list[dict[str, Any]]) -> None:
    seen = {(r["kind"], r["clients"], r["system"]) for r in rows}
    assert seen == {
        (k, c, s) for k in ("lines", "demo") for c in (1, 10, 100) for s in ("host", "relay")
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
    rates = (1000, 5000, 10000)
    assert seen == {(r, c, s) for r in rates for c in (1, 10) for s in ("host", "relay")}
    for row in rows:
        assert row["complete"] is True, row["errors"]
        latency = row["latency_us"]
        assert latency["samples"] > 0
        assert _positive(latency["p50"]) and latency["p99"] >= latency["p50"]


def _check_new_figures(results: dict[str, Any]) -> None:
    """Attach replay, PSS of idle hosts side by side, daemon restart."""
    replay = results["replay"]
    assert replay["complete"] is True, replay["errors"]
    assert replay["events"] == 1000 and replay["attaches"] == results["config"]["replays"]
    assert 0 < replay["min_ms"] <= replay["p50_ms"] <= replay["p90_ms"] <= replay["max_ms"]
    pss = results["pss"]
    assert pss["hosts"] == results["config"]["pss_hosts"] >= 2
    for key in ("pss_mib", "rss_mib", "uss_mib"):
        assert 0 < pss[key]["min"] <= pss[key]["mean"] <= pss[key]["max"], key
    assert pss["pss_mib"]["max"] <= pss["rss_mib"]["max"]
    daemon = results["daemon"]
    assert daemon["hosts"] == results["config"]["daemon_hosts"]
    assert len(daemon["runs"]) == daemon["repeat"] >= 1
    assert daemon["ping_ms"] >= daemon["ready_ms"] >= daemon["reconcile_ms"] > 0
    assert daemon["ready_ms"] > 0 and daemon["ready_cpu_ms"] > 0


def _check_issue15_figures(results: dict[str, Any]) -> None:
    """Hosts spawned through a daemon, memory after a flood."""
    spawned = results["spawned"]
    assert spawned["hosts"] == results["config"]["spawned_hosts"] == len(spawned["per_host"])
    assert sum(spawned["started"].values()) == spawned["hosts"]
    assert set(spawned["started"]) <= {"exec", "fork"}
    for key in ("cpu_ms", "pss_mib", "rss_mib", "uss_mib"):
        figure = spawned[key]
        assert 0 < figure["min"] <= figure["median"] <= figure["max"], key
    assert spawned["pss_mib"]["max"] <= spawned["rss_mib"]["max"]
    assert len({host["pid"] for host in spawned["per_host"]}) == spawned["hosts"]
    assert _positive(spawned["daemon"]["pss_mib"])
    flood = results["flood_memory"]
    assert flood["clients"] == 10 and len(flood["all_ratios"]) == flood["runs"] >= 1
    assert _positive(flood["idle"]["rss_mib"]) and _positive(flood["after"]["rss_mib"])
    assert flood["ratio"] == flood["after"]["rss_mib"] / flood["idle"]["rss_mib"]


def _check_goals(goals: list[dict[str, Any]], keys: list[str]) -> None:
    assert [g["key"] for g in goals] == keys
    for goal in goals:
        assert isinstance(goal["met"], bool), goal  # every goal measured, met or not
        assert goal["figure"] and goal["goal"] and goal["measured"] != "not measured"
        assert goal["met"] == (not goal["failed"])


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG, path
    assert data[12:16] == b"IHDR", path
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100, (path, width, height)


def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    img = tmp_path / "img"
    docs_before, plots_before = _snapshot(DOCS), _snapshot_dir(PLOTS)
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--no-docs", "--out", str(out), "--plots", str(img)],
        cwd=ROOT,
        capture_output=True,
        timeout=150,  # a hang guard, not a speed assertion
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    assert _snapshot(DOCS) == docs_before
    assert _snapshot_dir(PLOTS) == plots_before
    results = json.loads(out.read_text())
    assert sorted(p.name for p in img.iterdir()) == ["latency.png", "throughput.png"]
    for path in img.iterdir():
        _check_png(path)

    assert results["mode"] == "quick"
    assert results["summary"]["complete"] is True
    assert all(_positive(v) for v in results["summary"]["ratios"].values())
    _check_throughput(results["throughput"])
    _check_latency(results["latency"])
    _check_new_figures(results)
    _check_issue15_figures(results)
    _check_goals(results["summary"]["goals"], GOALS)
    _check_goals(results["summary"]["goals15"], GOALS15)
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
    stdout = proc.stdout.decode()
    assert "Throughput" in stdout and "Journal" in stdout
    assert "Goals of issue 15" in stdout and "Goals of issue 8" in stdout


def _benchmark_output(name: str, *args: str) -> bytes:
    """What ``benchmarks/NAME ARGS`` printed (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        cwd=ROOT,
        capture_output=True,
        timeout=150,  # a hang guard, not a speed assertion
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    return proc.stdout


def test_the_acp_bridge_benchmark_reports_its_figures() -> None:
    stdout = _benchmark_output("acp_bridge.py", "--messages", "20", "--runs", "2", "--json")
    figures = json.loads(stdout)
    # the first run replays the 20 messages (and the user's), the second those and its own
    assert figures["replayed_updates"]["min"] == 21 and figures["replayed_updates"]["p90"] == 42
    assert figures["live_updates"]["p50"] == 20
    for key in ("start_cpu_ms", "load_us_per_update", "live_us_per_update", "pss_mib_after_load"):
        assert _positive(figures[key]["p50"]), (key, figures[key])


def test_the_web_sse_benchmark_reports_its_figures() -> None:
    stdout = _benchmark_output("web_sse.py", "--sizes", "1,3", "--flood", "5")
    rows = json.loads(stdout.decode().splitlines()[-1])
    assert [row["streams"] for row in rows] == [1, 3]
    # every stream got the same events (the run fails otherwise): the flood and its turn
    assert rows[0]["events_per_stream"] == rows[1]["events_per_stream"] > 5
    for row in rows:
        assert _positive(row["gateway_pss_mib"]) and _positive(row["gateway_pss_after_mib"])


def test_the_attention_benchmark_reports_its_figures() -> None:
    stdout = _benchmark_output("attention.py", "--quick")
    figures = json.loads(stdout)
    assert figures["decide"]["rules"] == 50 and figures["decide"]["us_per_decision_plain"] > 0
    host = figures["host"]
    assert host["pss_after_first_ask_kib"] > 0 and host["cpu_ms_per_turn_policy"] > 0
    daemon = figures["daemon"]
    # 2 agents x 3 turns: the same events followed, each finished turn notified once
    assert daemon["without_notices"]["events"] == daemon["with_notices"]["events"] > 0
    assert daemon["with_notices"]["notices"] == 6


def test_the_governance_benchmark_reports_its_figures() -> None:
    stdout = _benchmark_output("governance.py", "--quick")
    figures = json.loads(stdout)
    assert all(value > 0 for value in figures["decisions"].values())
    budget = figures["budget"]
    assert budget["cpu_ms_per_turn_with_budget"] > 0 and budget["pss_kib_without"] > 0
    assert figures["sweep"]["escapees"] == 3  # every orphan found and ended
    assert figures["worktree"]["files"] == 20 and figures["worktree"]["cpu_ms_make"] > 0


def test_the_sandbox_proxy_benchmark_reports_its_figures() -> None:
    stdout = _benchmark_output("sandbox_proxy.py", "--quick")
    figures = json.loads(stdout.decode().splitlines()[-1])
    assert figures["mib"] == 4 and figures["runs"] == 1
    for path in ("direct", "proxy", "proxy_bridge"):
        for direction in ("down", "up"):
            row = figures[path][direction]
            assert _positive(row["mb_per_s"]), (path, direction, row)
            if path != "direct":
                assert _positive(row["ratio_to_direct"]) and row["proxy_cpu_s_per_mb"] >= 0
    assert figures["proxy_bridge"]["down"]["bridge_cpu_s_per_mb"] >= 0
    for key in ("python_bare_ms", "inner_command_side_ms", "inner_with_bridge_ms"):
        assert _positive(figures["bridge_start"][key]), key


def test_the_sandbox_spawn_benchmark_reports_its_figures() -> None:
    from e2e.clis import unavailable

    from agenthost.sandbox.machine import check

    if not check().ok:
        unavailable("agents cannot be confined here (agenthost sandbox check)")
    figures = json.loads(_benchmark_output("sandbox_spawn.py", "--runs", "1", "--json"))
    assert set(figures) == {"off", "none", "net", "strict"}
    for profile, row in figures.items():
        assert _positive(row["cpu_ms"]) and _positive(row["pss_mib"]), (profile, row)
    assert figures["off"]["wall_ratio"] == 1.0
    # bubblewrap's two processes and, in strict, the bridge come on top of the agent
    assert figures["none"]["procs"] == figures["off"]["procs"] + 2
    assert figures["strict"]["procs"] == figures["none"]["procs"] + 1
