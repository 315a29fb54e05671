"""What the command line costs: the CPU time of one ``agenthost VERB`` against live local
hosts, by the fast path and by the click path (``AGENTHOST_NO_FAST=1``), interleaved in
one run, and a bare ``python -c pass`` of the same interpreter for the floor.

    .venv/bin/python benchmarks/cli_cpu.py [--runs 10] [--json]

CPU: user + system time of the child (``os.wait4``'s rusage), median over the runs; the
host's side is not counted. One demo host answers status, ping, pending, send and
respond (a respond to a request id nobody asked: a full round trip, exit status 9);
ten hosts answer ``list`` (eleven sockets: the ``lines`` host's too), first with no daemon,
then with a daemon running in the home (started by ``agenthost daemon``, stopped at the
end); in this process, the CPU of list's probes of those hosts by a thread each (what
the fast path does) against one after the other. ``attach --no-follow`` replays 1,000
output events of a ``lines`` host to a pipe (click path only: the fast path does not
attach).
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


def both(
    args: list[str], env: dict[str, str], slow_env: dict[str, str], runs: int
) -> dict[str, Any]:
    """``agenthost ARGS`` by the fast path and by the click path, interleaved (load on
    the machine hits both alike): the median CPU of each, and the exit statuses seen."""
    fast: list[float] = []
    slow: list[float] = []
    codes = set()
    for _ in range(runs):
        cpu, code, _ = child_cpu([*AGENTHOST, *args], env)
        fast.append(cpu)
        codes.add(code)
        cpu, code, _ = child_cpu([*AGENTHOST, *args], slow_env)
        slow.append(cpu)
        codes.add(code)
    return {
        "fast_ms": statistics.median(fast) * 1000,
        "click_ms": statistics.median(slow) * 1000,
        "exit": sorted(codes),
    }


def start_daemon(env: dict[str, str], home: Path) -> None:
    """``agenthost daemon`` in the background, once it answers (with a deadline)."""
    log = (home / "daemon.out").open("wb")
    subprocess.Popen(
        [*AGENTHOST, "daemon"], env=env, stdout=log, stderr=log, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run([*AGENTHOST, "daemon", "status"], env=env, capture_output=True)
        if done.returncode == 0:
            return
        time.sleep(0.2)  # (a benchmark's poll, not a test)
    raise RuntimeError("the daemon did not answer")


def probes_cpu(home: Path, runs: int) -> dict[str, float]:
    """Median CPU (ms, this process) of ``list``'s fast path asking the hosts of
    ``home`` and the daemon: a thread a host (what it does), and one after the other."""
    import resource

    from agenthost.cli import fastlist
    from agenthost.paths import agent_id_from_socket, hosts_dir

    sockets = sorted(
        (agent_id, path)
        for path in hosts_dir(home).iterdir()
        if (agent_id := agent_id_from_socket(path)) is not None
    )

    def threads() -> None:
        fastlist.gather(home, None, 1.0)

    def one_by_one() -> None:
        for agent_id, path in sockets:
            fastlist._probe(agent_id, path, 1.0)
        fastlist._known(home, 1.0)

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    spent: dict[str, list[float]] = {"threads": [], "one_by_one": []}
    for _ in range(runs * 3):
        for name, job in (("threads", threads), ("one_by_one", one_by_one)):
            before = cpu()
            job()
            spent[name].append(cpu() - before)
    return {name: statistics.median(v) * 1000 for name, v in spent.items()}


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
            rows[name] = both(args, env, slow_env, runs)
        probes = probes_cpu(home, runs)
        start_daemon(env, home)
        rows["list (10 agents, a daemon running)"] = both(["list"], env, slow_env, runs)
        attach = [
            child_cpu([*AGENTHOST, "attach", "flood", "--no-follow"], env) for _ in range(runs)
        ]
        attach_json = [
            child_cpu([*AGENTHOST, "attach", "flood", "--no-follow", "--json"], env)
            for _ in range(runs)
        ]
    finally:
        subprocess.run([*AGENTHOST, "daemon", "stop"], env=env, capture_output=True, timeout=60)
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
        "list_probes_ms": probes,
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
        "",
        f"list's probes of 11 sockets and no daemon, in-process CPU: "
        f"a thread each {result['list_probes_ms']['threads']:.1f} ms, one after the other "
        f"{result['list_probes_ms']['one_by_one']:.1f} ms",
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
