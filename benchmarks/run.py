"""agenthost benchmark harness: throughput, latency, memory, start-up, ping, attach
replay, daemon restart, and the issue's goals.

``make bench`` (= ``.venv/bin/python benchmarks/run.py``) runs everything, prints the
figures, writes ``benchmarks/results/<timestamp>.json`` and rewrites
``docs/performance.md`` and its plots ``docs/img/*.png``. ``--quick`` runs tiny sizes
(a smoke test, not figures; it never touches the docs),
``--out`` names the JSON file, ``--no-docs`` leaves docs/ alone, ``--plots DIR`` puts
the PNGs there (default: docs/img with the docs, else next to the results JSON),
``--note TEXT`` adds a remark above the figures, ``--render RESULTS.json`` measures
nothing and re-renders the tables, the plots and the page from a results file.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import daemon
import measures
import plots
import psutil
import report
import spawned
from procs import FLOOD, BenchError, Host, Procs, subreaper

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    lines_count: int = 200_000
    demo_count: int = 20_000
    repeat: int = 5
    clients: tuple[int, ...] = (1, 10, 100)  # throughput and default ring
    latency_clients: tuple[int, ...] = (1, 10)
    rates: tuple[int, ...] = (1_000, 5_000, 10_000)
    latency_seconds: float = 3.0
    startup_runs: int = 10
    pings: int = 5_000
    settle: float = 1.0
    replay_events: int = 1_000
    replays: int = 50
    pss_hosts: int = 20
    daemon_hosts: int = 100
    daemon_repeat: int = 5
    spawned_hosts: int = 20  # idle hosts started through a daemon
    flood_memory_clients: int = 10


QUICK = Config(
    lines_count=3_000,
    demo_count=500,
    repeat=1,
    latency_seconds=0.3,
    startup_runs=3,
    pings=200,
    settle=0.2,
    replays=5,
    pss_hosts=3,
    daemon_hosts=3,
    daemon_repeat=1,
    spawned_hosts=3,
)


def log(message: str) -> None:
    """Progress on stderr (stdout gets the final table)."""
    print(message, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "uvloop": metadata.version("uvloop"),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }


def pick_median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate (the lower middle one for an even count), with the
    median CPU per line of all runs."""
    ordered = sorted(runs, key=lambda r: r["lines_per_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["complete"] = all(r["complete"] for r in runs)
    chosen["errors"] = [e for r in runs for e in r["errors"]][:10]
    chosen["all_lines_per_s"] = [round(r["lines_per_s"]) for r in runs]
    # the CPU per line of the median-rate run may not be the median CPU per line
    cpu = [r["server_cpu_us_per_line"] for r in runs if "server_cpu_us_per_line" in r]
    if cpu:
        chosen["median_cpu_us_per_line"] = statistics.median(cpu)
        chosen["all_cpu_us_per_line"] = [round(c, 3) for c in cpu]
    return chosen


def agent_command(kind: str) -> list[str]:
    """What the host runs for a flood: the flood agent, or the demo (the adapter's own)."""
    return [sys.executable, FLOOD, "--stdin"] if kind == "lines" else []


def flood_host(procs: Procs, kind: str, options: list[str]) -> Host:
    """A host ready for floods, warmed up (agent started, code paths run once)."""
    host = procs.start_host(kind, agent_command(kind), options)
    measures.wait_state(host, ("idle",) if kind == "demo" else ("running",))
    measures.host_flood(procs, host, kind, 1, 1000)
    return host


def throughput(procs: Procs, kind: str, cfg: Config) -> list[dict[str, Any]]:
    """Full-speed floods through a host whose ring holds a whole flood, and through the
    relay, interleaved; the median of ``cfg.repeat`` runs of each."""
    count = cfg.lines_count if kind == "lines" else cfg.demo_count
    host = flood_host(
        procs, kind, ["--ring-size", str(count + 10_000), "--ring-bytes", str(1 << 30)]
    )
    rows = []
    for clients in cfg.clients:
        runs: dict[str, list[dict[str, Any]]] = {"host": [], "relay": []}
        for _ in range(cfg.repeat):
            runs["host"].append(measures.host_flood(procs, host, kind, clients, count))
            runs["relay"].append(measures.relay_flood(procs, kind, clients, count))
        for system, results in runs.items():
            row: dict[str, Any] = {"kind": kind, "clients": clients, "system": system}
            row.update(agent_lines=count, **pick_median(results))
            rows.append(row)
            log(
                f"  {kind} flood, {clients} client(s), {system}: "
                f"{row['lines_per_s']:,.0f} lines/s, {row['events_per_s']:,.0f} events/s"
                + ("" if row["complete"] else f"  INCOMPLETE: {row['errors'][:2]}")
            )
    procs.stop_host(host)
    return rows


def default_ring(
    procs: Procs, kind: str, cfg: Config
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The same floods through a host with the default ring (1000 events): are clients
    dropped? Also return the host's memory after them."""
    count = cfg.lines_count if kind == "lines" else cfg.demo_count
    host = flood_host(procs, kind, [])
    rows = []
    for clients in cfg.clients:
        result = measures.host_flood(procs, host, kind, clients, count)
        row = {"kind": kind, "clients": clients, "system": "host", "agent_lines": count}
        rows.append({**row, **result})
        log(
            f"  {kind} flood, {clients} client(s), default ring: "
            + (
                f"complete, {result['lines_per_s']:,.0f} lines/s"
                if result["complete"]
                else f"{result['dropped']} client(s) dropped, the first after "
                f"{result['events_min']:,} events"
            )
        )
    measures.wait_flood_over(host, kind)
    memory = measures.rss(host.ps)
    procs.stop_host(host)
    return rows, memory


JOURNAL_MODES = {
    "off": ["--no-journal"],
    "sync none": ["--journal-sync", "none"],
    "sync interval (default)": ["--journal-sync", "interval"],
    "sync always": ["--journal-sync", "always"],
}


def journal(procs: Procs, cfg: Config) -> list[dict[str, Any]]:
    """The lines flood to one client with the journal off and under each sync policy;
    hosts run side by side and the runs interleave, so the ratios share the noise."""
    count = cfg.lines_count
    big_ring = ["--ring-size", str(count + 10_000), "--ring-bytes", str(1 << 30)]
    hosts = {mode: flood_host(procs, "lines", [*big_ring, *o]) for mode, o in JOURNAL_MODES.items()}
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in hosts}
    for _ in range(cfg.repeat):
        for mode, host in hosts.items():
            runs[mode].append(measures.host_flood(procs, host, "lines", 1, count))
    rows = [{"mode": mode, "clients": 1, **pick_median(results)} for mode, results in runs.items()]
    off = rows[0]["lines_per_s"]
    for row in rows:
        row["ratio_to_off"] = row["lines_per_s"] / off
        rate, ratio = row["lines_per_s"], row["ratio_to_off"]
        log(f"  journal {row['mode']}: {rate:,.0f} lines/s ({ratio:.2f}x)")
    for host in hosts.values():
        procs.stop_host(host)
    return rows


def latency(procs: Procs, cfg: Config) -> list[dict[str, Any]]:
    """Paced floods: agent write -> client receipt, through the host and the relay."""
    host = flood_host(procs, "lines", [])
    rows = []
    for rate in cfg.rates:
        count = max(100, int(rate * cfg.latency_seconds))
        for clients in cfg.latency_clients:
            for system in ("host", "relay"):
                if system == "host":
                    result = measures.host_flood(procs, host, "lines", clients, count, rate)
                else:
                    result = measures.relay_flood(procs, "lines", clients, count, rate)
                row = {"rate": rate, "clients": clients, "system": system, **result}
                rows.append(row)
                lat = row["latency_us"]
                log(
                    f"  {rate} lines/s, {clients} client(s), {system}: p50 {lat['p50']:.0f} µs,"
                    f" p99 {lat['p99']:.0f} µs" + ("" if row["complete"] else "  INCOMPLETE")
                )
    procs.stop_host(host)
    return rows


def daemon_restart(hosts: int, repeat: int) -> dict[str, Any]:
    """``benchmarks/daemon.py``'s measurement for one size: a daemon follows ``hosts``
    hosts, is killed (SIGKILL) and started again ``repeat`` times; medians (ms) of exec
    -> READY=1 (every host reattached), of exec -> first ``daemon.ping`` answered, and
    of the daemon's own reconcile figure (scan -> every attach answered).

    The hosts outlive the daemons that are killed: this process becomes their reaper
    (as init or the service manager would be) for the measurement only; it runs last,
    when every other process of the run has been waited for.
    """
    with subreaper():
        bench = daemon.Bench()
        try:
            (row,) = daemon.measure(bench, [hosts], repeat)
        finally:
            bench.close()
    return {"repeat": repeat, **row}


def collect(procs: Procs, cfg: Config) -> dict[str, Any]:
    """Run every measurement."""
    results: dict[str, Any] = {"machine": machine(), "config": asdict(cfg)}
    log("start-up ...")
    results["startup"] = measures.startup(procs, cfg.startup_runs)
    log("idle memory ...")
    results["memory"] = {
        "host_lines_idle": measures.idle_rss(procs, "lines", cfg.settle),
        "host_demo_idle": measures.idle_rss(procs, "demo", cfg.settle),
        "relay_idle": measures.relay_idle_rss(procs, cfg.settle),
    }
    log(f"memory of {cfg.pss_hosts} idle hosts ...")
    results["pss"] = measures.pss_hosts(procs, cfg.pss_hosts, cfg.settle)
    pss = results["pss"]["pss_mib"]
    log(f"  PSS per host {pss['mean']:.1f} MiB (max {pss['max']:.1f})")
    log(f"{cfg.spawned_hosts} idle hosts spawned through a daemon ...")
    results["spawned"] = spawned.measure(cfg.spawned_hosts, cfg.settle)
    sp = results["spawned"]
    log(
        f"  started by {sp['started']}; CPU to idle {sp['cpu_ms']['median']:.0f} ms (median), "
        f"PSS {sp['pss_mib']['mean']:.1f} MiB (mean), daemon PSS {sp['daemon']['pss_mib']:.1f}"
    )
    log("ping ...")
    host = procs.start_host("lines", ["sleep", "infinity"])
    results["ping"] = measures.ping_rtt(host, cfg.pings)
    procs.stop_host(host)
    log(f"attach replay of {cfg.replay_events} events ...")
    results["replay"] = measures.attach_replay(procs, cfg.replay_events, cfg.replays)
    replay = results["replay"]
    log(
        f"  p50 {replay['p50_ms']:.2f} ms, p90 {replay['p90_ms']:.2f} ms"
        + ("" if replay["complete"] else f"  INCOMPLETE: {replay['errors'][:2]}")
    )
    results["throughput"], results["default_ring"] = [], []
    for kind in ("lines", "demo"):
        log(f"{kind} flood throughput ...")
        results["throughput"] += throughput(procs, kind, cfg)
        rows, memory = default_ring(procs, kind, cfg)
        results["default_ring"] += rows
        results["memory"][f"host_{kind}_after_flood"] = memory
    log(f"host memory after a {cfg.flood_memory_clients}-client flood ...")
    results["flood_memory"] = measures.flood_memory(
        procs, cfg.flood_memory_clients, cfg.lines_count, cfg.repeat, cfg.settle
    )
    fm = results["flood_memory"]
    log(
        f"  RSS {fm['idle']['rss_mib']:.1f} MiB idle, {fm['after']['rss_mib']:.1f} MiB after "
        f"({fm['ratio']:.2f}x; runs {fm['all_ratios']})"
    )
    log("journal ...")
    results["journal"] = journal(procs, cfg)
    log("latency ...")
    results["latency"] = latency(procs, cfg)
    log(f"daemon restart with {cfg.daemon_hosts} hosts ...")
    results["daemon"] = daemon_restart(cfg.daemon_hosts, cfg.daemon_repeat)
    results["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


def on_sigterm(signum: int, frame: object) -> NoReturn:
    """Turn SIGTERM into an exception so that every process gets cleaned up."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, measure, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--out", type=Path, help="results JSON path")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/ (page, plots)")
    parser.add_argument(
        "--plots", type=Path, metavar="DIR", help="write the PNG plots here (default: see above)"
    )
    parser.add_argument("--note", help="a remark shown at the top of the figures")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="measure nothing: render this results file"
    )
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads(args.render.read_text())
        # a results file from before a setting existed: the defaults (its sections
        # that were not measured say so)
        results["config"] = {**asdict(Config()), **results["config"]}
        if args.note is not None:
            results["note"] = args.note
        return publish(results, None, not args.no_docs, args.plots)
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    cfg = QUICK if args.quick else Config()
    started = datetime.now(UTC)
    t0 = time.monotonic()
    try:
        with Procs() as procs:
            results = collect(procs, cfg)
    except BenchError as exc:
        log(f"benchmark failed: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; every process the harness started was stopped")
        return 130
    results["mode"] = "quick" if args.quick else "full"
    results["note"] = args.note or ""
    results["date"] = started.strftime("%Y-%m-%d %H:%M UTC")
    results["seconds"] = round(time.monotonic() - t0, 1)
    out = args.out or ROOT / "benchmarks" / "results" / f"{started:%Y%m%d-%H%M%S}.json"
    if args.quick and not args.no_docs:
        log("--quick: docs/ left alone (its figures would mean nothing)")
    return publish(results, out, not (args.no_docs or args.quick), args.plots)


def publish(results: dict[str, Any], out: Path | None, docs: bool, plot_dir: Path | None) -> int:
    """Write the results JSON (if ``out``), print the tables, draw the plots, write the
    docs page. The plots go to ``plot_dir``, else to docs/img with the docs, else next
    to the results JSON (``<name>-plots/``); a render without docs or JSON draws none
    unless asked."""
    results["summary"] = report.summary(results)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        log(f"results: {out}")
    print(report.tables(results), flush=True)
    if plot_dir is None and docs:
        plot_dir = ROOT / "docs" / "img"
    elif plot_dir is None and out is not None:
        plot_dir = out.with_name(out.stem + "-plots")
    if plot_dir is not None:
        try:
            paths = plots.render(results, plot_dir)
        except BenchError as exc:
            log(f"no plots: {exc}")
            return 1
        log(f"plots: {', '.join(str(p) for p in paths)}")
    if docs:
        path = ROOT / "docs" / "performance.md"
        kept = report.issue_sections(path.read_text()) if path.exists() else ""
        path.write_text(report.document(results) + kept)
        log(f"wrote {path}")
    return 0 if results["summary"]["complete"] else 2


if __name__ == "__main__":
    sys.exit(main())
