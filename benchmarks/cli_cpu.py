"""What the command line costs: the CPU time of one ``agenthost VERB`` against live local
hosts, by the fast path and by the click path (``AGENTHOST_NO_FAST=1``), interleaved in
one run, and a bare ``python -c pass`` of the same interpreter for the floor.

    .venv/bin/python benchmarks/cli_cpu.py [--runs 10] [--json]

CPU: user + system time of the child (``os.wait4``'s rusage), median over the runs; the
host's side is not counted. One demo host answers status, ping, pending, send and
respond (a respond to a request id nobody asked: a full round trip, exit status 9);
ten hosts answer ``list``. ``attach --no-follow`` replays 1,000 output events of a
``lines`` host to a pipe (click path only: the fast path does not attach).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("agenthost")
AGENTHOST = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agenthost"]

VERBS: dict[str, list[str]] = {
    "status": ["status", "b1"],
    "ping": ["ping", "b1"],
    "pending": ["pending", "b1"],
    "send": ["send", "b1", "hello"],
    "respond": ["respond", "b1", "no-such-request", "deny"],
    "status --json": ["status", "b1", "--json"],
    "list (10 agents)": ["list"],
}


def child_cpu(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """Run ``argv`` with stdout to a pipe (drained); return its CPU seconds (user +
    system), its exit status and the bytes it printed."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    printed = len(proc.stdout.read())
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # (Popen must not wait again)
    return usage.ru_utime + usage.ru_stime, proc.returncode, printed


def start(env: dict[str, str], agent_id: str, *args: str) -> None:
    argv = [*AGENTHOST, "serve", "--agent-id", agent_id, "--detach", *args]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)


def wait_events(env: dict[str, str], agent_id: str, count: int) -> None:
    """Until the host's stream holds ``count`` events (with a deadline)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run(
            [*AGENTHOST, "attach", agent_id, "--no-follow", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        if len(out.splitlines()) >= count:
            return
        time.sleep(0.2)  # (a benchmark's poll, not a test)
    raise RuntimeError(f"{agent_id} did not reach {count} events")


def stop_all(env: dict[str, str], home: Path) -> None:
    for sock in sorted((home / "hosts").glob("*.sock")):
        subprocess.run(
            [*AGENTHOST, "stop", sock.stem, "--force"],
            env={**env, "AGENTHOST_NO_FAST": "1"},
            capture_output=True,
            timeout=60,
        )


def measure(runs: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="ahb-", dir="/tmp"))
    env = {**os.environ, "AGENTHOST_HOME": str(home), "AGENTHOST_DEMO_PACE": "0"}
    env.pop("AGENTHOST_NO_FAST", None)
    env["NO_COLOR"] = "1"
    slow_env = {**env, "AGENTHOST_NO_FAST": "1"}
    try:
        for n in range(1, 11):
            start(env, f"b{n}", "--agent", "demo")
        # 1,000 output lines, kept (the default ring holds more), then quiet
        script = "seq 1000; exec sleep 3600"
        start(env, "flood", "--agent", "lines", "--", "sh", "-c", script)
        wait_events(env, "flood", 1000)
        floor = [child_cpu([sys.executable, "-c", "pass"], env)[0] for _ in range(runs)]
        rows: dict[str, dict[str, Any]] = {}
        for name, args in VERBS.items():
            fast: list[float] = []
            slow: list[float] = []
            codes = set()
            for _ in range(runs):  # interleaved: load on the machine hits both alike
                cpu, code, _ = child_cpu([*AGENTHOST, *args], env)
                fast.append(cpu)
                codes.add(code)
                cpu, code, _ = child_cpu([*AGENTHOST, *args], slow_env)
                slow.append(cpu)
                codes.add(code)
            rows[name] = {
                "fast_ms": statistics.median(fast) * 1000,
                "click_ms": statistics.median(slow) * 1000,
                "exit": sorted(codes),
            }
        attach = [
            child_cpu([*AGENTHOST, "attach", "flood", "--no-follow"], env) for _ in range(runs)
        ]
        attach_json = [
            child_cpu([*AGENTHOST, "attach", "flood", "--no-follow", "--json"], env)
            for _ in range(runs)
        ]
    finally:
        stop_all(env, home)
        shutil.rmtree(home, ignore_errors=True)
    return {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "runs": runs,
        "python_pass_ms": statistics.median(floor) * 1000,
        "verbs": rows,
        "attach_1000_ms": statistics.median(a[0] for a in attach) * 1000,
        "attach_1000_bytes": attach[0][2],
        "attach_1000_json_ms": statistics.median(a[0] for a in attach_json) * 1000,
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['when']}, {result['cores']} cores, Python {result['python']}; "
        f"median of {result['runs']} runs, CPU = user + system of the child",
        "",
        "| command | fast path | click path (AGENTHOST_NO_FAST=1) | exit |",
        "|---|--:|--:|---|",
    ]
    for name, row in result["verbs"].items():
        exits = ",".join(str(c) for c in row["exit"])
        lines.append(
            f"| `agenthost {name}` | {row['fast_ms']:.0f} ms | {row['click_ms']:.0f} ms | {exits} |"
        )
    lines += [
        f"| `python -c pass` (the floor) | {result['python_pass_ms']:.0f} ms | | |",
        f"| `agenthost attach ID --no-follow`, 1,000 events to a pipe | – | "
        f"{result['attach_1000_ms']:.0f} ms | 0 |",
        f"| the same with `--json` | – | {result['attach_1000_json_ms']:.0f} ms | 0 |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    result = measure(args.runs)
    print(json.dumps(result, indent=2) if args.json else report(result))


if __name__ == "__main__":
    main()
