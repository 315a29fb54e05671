"""Start-up cost of an exec'd host: CPU and memory of ``agenthost serve`` until it
answers its first ``host.ping``.

    .venv/bin/python benchmarks/startup.py [--runs 9] [--json] [--tree DIR ...]

Each run execs ``python -m agenthost serve --agent lines --linger 0 -- sleep infinity``
in a fresh home with a ``NOTIFY_SOCKET``, waits for READY=1, sends one ``host.ping`` on
a fresh connection, then reads the host's CPU time from ``/proc/PID/schedstat`` (first
field: nanoseconds on the CPU, robust to a busy machine, unlike wall-clock) and its
RSS and PSS from ``/proc/PID/smaps_rollup``; then sends one ``host.status`` (the first
request that needs the models, which a host loads when first used) and reads its CPU
time again (``status_cpu_ms``, counted from exec); then stops the host. Prints the
median, the 90th percentile and the minimum of each figure.

Each ``--tree`` (a directory holding an ``agenthost`` package, e.g. a ``git worktree``
of an older commit; default: this checkout) gets its own starts, and the starts
alternate between trees, so that old and new code share the machine's load::

    .venv/bin/python benchmarks/startup.py --tree /tmp/base --tree . --runs 15
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import read_line  # noqa: E402

PY = sys.executable


def request(path: str, mtype: str) -> dict[str, object]:
    """Send one request without a payload on a fresh connection; return the response."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(json.dumps({"type": mtype, "id": "b"}).encode() + b"\n")
        response: dict[str, object] = json.loads(read_line(sock))
    if not response.get("success"):
        raise RuntimeError(f"{mtype} failed: {response}")
    return response


def cpu_ms(pid: int) -> float:
    """CPU time the process has used so far, in ms (``/proc/PID/schedstat``)."""
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e6


def memory_mib(pid: int) -> tuple[float, float]:
    """RSS and PSS of the process, in MiB (``/proc/PID/smaps_rollup``)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return fields["Rss"] / 1024, fields["Pss"] / 1024


def one_start(tmp: Path, tree: Path) -> dict[str, float]:
    """Exec one host running the code of ``tree``, ping it, measure it, stop it."""
    home = Path(tempfile.mkdtemp(prefix="ahs-", dir=tmp))
    argv = [PY, "-m", "agenthost", "serve", "--agent-id", "x", "--home", str(home)]
    argv += ["--agent", "lines", "--linger", "0", "--", "sleep", "infinity"]
    name = f"ahs-{secrets.token_hex(6)}"
    # ``python -m`` looks in its working directory first, then PYTHONPATH, then the
    # editable install: both must be the tree
    env = dict(os.environ, PYTHONPATH=str(tree))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind("\0" + name)
        notify.settimeout(30)
        env["NOTIFY_SOCKET"] = "@" + name
        with open(home / "host.log", "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=tree,
                start_new_session=True,
            )
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            path = str(home / "hosts" / "x.sock")
            request(path, "host.ping")
            used = cpu_ms(proc.pid)
            rss, pss = memory_mib(proc.pid)
            request(path, "host.status")
            status_used = cpu_ms(proc.pid)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            sys.stderr.write((home / "host.log").read_text())
            raise
    # the agent (sleep) is in the host's session: take both down
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return {"cpu_ms": used, "rss_mib": rss, "pss_mib": pss, "status_cpu_ms": status_used}


def spread(values: list[float]) -> dict[str, float]:
    """Median, 90th percentile (nearest rank) and minimum."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(0.9 * len(ordered) + 0.5) - 1))
    return {"p50": statistics.median(ordered), "p90": ordered[rank], "min": ordered[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="host starts (default 9)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--tree", action="append", help="source tree(s) to compare")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.tree or [Path(__file__).resolve().parent.parent]]
    for tree in trees:
        # bytecode for every tree (PYTHONDONTWRITEBYTECODE may be set): else a tree
        # without it compiles its modules at every start
        compileall.compile_dir(tree / "agenthost", quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="ahs-", dir="/tmp"))
    samples: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    try:
        for _ in range(args.runs):
            for tree in trees:  # interleaved: every tree sees the same load
                samples[tree].append(one_start(tmp, tree))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {}
    for tree, runs in samples.items():
        result: dict[str, dict[str, float]] = {
            key: spread([s[key] for s in runs]) for key in runs[0]
        }
        result["runs"] = {"n": args.runs}
        results[str(tree)] = result
    if args.json:
        print(json.dumps(results if len(trees) > 1 else results[str(trees[0])], indent=2))
        return
    for tree, result in results.items():
        if len(trees) > 1:
            print(tree)
        for key, figures in result.items():
            if key == "runs":
                continue
            text = "  ".join(f"{name} {value:7.1f}" for name, value in figures.items())
            print(f"{key:13} {text}")
    print(f"({args.runs} starts per tree of serve --agent lines -- sleep infinity)")


if __name__ == "__main__":
    main()
