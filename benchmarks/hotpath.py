"""The host's hot path alone: CPU per agent line and memory after a flood, 10 clients.

Starts ``lines`` hosts (the flood agent, ``flood.py --stdin``), or with ``--agent demo``
``demo`` hosts (the built-in stream-json agent, ``/flood N``: ``run.py``'s "Demo flood"
rows), and floods each to raw clients (``clients.py``, the harness's checking clients),
as ``run.py`` does, but only the figures of the hot path:

* **CPU µs/line**: host CPU (``/proc/PID/schedstat``) per agent line, on a host whose
  ring holds a whole flood (``run.py``'s throughput host), and its lines/s;
* **RSS after**: host RSS once a flood is over, on a host with the default ring (the
  clients fall behind it and are caught up from the journal), against its RSS before
  the first flood (agent running, warmed up with 1,000 lines to one client).

Each ``--tree`` (a directory holding an ``agenthost`` package; default: this checkout)
gets its own pair of hosts; floods alternate between trees, so that old and new code
share the machine's load. Prints one line per flood and the median per tree::

    .venv/bin/python benchmarks/hotpath.py --repeat 5
    .venv/bin/python benchmarks/hotpath.py --tree /tmp/old --tree . --repeat 5
    .venv/bin/python benchmarks/hotpath.py --agent demo --tree /tmp/old --tree . --repeat 5
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measures  # noqa: E402
from procs import FLOOD, PY, Host, Procs  # noqa: E402

MiB = 1 << 20


def start(procs: Procs, tree: str, kind: str, options: list[str]) -> Host:
    """A warmed-up ``kind`` host (``lines`` or ``demo``) running the code of ``tree``."""
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    # ``python -m`` looks in its working directory first, then PYTHONPATH, then the
    # editable install: both must be the tree
    os.environ["PYTHONPATH"] = str(Path(tree).resolve())
    os.chdir(tree)
    try:
        # the demo adapter runs its own agent (``run.py``'s ``agent_command``)
        command = [PY, FLOOD, "--stdin"] if kind == "lines" else []
        host = procs.start_host(kind, command, options)
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    measures.wait_state(host, ("idle",) if kind == "demo" else ("running",))
    measures.host_flood(procs, host, kind, 1, 1000)
    measures.wait_flood_over(host, kind)
    return host


def threads_cpu(host: Host) -> float:
    """CPU seconds of every thread of the host (``/proc/PID/task/*/schedstat``); the
    harness's figure counts its main thread only, not the journal's or the readers'."""
    total = 0
    for task in Path(f"/proc/{host.proc.pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that just ended
            continue
    return total / 1e9


def syscalls(host: Host) -> tuple[int, int]:
    """Read and write system calls of the host so far (``/proc/PID/io``)."""
    fields = dict(
        line.split(": ") for line in Path(f"/proc/{host.proc.pid}/io").read_text().splitlines()
    )
    return int(fields["syscr"]), int(fields["syscw"])


def user_system(host: Host) -> tuple[float, float]:
    """User and system CPU seconds of the host (clock ticks: only their share is used)."""
    times = host.ps.cpu_times()
    return times.user, times.system


def rss_mib(host: Host) -> float:
    return float(host.ps.memory_info().rss) / MiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", help="source tree(s) to compare")
    parser.add_argument("--repeat", type=int, default=5, help="floods per tree and host")
    parser.add_argument("--agent", choices=("lines", "demo"), default="lines")
    parser.add_argument(
        "--count", type=int, help="lines per flood (default 200,000; demo: 20,000 as run.py)"
    )
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument(
        "--mem-clients", default="10", help="clients of the default-ring floods, e.g. 1,10,100"
    )
    parser.add_argument("--profile", help="py-spy raw profile of the first tree's CPU host")
    parser.add_argument("--native", action="store_true", help="py-spy: C frames too")
    args = parser.parse_args()
    trees = args.tree or [str(Path(__file__).resolve().parent.parent)]
    kind = args.agent
    if args.count is None:
        args.count = 200_000 if kind == "lines" else 20_000
    big_ring = ["--ring-size", str(args.count + 10_000), "--ring-bytes", str(1 << 30)]
    results: dict[str, dict[str, list[float]]] = {}
    with Procs() as procs:
        hosts = {}
        for tree in trees:
            hosts[tree] = (start(procs, tree, kind, big_ring), start(procs, tree, kind, []))
            results[tree] = {
                "us_per_line": [],
                "all_threads_us": [],
                "lines_per_s": [],
                "system_share": [],
                "rss_after": [],
            }
            results[tree]["rss_idle"] = [rss_mib(hosts[tree][1])]
        spy = None
        if args.profile:
            pid = str(hosts[trees[0]][0].proc.pid)
            argv = ["py-spy", "record", "-p", pid, "-f", "raw", "-r", "250", "-o", args.profile]
            argv += ["--native"] if args.native else []
            spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # py-spy attaches
        for n in range(args.repeat):
            for tree in trees:
                cpu_host, mem_host = hosts[tree]
                cpu0, io0 = threads_cpu(cpu_host), syscalls(cpu_host)
                times0 = user_system(cpu_host)
                run = measures.host_flood(procs, cpu_host, kind, args.clients, args.count)
                all_us = 1e6 * (threads_cpu(cpu_host) - cpu0) / args.count
                reads, writes = (b - a for a, b in zip(io0, syscalls(cpu_host), strict=True))
                user, system = (b - a for a, b in zip(times0, user_system(cpu_host), strict=True))
                share = system / (user + system) if user + system else float("nan")
                complete = True
                for clients in map(int, args.mem_clients.split(",")):
                    flood = measures.host_flood(procs, mem_host, kind, clients, args.count)
                    complete = complete and flood["complete"]
                measures.wait_flood_over(mem_host, kind)
                after = rss_mib(mem_host)
                row = results[tree]
                row["us_per_line"].append(run["server_cpu_us_per_line"])
                row["all_threads_us"].append(all_us)
                row["lines_per_s"].append(run["lines_per_s"])
                row["system_share"].append(share)
                row["rss_after"].append(after)
                ok = run["complete"] and complete
                print(
                    f"{n + 1} {tree}: {run['server_cpu_us_per_line']:.3f} us/line "
                    f"({all_us:.3f} all threads, {share:.0%} system, {reads} reads, "
                    f"{writes} writes), "
                    f"{run['lines_per_s']:,.0f} lines/s; default ring: RSS after "
                    f"{after:.1f} MiB (idle {row['rss_idle'][0]:.1f})"
                    + ("" if ok else f" INCOMPLETE {run['errors'][:1]} {flood['errors'][:1]}"),
                    flush=True,
                )
                time.sleep(0.2)  # let the clients' process exit before the next flood
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
    for tree, row in results.items():
        med = {key: statistics.median(values) for key, values in row.items()}
        print(
            f"median {tree}: {med['us_per_line']:.3f} us/line ({med['all_threads_us']:.3f} all "
            f"threads, {med['system_share']:.0%} system), {med['lines_per_s']:,.0f} "
            f"lines/s, RSS idle {med['rss_idle']:.1f} MiB, after {med['rss_after']:.1f} MiB "
            f"({med['rss_after'] / med['rss_idle']:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
