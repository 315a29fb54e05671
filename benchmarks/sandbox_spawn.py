"""What a sandbox costs an agent: the CPU and the wall time from ``agenthost serve`` to
the demo agent's first answered turn, and the memory (PSS) of the agent's processes,
unconfined (``--sandbox off``) and in each profile, in one run.

    .venv/bin/python benchmarks/sandbox_spawn.py [--runs 5] [--json]

CPU: the run time of the host and every process under it (bubblewrap's two, the
strict profile's bridge, the agent; /proc/PID/schedstat, nanoseconds) once the agent
answered its first message (``hi``), the
host's own included (the sandbox is built by it). Wall times are given as the ratio to
``off`` of the same run (a shared machine's wall clock is only comparable within one
run). PSS: every process under the host (not the host), from smaps_rollup.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

PY = sys.executable
PROFILES = ("off", "none", "net", "strict")


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def status(home: Path, agent: str) -> dict[str, Any] | None:
    from agenthost.client import Client
    from agenthost.errors import AgentHostError

    try:
        with Client(agent, home=home) as client:
            found: dict[str, Any] = client.status().model_dump(mode="json")
            return found
    except AgentHostError:
        return None


def send(home: Path, agent: str, text: str) -> bool:
    from agenthost.client import Client
    from agenthost.errors import AgentHostError

    try:
        with Client(agent, home=home) as client:
            client.send(text)
            return True
    except AgentHostError:
        return False


def run_ns(pid: int) -> int:
    """The process's CPU time so far (its threads' run time, nanoseconds)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def one(profile: str) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="ahs-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="ahw-", dir="/tmp"))
    argv = [PY, "-P", "-m", "agenthost", "serve", "--agent-id", "b", "--home", str(home)]
    argv += ["--cwd", str(work), "--sandbox", profile]
    env = {**os.environ, "AGENTHOST_DEMO_PACE": "0"}
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = start + 60
        sent = False
        while time.monotonic() < deadline:
            found = status(home, "b")
            if found and not sent:
                sent = send(home, "b", "hi")
            if found and found["agent"].get("turns") == 1:
                break
            time.sleep(0.005)  # a poll with a deadline
        else:
            raise RuntimeError(f"{profile}: the agent did not answer within 60 s")
        wall = time.monotonic() - start
        host = psutil.Process(proc.pid)
        tree = [host, *host.children(recursive=True)]
        cpu_ns = sum(run_ns(p.pid) for p in tree)
        pss = sum(pss_kib(p.pid) for p in tree[1:])
        return {"wall_s": wall, "cpu_ms": cpu_ns / 1e6, "pss_kib": pss, "procs": len(tree) - 1}
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {p: [] for p in PROFILES}
    for _ in range(args.runs):  # interleaved: each round sees the same machine
        for profile in PROFILES:
            rows[profile].append(one(profile))
    summary = {}
    base_wall = statistics.median(r["wall_s"] for r in rows["off"])
    for profile, runs in rows.items():
        summary[profile] = {
            "cpu_ms": statistics.median(r["cpu_ms"] for r in runs),
            "wall_ratio": statistics.median(r["wall_s"] for r in runs) / base_wall,
            "pss_mib": statistics.median(r["pss_kib"] for r in runs) / 1024,
            "procs": statistics.median(r["procs"] for r in runs),
        }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"{'profile':8} {'CPU to answer':>13} {'wall vs off':>12} {'PSS of the agent':>17} procs")
    for profile, row in summary.items():
        print(
            f"{profile:8} {row['cpu_ms']:10.1f} ms {row['wall_ratio']:11.2f}x "
            f"{row['pss_mib']:13.1f} MiB {row['procs']:5.0f}"
        )


if __name__ == "__main__":
    main()
