"""The plots of docs/performance.md, drawn from a results dict (PNG, matplotlib's Agg
backend, no display needed).

``throughput.png``: agent lines per second delivered to each client against the number
of clients (log x), host and relay, for the lines and the demo flood.
``latency.png``: p50 and p99 of agent write -> client receipt against the paced rate
(log x and y), host and relay, one panel per client count.

matplotlib comes with the project's ``bench`` extra (``pip install -e '.[bench]'``;
``make`` installs it). The PNGs carry no software version or date, so re-rendering the
same results gives the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from procs import BenchError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

THROUGHPUT = "throughput.png"
LATENCY = "latency.png"
FILES = (THROUGHPUT, LATENCY)
STYLE = {"host": {"color": "C0", "marker": "o"}, "relay": {"color": "C1", "marker": "s"}}
# the throughput goals for the lines flood: clients -> lines/s to each client
LINES_GOALS = {1: 200_000, 10: 150_000}
LATENCY_GOAL = (10_000, 10, 1000.0)  # p99 at this rate with this many clients <= µs


def render(results: dict[str, Any], directory: Path) -> list[Path]:
    """Write the PNGs into ``directory`` (created if needed); return their paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BenchError(
            "the plots need matplotlib: .venv/bin/pip install -e '.[test,bench]'"
        ) from exc
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in ((THROUGHPUT, throughput), (LATENCY, latency)):
        fig = Figure(figsize=(10, 4.2), layout="constrained")
        draw(fig, results)
        fig.suptitle(subtitle(results, fig.get_suptitle()), fontsize=10)
        path = directory / name
        fig.savefig(path, dpi=100, metadata={"Software": None})
        paths.append(path)
    return paths


def subtitle(results: dict[str, Any], title: str) -> str:
    """The title with the run's date and machine under it."""
    mach = results["machine"]
    return f"{title}\n{results['date']}, {mach['cores']} cores, {results['mode']} run"


def _log_x(ax: Axes, ticks: list[int]) -> None:
    ax.set_xscale("log")
    ax.margins(x=0.08)
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)


def throughput(fig: Figure, results: dict[str, Any]) -> None:
    """Lines/s to each client against clients, host and relay, lines and demo."""
    fig.suptitle("Throughput: full-speed flood, agent stdout -> every client")
    rows = results["throughput"]
    kinds = [k for k in ("lines", "demo") if any(r["kind"] == k for r in rows)]
    for ax, kind in zip(fig.subplots(1, len(kinds), squeeze=False)[0], kinds, strict=True):
        clients: list[int] = sorted({r["clients"] for r in rows if r["kind"] == kind})
        for system in ("host", "relay"):
            points = sorted(
                (r["clients"], r["lines_per_s"], r["complete"])
                for r in rows
                if r["kind"] == kind and r["system"] == system
            )
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                label=system,
                **STYLE[system],
            )
            bad = [p for p in points if not p[2]]
            if bad:
                ax.plot([p[0] for p in bad], [p[1] for p in bad], "rx", ms=12, label="incomplete")
        if kind == "lines":
            goals = [(c, g) for c, g in LINES_GOALS.items() if c in clients]
            ax.plot(
                [c for c, _ in goals],
                [g for _, g in goals],
                linestyle="none",
                marker="_",
                ms=30,
                mew=2,
                color="grey",
                label="goal (host)",
            )
        _log_x(ax, clients)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(lambda y, _: f"{y / 1000:,.0f}k")
        ax.set_xlabel("attached clients")
        if kind == "lines":
            ax.set_title("lines flood (1 event per line)")
            ax.set_ylabel("agent lines/s to each client (= events/s)")
        else:
            ax.set_title("demo flood (2 events per message)")
            ax.set_ylabel("demo messages/s to each client")
        ax.legend()


def latency(fig: Figure, results: dict[str, Any]) -> None:
    """p50 and p99 latency against the paced rate, host and relay, per client count."""
    from matplotlib.ticker import NullFormatter  # matplotlib is there: render() checked

    fig.suptitle("Latency: paced flood, agent write -> client receipt")
    rows = results["latency"]
    counts = sorted({r["clients"] for r in rows})
    rates: list[int] = sorted({r["rate"] for r in rows})
    for ax, clients in zip(fig.subplots(1, len(counts), squeeze=False)[0], counts, strict=True):
        for system in ("host", "relay"):
            points = sorted(
                (r["rate"], r["latency_us"]["p50"], r["latency_us"]["p99"])
                for r in rows
                if r["clients"] == clients and r["system"] == system
            )
            x = [p[0] for p in points]
            ax.plot(x, [p[1] for p in points], label=f"{system} p50", **STYLE[system])
            ax.plot(
                x,
                [p[2] for p in points],
                linestyle="--",
                mfc="none",
                label=f"{system} p99",
                **STYLE[system],
            )
        rate, goal_clients, goal_us = LATENCY_GOAL
        if clients == goal_clients and rate in rates:
            ax.plot([rate], [goal_us], linestyle="none", marker="_", ms=30, mew=2, color="grey")
            ax.annotate("goal p99", (rate, goal_us), textcoords="offset points", xytext=(-75, 4))
        _log_x(ax, rates)
        ax.set_yscale("log")
        values = [v for line in ax.get_lines() for v in line.get_ydata() if v > 0]
        if values:  # whole decades: at least two labelled ticks, no 10^n minor labels
            ax.set_ylim(
                10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
            )
        ax.yaxis.set_major_formatter(lambda y, _: f"{y:,.0f}")
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("agent lines/s (one event each)")
        ax.set_ylabel("latency, µs")
        ax.set_title(f"{clients} client{'s' if clients != 1 else ''}")
        ax.legend(fontsize=8)
