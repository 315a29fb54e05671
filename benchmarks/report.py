"""Render results: the summary, the figures tables, and docs/performance.md."""

from __future__ import annotations

from typing import Any

from docs_text import ABOUT, HOW, NOTES

COMMAND = "make bench"


def _row(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Completeness of every run and the host/relay ratios."""
    rows = results["throughput"] + results["latency"] + results.get("journal", [])
    ratios: dict[str, float] = {}
    for host in results["throughput"]:
        relay = _row(
            results["throughput"], kind=host["kind"], clients=host["clients"], system="relay"
        )
        if host["system"] == "host" and relay:
            name = f"{host['kind']}_{host['clients']}_clients_throughput"
            ratios[name] = host["lines_per_s"] / relay["lines_per_s"]
    for host in results["latency"]:
        relay = _row(results["latency"], rate=host["rate"], clients=host["clients"], system="relay")
        if host["system"] == "host" and relay:
            name = f"latency_{host['rate']}_{host['clients']}_clients_p50"
            ratios[name] = host["latency_us"]["p50"] / max(relay["latency_us"]["p50"], 1e-9)
    return {
        "complete": all(r["complete"] for r in rows),
        "default_ring_dropped": sum(r["dropped"] for r in results["default_ring"]),
        "incomplete_runs": [
            {k: r.get(k) for k in ("kind", "rate", "clients", "system", "errors")}
            for r in rows
            if not r["complete"]
        ],
        "ratios": {
            **{k: round(v, 3) for k, v in ratios.items()},
            **{
                f"journal_{r['mode']}": round(r["ratio_to_off"], 3)
                for r in results.get("journal", [])
            },
        },
    }


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _ok(row: dict[str, Any]) -> str:
    return "yes" if row["complete"] else "**NO**"


def throughput_table(results: dict[str, Any]) -> str:
    """Full-speed floods, host vs relay."""
    lines = [
        "| flood | clients | host lines/s | host events/s | relay lines/s | host ÷ relay "
        "| host CPU µs/line | relay CPU µs/line | host CPU busy | all events received |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    rows = results["throughput"]
    for host in rows:
        if host["system"] != "host":
            continue
        relay = _row(rows, kind=host["kind"], clients=host["clients"], system="relay")
        assert relay is not None
        ratio = host["lines_per_s"] / relay["lines_per_s"]
        ok = "yes" if host["complete"] and relay["complete"] else "**NO** (see errors)"
        lines.append(
            f"| {host['kind']} | {host['clients']} | {_n(host['lines_per_s'])} "
            f"| {_n(host['events_per_s'])} | {_n(relay['lines_per_s'])} | {ratio:.2f} "
            f"| {host['server_cpu_us_per_line']:.2f} | {relay['server_cpu_us_per_line']:.2f} "
            f"| {100 * host['server_cpu_util']:.0f}% | {ok} |"
        )
    return "\n".join(lines)


def default_ring_table(results: dict[str, Any]) -> str:
    """The same floods with the product's default ring of 1000 events."""
    lines = [
        "| flood | clients | agent lines | all events received | clients dropped "
        "| fewest events a client received | lines/s |",
        "|---|--:|--:|---|--:|--:|--:|",
    ]
    for row in results["default_ring"]:
        rate = _n(row["lines_per_s"]) if row["complete"] else "–"
        lines.append(
            f"| {row['kind']} | {row['clients']} | {_n(row['agent_lines'])} | {_ok(row)} "
            f"| {row['dropped']} | {_n(row['events_min'])} | {rate} |"
        )
    return "\n".join(lines)


def journal_table(results: dict[str, Any]) -> str:
    """The lines flood to one client, journal off and under each sync policy."""
    lines = [
        "| journal | host lines/s | ÷ journal off | host CPU µs/line | all events received |",
        "|---|--:|--:|--:|---|",
    ]
    for row in results.get("journal", []):
        lines.append(
            f"| {row['mode']} | {_n(row['lines_per_s'])} | {row['ratio_to_off']:.2f} | "
            f"{row.get('server_cpu_us_per_line', float('nan')):.2f} | {_ok(row)} |"
        )
    return "\n".join(lines)


def latency_table(results: dict[str, Any]) -> str:
    """Paced floods: write -> receipt latency percentiles, host vs relay."""
    lines = [
        "| rate (lines/s) | clients | host p50 µs | host p99 µs | relay p50 µs | relay p99 µs "
        "| samples | all events received |",
        "|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    rows = results["latency"]
    for host in rows:
        if host["system"] != "host":
            continue
        relay = _row(rows, rate=host["rate"], clients=host["clients"], system="relay")
        assert relay is not None
        h, r = host["latency_us"], relay["latency_us"]
        ok = "yes" if host["complete"] and relay["complete"] else "**NO** (see errors)"
        lines.append(
            f"| {_n(host['rate'])} | {host['clients']} | {h['p50']:.0f} | {h['p99']:.0f} "
            f"| {r['p50']:.0f} | {r['p99']:.0f} | {_n(h['samples'])} | {ok} |"
        )
    return "\n".join(lines)


def other_table(results: dict[str, Any]) -> str:
    """Memory, start-up and ping."""
    mem, start, ping = results["memory"], results["startup"], results["ping"]

    def m(key: str) -> str:
        return f"{mem[key]['rss_mib']:.1f} MiB (USS {mem[key]['uss_mib']:.1f})"

    rows = [
        ("host idle RSS, lines agent (`sleep infinity`)", m("host_lines_idle")),
        ("host idle RSS, demo agent", m("host_demo_idle")),
        ("relay idle RSS (a bare Python process, for scale)", m("relay_idle")),
        ("host RSS after the lines floods", m("host_lines_after_flood")),
        ("host RSS after the demo floods", m("host_demo_after_flood")),
        (
            f"start-up, exec -> READY=1 (p50 / p90 of {start['runs']})",
            f"{start['ready_ms']['p50']:.0f} / {start['ready_ms']['p90']:.0f} ms",
        ),
        (
            "start-up, exec -> first host.ping answered (p50 / p90)",
            f"{start['ping_ms']['p50']:.0f} / {start['ping_ms']['p90']:.0f} ms",
        ),
        (
            f"host.ping round trip (p50 / p99 of {_n(ping['count'])})",
            f"{ping['p50_us']:.0f} / {ping['p99_us']:.0f} µs",
        ),
    ]
    lines = ["| figure | value |", "|---|--:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def tables(results: dict[str, Any]) -> str:
    """All figures as Markdown tables (also what the terminal shows)."""
    parts = [f"Note: {results['note']}"] if results.get("note") else []
    parts += [
        "Throughput (full-speed flood, agent stdout -> every client):",
        throughput_table(results),
        "The same floods with the default ring (1000 events):",
        default_ring_table(results),
        "Journal (lines flood, 1 client):",
        journal_table(results),
        "Latency (paced flood, agent write -> client receipt):",
        latency_table(results),
        "Memory, start-up, ping:",
        other_table(results),
    ]
    problems = results["summary"]["incomplete_runs"]
    if problems:
        parts.append("INCOMPLETE RUNS (a client missed events or was dropped):")
        parts += [f"- {p}" for p in problems]
    return "\n\n".join(parts)


def machine_table(results: dict[str, Any]) -> str:
    """The machine the figures come from."""
    mach = results["machine"]
    rows = [
        ("CPU", f"{mach['cpu']}, {mach['cores']} cores"),
        ("RAM", f"{mach['ram_gib']} GiB"),
        ("kernel", f"Linux {mach['kernel']}"),
        ("Python / uvloop", f"{mach['python']} / {mach['uvloop']}"),
        ("date", results["date"]),
        (
            "load average (1/5/15 min) before / after",
            f"{mach['loadavg_before']} / {mach.get('loadavg_after')}",
        ),
        ("run", f"{results['mode']}, {results['seconds']:.0f} s"),
    ]
    lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def reading(results: dict[str, Any]) -> str:
    """The few sentences under the figures that depend on them."""
    rows = results["throughput"]
    sentences = ["What this run says:", ""]
    for kind, what, unit in (("lines", "plain lines", "lines"), ("demo", "demo", "messages")):
        one = _row(rows, kind=kind, clients=1, system="host")
        ten = _row(rows, kind=kind, clients=10, system="host")
        r1 = _row(rows, kind=kind, clients=1, system="relay")
        r10 = _row(rows, kind=kind, clients=10, system="relay")
        if not (one and ten and r1 and r10):
            continue
        sentences.append(
            f"- {what.capitalize()} flood: the host moved {_n(one['lines_per_s'])} {unit}/s to "
            f"one client ({one['lines_per_s'] / r1['lines_per_s']:.2f}× the relay) and "
            f"{_n(ten['lines_per_s'])} {unit}/s to ten "
            f"({ten['lines_per_s'] / r10['lines_per_s']:.2f}× the relay), spending "
            f"{one['server_cpu_us_per_line']:.1f} and {ten['server_cpu_us_per_line']:.1f} µs "
            f"of host CPU per agent {unit[:-1]}."
        )
    for row in results["default_ring"]:
        if row["dropped"]:
            sentences.append(
                f"- With the default ring, the {row['kind']} flood dropped {row['dropped']} of "
                f"its {row['clients']} client(s), the first after {_n(row['events_min'])} events."
            )
    kept = [f"{r['kind']} to {r['clients']}" for r in results["default_ring"] if r["complete"]]
    if kept:
        sentences.append(
            f"- With the default ring every client kept up in: {', '.join(kept)} client(s)."
        )
    for host in results["latency"]:
        relay = _row(results["latency"], rate=host["rate"], clients=host["clients"], system="relay")
        if (
            host["system"] != "host"
            or relay is None
            or host["rate"] != max(r["rate"] for r in results["latency"])
        ):
            continue
        h, r = host["latency_us"], relay["latency_us"]
        sentences.append(
            f"- At {_n(host['rate'])} lines/s to {host['clients']} client(s), write -> receipt "
            f"took {h['p50']:.0f} µs (p50) and {h['p99']:.0f} µs (p99) through the host, "
            f"{r['p50']:.0f} and {r['p99']:.0f} µs through the relay."
        )
    if not results["summary"]["complete"]:
        sentences.append(
            "- **Some throughput or latency runs were incomplete** (a client was dropped or "
            "missed events): their figures are not comparable; the results JSON has the errors."
        )
    return "\n".join(sentences)


def document(results: dict[str, Any]) -> str:
    """docs/performance.md."""
    return (
        "\n\n".join(
            [
                "# Performance",
                ABOUT.format(command=COMMAND),
                "## Machine",
                machine_table(results),
                "## What is measured, and how",
                HOW.format(**results["config"]),
                "## Figures",
                *([f"> **Note:** {results['note']}"] if results.get("note") else []),
                "### Throughput (full-speed flood, agent stdout -> every client)",
                throughput_table(results),
                "### The same floods with the default ring (1000 events)",
                default_ring_table(results),
                "### Latency (paced flood, agent write -> client receipt)",
                latency_table(results),
                "### Memory, start-up, ping",
                other_table(results),
                "## Reading the numbers",
                reading(results),
                NOTES,
            ]
        )
        + "\n"
    )
