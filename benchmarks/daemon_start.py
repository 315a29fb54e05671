"""The CPU a restarted daemon spends from its exec to READY=1, with N live hosts.

``.venv/bin/python benchmarks/daemon_start.py --hosts 100 --repeat 7`` starts a daemon
in a fresh home, spawns ``--hosts`` ``lines`` agents through it (as ``make
bench-daemon`` does, with its :class:`~daemon.Bench`), then ``--repeat`` times kills
the daemon with SIGKILL, execs a new one and, the moment it says ``READY=1`` (every
live host rediscovered and reattached), reads:

* cpu: the daemon's CPU time since its exec, the sum over its threads of the first
  field of ``/proc/PID/task/TID/schedstat`` (nanoseconds on a CPU): robust to the load
  of a shared machine, unlike the wall clock;
* rss / pss: its memory at that moment (``/proc/PID/smaps_rollup``);
* wall: exec -> READY, only meaningful as a ratio between runs on an idle machine.

It prints one line per restart and the medians. ``--importtime FILE`` runs one more
restart under ``python -X importtime`` and writes its report to FILE (the imports the
daemon does before it is ready). Every process it starts is killed on exit.

Each ``--tree`` (a directory holding an ``agenthost`` package, e.g. a ``git worktree``
of an older commit; default: this checkout) gets its own restarts, alternating
between trees, so that old and new code share the machine's load; the hosts are
spawned once, by the first tree's daemon::

    .venv/bin/python benchmarks/daemon_start.py --hosts 100 --tree /tmp/base --tree .
"""

from __future__ import annotations

import argparse
import compileall
import ctypes
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon import PY, Bench, BenchError, log  # noqa: E402
from procs import wait_ready  # noqa: E402


def cpu_ns(pid: int) -> int:
    """Nanoseconds ``pid`` has run on a CPU, all its threads (live ones) together."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total


def memory_kib(pid: int) -> dict[str, int]:
    """Rss and Pss (KiB) from ``/proc/PID/smaps_rollup``."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                out[key.lower()] = int(rest.split()[0])
    return out


class StartBench(Bench):
    """:class:`daemon.Bench`, whose daemon start also reads the daemon's CPU at READY."""

    python_flags: list[str] = []
    stderr: Path | None = None
    """Where the daemon's stderr goes (default: its log, with stdout)."""
    tree: Path | None = None
    """The source tree whose daemon runs (default: the installed package)."""

    def start_daemon(self) -> dict[str, float]:
        name = f"ahds-{os.getpid()}-{time.monotonic_ns()}"
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "INVOCATION_ID")}
        if self.tree is not None:
            # ``python -m`` looks in its working directory first, then PYTHONPATH, then
            # the editable install: both must be the tree
            env["PYTHONPATH"] = str(self.tree)
        argv = [PY, *self.python_flags, "-m", "agenthost", "daemon", "--home", str(self.home)]
        argv += ["--scan-interval", "0", "--log-level", "warning"]
        log_path = self.home / "daemon.log"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind("\0" + name)
            env["NOTIFY_SOCKET"] = "@" + name
            with open(log_path, "ab") as out, open(self.stderr or log_path, "ab") as err:
                t0 = time.monotonic_ns()
                self.daemon = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=self.tree
                )
            wait_ready(notify, self.daemon, 300, log_path)
            wall = time.monotonic_ns() - t0
            pid = self.daemon.pid
            cpu = cpu_ns(pid)
            mem = memory_kib(pid)
        return {
            "cpu_ms": cpu / 1e6,
            "wall_ms": wall / 1e6,
            "rss_mib": mem["rss"] / 1024,
            "pss_mib": mem["pss"] / 1024,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=20, help="live hosts to reattach")
    parser.add_argument("--repeat", type=int, default=7, help="restarts measured")
    parser.add_argument("--importtime", type=Path, help="write a -X importtime report here")
    parser.add_argument("--tree", type=Path, action="append", help="source tree(s) to compare")
    args = parser.parse_args(argv)
    trees: list[Path | None] = [t.resolve() for t in args.tree] if args.tree else [None]
    for tree in trees:
        # bytecode for every tree (PYTHONDONTWRITEBYTECODE may be set): else a tree
        # without it compiles its modules at every start
        compileall.compile_dir(
            (tree or Path(__file__).resolve().parent.parent) / "agenthost", quiet=1
        )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: reap orphaned hosts
    bench = StartBench()
    bench.tree = trees[0]
    runs: dict[Path | None, list[dict[str, float]]] = {tree: [] for tree in trees}
    try:
        bench.start_daemon()
        bench.spawn([f"h{i:03d}" for i in range(args.hosts)])
        bench.wait_followed(args.hosts)
        for i in range(args.repeat):
            for tree in trees:  # interleaved: every tree sees the same load
                bench.kill_daemon()
                bench.tree = tree
                run = bench.start_daemon()
                runs[tree].append(run)
                log(
                    f"restart {i + 1}{f' {tree}' if tree else ''}: cpu {run['cpu_ms']:.0f} ms, "
                    f"wall {run['wall_ms']:.0f} ms, "
                    f"rss {run['rss_mib']:.1f} MiB, pss {run['pss_mib']:.1f} MiB"
                )
        if args.importtime is not None:
            bench.kill_daemon()
            args.importtime.unlink(missing_ok=True)
            bench.python_flags, bench.stderr = ["-X", "importtime"], args.importtime
            bench.start_daemon()
            log(f"import times: {args.importtime}")
    except BenchError as exc:
        log(f"benchmark failed: {exc}")
        return 1
    finally:
        bench.close()
    for tree, tree_runs in runs.items():
        medians = {key: statistics.median(r[key] for r in tree_runs) for key in tree_runs[0]}
        print(
            f"{f'{tree}: ' if tree else ''}{args.hosts} hosts, median of {len(tree_runs)} "
            f"restarts: cpu {medians['cpu_ms']:.0f} ms, wall {medians['wall_ms']:.0f} ms, "
            f"rss {medians['rss_mib']:.1f} MiB, pss {medians['pss_mib']:.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
