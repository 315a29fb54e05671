"""The goals of issue 15 (lean hosts): each figure of a run against its goal.

The figures are CPU times and memory (robust on a shared machine); wall-clock figures
appear as ratios within one run (host ÷ relay), except the daemon's exec -> READY,
whose goal is a wall time (the daemon's CPU time is given next to it). Throughput is
compared with the figures of issue 8's run (:data:`ISSUE8`).
"""

from __future__ import annotations

from typing import Any

from goalrow import complete, find, goal

# The run whose 1- and 10-client throughput issue 15 must not lower: the lines flood of
# the issue-8 figures (docs/performance.md as of that run); host and relay lines/s by
# number of clients.
ISSUE8_RUN = "2026-11-22 06:27 UTC, the figures of docs/performance.md at commit 13ab543"
ISSUE8_LINES_PER_S: dict[int, tuple[int, int]] = {1: (434_213, 731_286), 10: (297_517, 618_162)}


def issue8_ratio(clients: int) -> float:
    """host ÷ relay lines/s of issue 8's run for ``clients`` clients."""
    host, relay = ISSUE8_LINES_PER_S[clients]
    return host / relay


def started_text(spawned: dict[str, Any]) -> str:
    """``20 forked`` / ``20 exec'd`` / ``12 forked, 8 exec'd``."""
    words = {"fork": "forked", "exec": "exec'd"}
    counts = spawned.get("started", {})
    return ", ".join(f"{n} {words.get(mode, mode)}" for mode, n in sorted(counts.items()))


def others_text(spawned: dict[str, Any]) -> str:
    """The PSS of the daemon's children that are not hosts (the factory, if any)."""
    others = spawned.get("daemon_children", [])
    if not others:
        return "no host factory (the daemon has no other child)"
    return "host factory " + " + ".join(f"{o['pss_mib']:.1f} MiB" for o in others)


def spawned_cpu(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_spawned_cpu", "daemon-started host: CPU from its creation to idle", "≤ 30 ms")
    sp = results.get("spawned")
    if not sp:
        return row
    cpu = sp["cpu_ms"]
    return goal(
        row["key"],
        f"daemon-started host: CPU from its creation to idle (median of {sp['hosts']} idle "
        f"`lines` hosts; {started_text(sp)})",
        row["goal"],
        f"{cpu['median']:.0f} ms (min {cpu['min']:.0f}, max {cpu['max']:.0f})",
        parts=[("≤ 30 ms", cpu["median"] <= 30)],
    )


def spawned_pss(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_spawned_pss", "mean PSS of 20 daemon-started idle hosts", "≤ 10 MiB")
    sp = results.get("spawned")
    if not sp:
        return row
    pss = sp["pss_mib"]
    return goal(
        row["key"],
        f"mean PSS of {sp['hosts']} daemon-started idle hosts ({started_text(sp)})",
        row["goal"],
        f"{pss['mean']:.1f} MiB (max {pss['max']:.1f}); with the factory's share "
        f"{sp.get('pss_with_children_mib', pss['mean']):.1f} MiB per host; daemon "
        f"{sp['daemon']['pss_mib']:.1f} MiB, {others_text(sp)}",
        parts=[("≤ 10 MiB", pss["mean"] <= 10)],
    )


def serve_cpu(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_serve_cpu", "exec'd `serve`: CPU to first ping", "≤ 120 ms")
    start = results.get("startup")
    if not start or "cpu_ms" not in start:
        return row
    cpu = start["cpu_ms"]
    return goal(
        row["key"],
        f"exec'd `serve`: host CPU from its start to the first ping answered (p50 of "
        f"{start['runs']})",
        row["goal"],
        f"{cpu['p50']:.0f} ms (min {cpu['min']:.0f})",
        parts=[("≤ 120 ms", cpu["p50"] <= 120)],
    )


def flood_rss(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_flood_rss", "host RSS after a 10-client flood, vs idle", "≤ 1.5×")
    fm = results.get("flood_memory")
    if not fm:
        return row
    return goal(
        row["key"],
        f"host RSS after a {fm['clients']}-client lines flood ({fm['agent_lines']:,} lines, "
        f"default ring), vs the same host idle (median of {fm['runs']} hosts)",
        row["goal"],
        f"{fm['ratio']:.2f}× ({fm['after']['rss_mib']:.1f} vs {fm['idle']['rss_mib']:.1f} MiB)",
        parts=[("≤ 1.5×", fm["ratio"] <= 1.5), *complete(fm)],
    )


def cpu_per_line(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_cpu_per_line", "host CPU per line, 10 clients, lines flood", "≤ 1.0 µs")
    host = find(results.get("throughput", []), kind="lines", clients=10, system="host")
    if not host:
        return row
    runs = host.get("all_cpu_us_per_line")
    if runs:
        figure = f"host CPU per agent line, lines flood to 10 clients (median of {len(runs)})"
        measured = f"{host['median_cpu_us_per_line']:.2f} µs (runs: "
        measured += ", ".join(f"{x:.2f}" for x in runs) + ")"
        us = host["median_cpu_us_per_line"]
    else:  # a results file from before the median over the runs: the one run's
        us = host["server_cpu_us_per_line"]
        figure, measured = row["figure"], f"{us:.2f} µs"
    relay = find(results.get("throughput", []), kind="lines", clients=10, system="relay")
    relay_us = (relay or {}).get(
        "median_cpu_us_per_line", (relay or {}).get("server_cpu_us_per_line")
    )
    if relay_us:
        # how fast the machine was in this run: the relay's CPU per line moves with it
        measured += f"; the relay's in this run: {relay_us:.2f} µs"
    return goal(
        row["key"],
        figure,
        row["goal"],
        measured,
        parts=[("≤ 1.0 µs", us <= 1.0), *complete(host)],
    )


def daemon_ready(results: dict[str, Any]) -> dict[str, Any]:
    row = goal("i15_daemon_ready", "daemon exec -> READY with 100 hosts", "≤ 250 ms")
    dmn = results.get("daemon")
    if not dmn:
        return row
    cpu = f"daemon CPU {dmn['ready_cpu_ms']:,.0f} ms, " if "ready_cpu_ms" in dmn else ""
    return goal(
        row["key"],
        f"daemon exec -> READY=1 with {dmn['hosts']} hosts (median of {dmn['repeat']} restarts)",
        row["goal"],
        f"{dmn['ready_ms']:,.0f} ms ({cpu}reconcile {dmn['reconcile_ms']:,.0f} ms)",
        parts=[("≤ 250 ms", dmn["ready_ms"] <= 250)],
    )


def throughput(results: dict[str, Any]) -> dict[str, Any]:
    counts = (1, 10)
    row = goal(
        "i15_throughput",
        "1- and 10-client throughput, lines flood (lines/s to each client)",
        f"not lower than issue 8's run ({ISSUE8_RUN}): host ÷ relay ≥ "
        + " and ".join(f"{issue8_ratio(c):.2f} ({c} client{'s' * (c > 1)})" for c in counts),
    )
    tp = results.get("throughput", [])
    pairs = [
        (
            c,
            find(tp, kind="lines", clients=c, system="host"),
            find(tp, kind="lines", clients=c, system="relay"),
        )
        for c in counts
    ]
    if not all(host and relay for _, host, relay in pairs):
        return row
    measured, parts, rows = [], [], []
    for clients, host, relay in pairs:
        assert host is not None and relay is not None
        ratio = host["lines_per_s"] / relay["lines_per_s"]
        then = ISSUE8_LINES_PER_S[clients][0]
        measured.append(
            f"{clients} client{'s' * (clients > 1)}: {host['lines_per_s']:,.0f}/s, "
            f"{ratio:.2f} of the relay (issue 8: {then:,}/s, {issue8_ratio(clients):.2f})"
        )
        parts.append((f"{clients} client{'s' * (clients > 1)}", ratio >= issue8_ratio(clients)))
        rows += [host, relay]
    return goal(
        row["key"], row["figure"], row["goal"], "; ".join(measured), parts=parts + complete(*rows)
    )


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The goals of issue 15, in the issue's order, each measured or ``not measured``."""
    return [
        spawned_cpu(results),
        spawned_pss(results),
        serve_cpu(results),
        flood_rss(results),
        cpu_per_line(results),
        daemon_ready(results),
        throughput(results),
    ]


def facts(key: str, results: dict[str, Any]) -> str:
    """What the figures of this run say about an unmet goal of issue 15 (generated; the
    causes go in ``docs_text.UNMET_REASONS``)."""
    sp, dmn, fm = results.get("spawned"), results.get("daemon"), results.get("flood_memory")
    if key in ("i15_spawned_cpu", "i15_spawned_pss") and sp:
        exec_d = sp.get("started", {}).get("exec", 0)
        how = (
            f"{exec_d} of the {sp['hosts']} hosts were exec'd by the daemon (their parent is "
            "the daemon), not forked from a pre-imported process."
            if exec_d
            else f"All {sp['hosts']} hosts were forked (their parent is not the daemon)."
        )
        spawn_cpu = [("the daemon", sp["daemon"])] + [
            ("the factory", c) for c in sp.get("daemon_children", [])
        ]
        spent = [f"{who} {p['spawn_cpu_ms']:.1f} ms" for who, p in spawn_cpu if "spawn_cpu_ms" in p]
        if key == "i15_spawned_cpu" and spent:
            how += (
                f" Each spawn also cost {' and '.join(spent)} of CPU (the daemon's includes "
                "following the host and answering this harness's requests)."
            )
        if key == "i15_spawned_pss":
            how += (
                f" Per host: USS {sp['uss_mib']['mean']:.1f} MiB (memory no other process "
                f"shares), shared dirty {sp['shared_dirty_mib']['mean']:.1f} MiB (pages "
                "shared copy-on-write with the process it was forked from)."
            )
        return how
    if key == "i15_daemon_ready" and dmn and "ready_cpu_ms" in dmn:
        share = dmn["ready_cpu_ms"] / dmn["ready_ms"] if dmn["ready_ms"] else 0.0
        return (
            f"Of the {dmn['ready_ms']:,.0f} ms, the daemon's own CPU time was "
            f"{dmn['ready_cpu_ms']:,.0f} ms ({share:.0%}); the reconcile (scan -> every host "
            f"reattached) took {dmn['reconcile_ms']:,.0f} ms."
        )
    if key == "i15_flood_rss" and fm:
        return (
            f"USS (memory only the host has) went from {fm['idle']['uss_mib']:.1f} to "
            f"{fm['after']['uss_mib']:.1f} MiB; the ratios of the {fm['runs']} runs: "
            f"{', '.join(f'{r:.2f}' for r in fm['all_ratios'])}."
        )
    return ""
