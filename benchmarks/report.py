"""Render results: the summary, the goals, the figures tables, and docs/performance.md."""

from __future__ import annotations

import re
from typing import Any

import goals15
from docs_text import (
    ABOUT,
    GOALS15_NOTE,
    GOALS_NOTE,
    HOW,
    NOTES,
    PLACEHOLDER,
    UNMET,
    UNMET_REASONS,
)
from goalrow import NOT_MEASURED
from goalrow import complete as _complete
from goalrow import find as _row
from goalrow import goal as _goal
from plots import LATENCY, THROUGHPUT

COMMAND = "make bench"
MB = 1e6  # the goals' memory unit, read strictly: 1 MB = 10^6 bytes, a little under 1 MiB
MiB = 1 << 20


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Completeness of every run, the goals and the host/relay ratios."""
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
    incomplete = [
        {k: r.get(k) for k in ("kind", "rate", "clients", "system", "errors")}
        for r in rows
        if not r["complete"]
    ]
    replay = results.get("replay")
    if replay and not replay["complete"]:
        incomplete.append({"kind": "attach replay", "errors": replay["errors"]})
    return {
        "complete": not incomplete,
        "goals": goals(results),
        "goals15": goals15.goals(results),
        "default_ring_dropped": sum(r["dropped"] for r in results["default_ring"]),
        "incomplete_runs": incomplete,
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


def _mb(mib: float) -> str:
    """A memory figure in the goals' unit (MB), with MiB, the other tables' unit."""
    return f"{mib * MiB / MB:.1f} MB ({mib:.1f} MiB)"


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The goals of issue 8, each with the measured figure and whether it is met.

    "events/s" of the lines flood are agent lines/s (one event per line); memory goals
    are in MB (10^6 bytes).
    """
    out = []
    tp, lat = results.get("throughput", []), results.get("latency", [])

    host = _row(tp, kind="lines", clients=10, system="host")
    relay = _row(tp, kind="lines", clients=10, system="relay")
    row = _goal(
        "lines_10_clients",
        "events/s to each of 10 clients (lines flood: 1 event per line, events/s = lines/s)",
        "≥ 150,000/s and ≥ 60 % of the relay's line rate",
    )
    if host and relay:
        ratio = host["lines_per_s"] / relay["lines_per_s"]
        row = _goal(
            row["key"],
            row["figure"],
            row["goal"],
            f"{_n(host['lines_per_s'])}/s ({ratio:.0%} of the relay)",
            f"{_n(relay['lines_per_s'])}/s",
            [("≥ 150,000/s", host["lines_per_s"] >= 150_000), ("≥ 60 % of the relay", ratio >= 0.6)]
            + _complete(host, relay),
        )
    out.append(row)

    host = _row(tp, kind="lines", clients=1, system="host")
    relay = _row(tp, kind="lines", clients=1, system="relay")
    row = _goal("lines_1_client", "events/s to 1 client (lines flood)", "≥ 200,000/s")
    if host and relay:
        row = _goal(
            row["key"],
            row["figure"],
            row["goal"],
            f"{_n(host['lines_per_s'])}/s ({host['lines_per_s'] / relay['lines_per_s']:.0%} "
            "of the relay)",
            f"{_n(relay['lines_per_s'])}/s",
            [("≥ 200,000/s", host["lines_per_s"] >= 200_000), *_complete(host, relay)],
        )
    out.append(row)

    host = _row(lat, rate=10_000, clients=10, system="host")
    relay = _row(lat, rate=10_000, clients=10, system="relay")
    row = _goal(
        "latency_p99", "p99 agent write -> client receipt at 10,000 events/s, 10 clients", "≤ 1 ms"
    )
    if host and relay:
        p99 = host["latency_us"]["p99"]
        row = _goal(
            row["key"],
            row["figure"],
            row["goal"],
            f"{p99 / 1000:.2f} ms",
            f"{relay['latency_us']['p99'] / 1000:.2f} ms",
            [("≤ 1 ms", p99 <= 1000), *_complete(host, relay)],
        )
    out.append(row)

    ping = results.get("ping")
    row = _goal("ping_p50", "host.ping round trip p50 (raw socket client)", "≤ 60 µs")
    if ping:
        row = _goal(
            row["key"],
            row["figure"],
            row["goal"],
            f"{ping['p50_us']:.0f} µs",
            parts=[("≤ 60 µs", ping["p50_us"] <= 60)],
        )
    out.append(row)

    replay = results.get("replay")
    row = _goal(
        "attach_replay",
        "attach replay of 1000 events: host.attach sent -> 1000th event received (p50)",
        "≤ 5 ms",
    )
    if replay:
        row = _goal(
            row["key"],
            f"attach replay of {replay['events']:,} events: host.attach sent -> "
            f"{replay['events']:,}th event received (p50 of {replay['attaches']})",
            row["goal"],
            f"{replay['p50_ms']:.2f} ms (p90 {replay['p90_ms']:.2f} ms)",
            parts=[("≤ 5 ms", replay["p50_ms"] <= 5), *_complete(replay)],
        )
    out.append(row)

    start = results.get("startup")
    row = _goal("startup", "`agenthost serve` exec -> socket answers ping (p50)", "≤ 150 ms")
    if start:
        ms = start["ping_ms"]
        row = _goal(
            row["key"],
            f"`agenthost serve` exec -> socket answers ping (p50 of {start['runs']})",
            row["goal"],
            f"{ms['p50']:.0f} ms (p90 {ms['p90']:.0f} ms)",
            parts=[("≤ 150 ms", ms["p50"] <= 150)],
        )
    out.append(row)

    mem, pss = results.get("memory", {}), results.get("pss")
    row = _goal(
        "memory",
        "idle host RSS; PSS per host with 20 hosts",
        "RSS ≤ 30 MB; PSS ≤ 20 MB",
    )
    if "host_lines_idle" in mem and pss:
        rss_mib, pss_mib = mem["host_lines_idle"]["rss_mib"], pss["pss_mib"]
        row = _goal(
            row["key"],
            f"idle host RSS (`lines` agent `sleep infinity`); PSS per host with "
            f"{pss['hosts']} idle hosts (mean, max)",
            row["goal"],
            f"RSS {_mb(rss_mib)}; PSS {_mb(pss_mib['mean'])}, "
            f"max {pss_mib['max'] * MiB / MB:.1f} MB",
            f"RSS {_mb(mem['relay_idle']['rss_mib'])}, a bare Python process",
            [
                ("RSS", rss_mib * MiB <= 30 * MB),
                ("PSS", pss_mib["mean"] * MiB <= 20 * MB),
            ],
        )
    out.append(row)

    dmn = results.get("daemon")
    row = _goal(
        "daemon_restart",
        "daemon restart -> 100 hosts rediscovered and reattached",
        "≤ 250 ms",
    )
    if dmn:
        row = _goal(
            row["key"],
            f"daemon restart -> {dmn['hosts']} hosts rediscovered and reattached: exec of the "
            f"new daemon -> READY=1 (median of {dmn['repeat']})",
            row["goal"],
            f"{dmn['ready_ms']:,.0f} ms (of which reconcile, scan -> all reattached: "
            f"{dmn['reconcile_ms']:,.0f} ms)",
            parts=[("≤ 250 ms", dmn["ready_ms"] <= 250)],
        )
    out.append(row)

    on = _row(results.get("journal", []), mode="sync interval (default)")
    off = _row(results.get("journal", []), mode="off")
    row = _goal(
        "journal",
        "journal on (default `interval` policy) vs off: events/s, lines flood, 1 client",
        "≥ 80 %",
    )
    if on and off:
        row = _goal(
            row["key"],
            row["figure"],
            row["goal"],
            f"{on['ratio_to_off']:.0%} ({_n(on['lines_per_s'])} vs {_n(off['lines_per_s'])}/s)",
            parts=[("≥ 80 %", on["ratio_to_off"] >= 0.8), *_complete(on, off)],
        )
    out.append(row)
    return out


def _met(goal: dict[str, Any]) -> str:
    if goal["met"] is None:
        return NOT_MEASURED
    if goal["met"]:
        return "yes"
    return "**no**" + (f" ({', '.join(goal['failed'])})" if goal["parts"] > 1 else "")


def goals_table(results: dict[str, Any]) -> str:
    """The goals of issue 8: figure | goal | measured | relay | met?"""
    lines = ["| figure | goal | measured | relay | met? |", "|---|---|---|---|---|"]
    for goal in results["summary"]["goals"]:
        lines.append(
            f"| {goal['figure']} | {goal['goal']} | {goal['measured']} | {goal['relay']} "
            f"| {_met(goal)} |"
        )
    return "\n".join(lines)


def goals15_table(results: dict[str, Any]) -> str:
    """The goals of issue 15: figure | goal | measured | met?"""
    lines = ["| figure | goal | measured | met? |", "|---|---|---|---|"]
    for goal in _goals15(results):
        lines.append(f"| {goal['figure']} | {goal['goal']} | {goal['measured']} | {_met(goal)} |")
    return "\n".join(lines)


def _goals15(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue-15 goals of the summary (a summary written before they existed: computed)."""
    found: list[dict[str, Any]] = results["summary"].get("goals15") or goals15.goals(results)
    return found


def unmet(results: dict[str, Any]) -> str:
    """The goals this run did not meet, issue 15's then issue 8's, each with what the
    figures say and its reason (``UNMET_REASONS``) or a marked placeholder."""
    issues = [
        ("Issue 15", [g for g in _goals15(results) if g["met"] is False]),
        ("Issue 8", [g for g in results["summary"]["goals"] if g["met"] is False]),
    ]
    if not any(missed for _, missed in issues):
        return "Every goal that was measured was met in this run."
    lines = [UNMET]
    for issue, missed in issues:
        if not missed:
            continue
        lines += ["", f"{issue}:", ""]
        for goal in missed:
            key = goal["key"]
            said = [goals15.facts(key, results)]
            said.append(UNMET_REASONS.get(key, PLACEHOLDER.format(key=key)))
            lines.append(
                f"- **{goal['figure']}**: {goal['measured']}; goal {goal['goal']}. "
                + " ".join(s for s in said if s)
            )
    return "\n".join(lines)


def _ok(row: dict[str, Any]) -> str:
    return "yes" if row["complete"] else "**NO**"


def throughput_table(results: dict[str, Any]) -> str:
    """Full-speed floods, host vs relay."""
    lines = [
        "| flood | clients | host lines/s | host events/s | relay lines/s | host ÷ relay "
        "| host CPU µs/line | relay CPU µs/line | host CPU busy | clients CPU busy (host run) "
        "| all events received |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
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
            f"| {100 * host['server_cpu_util']:.0f}% "
            f"| {100 * host['clients_cpu_s'] / host['duration_s']:.0f}% | {ok} |"
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
    """Memory, start-up, ping, replay, daemon-started hosts, daemon restart."""
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
        *(
            [
                (
                    "start-up CPU: host CPU time from exec to the first ping answered "
                    "(p50 / min; a busy machine inflates it less than wall time)",
                    f"{start['cpu_ms']['p50']:.0f} / {start['cpu_ms']['min']:.0f} ms",
                )
            ]
            if "cpu_ms" in start
            else []
        ),
        (
            f"host.ping round trip (p50 / p99 of {_n(ping['count'])})",
            f"{ping['p50_us']:.0f} / {ping['p99_us']:.0f} µs",
        ),
    ]
    pss, replay, dmn = results.get("pss"), results.get("replay"), results.get("daemon")
    if pss:
        p, r, u = pss["pss_mib"], pss["rss_mib"], pss["uss_mib"]
        rows.append(
            (
                f"{pss['hosts']} idle hosts side by side: PSS per host (mean / max)",
                f"{p['mean']:.1f} / {p['max']:.1f} MiB (RSS {r['mean']:.1f} / {r['max']:.1f}, "
                f"USS {u['mean']:.1f} / {u['max']:.1f})",
            )
        )
    rows += _lean_rows(results)
    if replay:
        rows.append(
            (
                f"attach replay of {replay['events']:,} events from the ring, sent -> last "
                f"received (p50 / p90 of {replay['attaches']})",
                f"{replay['p50_ms']:.2f} / {replay['p90_ms']:.2f} ms",
            )
        )
    if dmn:
        rows += [
            (
                f"daemon restart, {dmn['hosts']} hosts: exec -> READY=1, all reattached "
                f"(median of {dmn['repeat']})",
                f"{dmn['ready_ms']:,.0f} ms",
            ),
            (
                f"daemon restart, {dmn['hosts']} hosts: reconcile, scan -> all reattached",
                f"{dmn['reconcile_ms']:,.0f} ms",
            ),
        ]
        if "ready_cpu_ms" in dmn:
            rows.append(
                (
                    f"daemon restart, {dmn['hosts']} hosts: the daemon's CPU, exec -> READY=1",
                    f"{dmn['ready_cpu_ms']:,.0f} ms",
                )
            )
    lines = ["| figure | value |", "|---|--:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def _lean_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows of the other figures that issue 15 added: daemon-started hosts, memory
    after a flood."""
    rows = []
    sp, fm = results.get("spawned"), results.get("flood_memory")
    if sp:
        c, p, r, u = sp["cpu_ms"], sp["pss_mib"], sp["rss_mib"], sp["uss_mib"]
        what = f"{sp['hosts']} idle hosts spawned through a daemon ({goals15.started_text(sp)})"
        rows += [
            (
                f"{what}: CPU from creation to idle (median / max)",
                f"{c['median']:.0f} / {c['max']:.0f} ms",
            ),
            (
                f"{what}: PSS per host (mean / max)",
                f"{p['mean']:.1f} / {p['max']:.1f} MiB (RSS {r['mean']:.1f}, USS "
                f"{u['mean']:.1f}, shared dirty {sp['shared_dirty_mib']['mean']:.1f})",
            ),
            (
                f"the daemon of those {sp['hosts']} hosts and its other children: PSS",
                f"daemon {sp['daemon']['pss_mib']:.1f} MiB, {goals15.others_text(sp)}",
            ),
        ]
    if fm:
        rows.append(
            (
                f"host RSS idle -> after a {fm['clients']}-client lines flood, default ring "
                f"(median of {fm['runs']})",
                f"{fm['idle']['rss_mib']:.1f} -> {fm['after']['rss_mib']:.1f} MiB "
                f"({fm['ratio']:.2f}×)",
            )
        )
    return rows


def tables(results: dict[str, Any]) -> str:
    """All figures as Markdown tables (also what the terminal shows)."""
    parts = [f"Note: {results['note']}"] if results.get("note") else []
    parts += [
        "Goals of issue 15:",
        goals15_table(results),
        "Goals of issue 8:",
        goals_table(results),
        unmet(results),
        "Throughput (full-speed flood, agent stdout -> every client):",
        throughput_table(results),
        "The same floods with the default ring (1000 events):",
        default_ring_table(results),
        "Journal (lines flood, 1 client):",
        journal_table(results),
        "Latency (paced flood, agent write -> client receipt):",
        latency_table(results),
        "Memory, start-up, ping, attach replay, daemon restart:",
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
    words = {1: "one client", 10: "ten", 100: "a hundred"}
    for kind, what, unit in (("lines", "plain lines", "lines"), ("demo", "demo", "messages")):
        pairs = [
            (host, relay)
            for host in rows
            if host["kind"] == kind
            and host["system"] == "host"
            and (relay := _row(rows, kind=kind, clients=host["clients"], system="relay"))
        ]
        if not pairs:
            continue
        moved = [
            f"{_n(h['lines_per_s'])} {unit}/s to {words.get(h['clients'], h['clients'])} "
            f"({h['lines_per_s'] / r['lines_per_s']:.2f}× the relay)"
            for h, r in pairs
        ]
        cpu = [f"{h['server_cpu_us_per_line']:.1f}" for h, _ in pairs]
        sentences.append(
            f"- {what.capitalize()} flood: the host moved {_and(moved)}, spending "
            f"{_and(cpu)} µs of host CPU per agent {unit[:-1]}."
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


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _numbers(values: list[int]) -> str:
    return _and([f"{v:,}".replace(",", " ") for v in values])


def how(config: dict[str, Any]) -> str:
    """The method, with the run's sizes."""
    return HOW.format(
        **config,
        clients_text=_numbers(config["clients"]),
        latency_clients_text=_numbers(config["latency_clients"]),
        rates_text=_numbers(config["rates"]),
    )


_ISSUE_SECTION = re.compile(r"^## [^\n]*\(issue \d+\)$", re.M)


def issue_sections(old: str) -> str:
    """The sections of the page that other benchmarks write (``## ... (issue N)`` to
    the end: governance, sandboxes, terminals...), to keep after what this one writes."""
    match = _ISSUE_SECTION.search(old)
    return "\n" + old[match.start() :] if match else ""


def document(results: dict[str, Any]) -> str:
    """docs/performance.md (the plots are expected in docs/img, next to it)."""
    return (
        "\n\n".join(
            [
                "# Performance",
                ABOUT.format(command=COMMAND),
                "## Machine",
                machine_table(results),
                "## What is measured, and how",
                how(results["config"]),
                "## Figures",
                *([f"> **Note:** {results['note']}"] if results.get("note") else []),
                "### Goals of issue 15 (lean hosts)",
                goals15_table(results),
                GOALS15_NOTE,
                "### Goals of issue 8",
                goals_table(results),
                GOALS_NOTE,
                "### Where goals are not met",
                unmet(results),
                "### Throughput (full-speed flood, agent stdout -> every client)",
                throughput_table(results),
                f"![Throughput against the number of clients, host and relay](img/{THROUGHPUT})",
                "### The same floods with the default ring (1000 events)",
                default_ring_table(results),
                "### Journal (lines flood, 1 client)",
                journal_table(results),
                "### Latency (paced flood, agent write -> client receipt)",
                latency_table(results),
                f"![Latency percentiles against the event rate, host and relay](img/{LATENCY})",
                "### Memory, start-up, ping, attach replay, daemon restart",
                other_table(results),
                "## Reading the numbers",
                reading(results),
                NOTES,
            ]
        )
        + "\n"
    )
