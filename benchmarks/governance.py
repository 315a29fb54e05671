"""What governance costs: the decisions, a budget in a host, the end of escaped
processes, a worktree.

``.venv/bin/python benchmarks/governance.py`` measures, on this machine:

* decisions: the CPU of one call of each sans-IO decision (a budget accounting a turn's
  result, a reset time read from Codex's message, an admission under ``--max-agents``,
  a branch name checked);
* budget: the host's CPU per demo turn and its PSS, for a host with a budget and one
  without, ``--turns`` turns each, side by side;
* sweep: this process as a child subreaper with ``--escapees`` orphans re-parented to
  it (double-forked ``setsid`` sleepers, as an agent's escapees are to its host): the
  CPU of ending them all (``Subreaper.end_escapees``), and of finding none;
* worktree: the CPU (this process and its git children) of making an agent's worktree
  of a small repository, and of removing it at ``forget``.

CPU is the kernel's per-process clock (``/proc/PID/stat``, ``getrusage``) and memory
``/proc/PID/smaps_rollup``: robust to a shared machine's load, unlike wall time.
``--quick`` runs it small (the smoke test). Every process it starts is ended on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attention import pss_kib, wait  # noqa: E402
from daemon import PY  # noqa: E402
from procs import process_cpu_ns, request  # noqa: E402

from agenthost.daemon.limits import Limits, admit  # noqa: E402
from agenthost.daemon.protocol import SpawnSpec  # noqa: E402
from agenthost.daemon.worktrees import check_branch, prepare, remove  # noqa: E402
from agenthost.governance.budget import BudgetState, observe  # noqa: E402
from agenthost.governance.usagelimits import reset_from_text  # noqa: E402
from agenthost.host.reaper import Subreaper, set_subreaper  # noqa: E402
from agenthost.log import configure_logging  # noqa: E402

CODEX_TEXT = (
    "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again at 12:32 AM."
)


def per_call_us(call: Any, iterations: int) -> float:
    t0 = time.process_time()
    for _ in range(iterations):
        call()
    return round(1e6 * (time.process_time() - t0) / iterations, 2)


def bench_decisions(iterations: int) -> dict[str, float]:
    result = {"cost_usd": 0.0123, "usage": {"input_tokens": 1200, "output_tokens": 340}}
    state = BudgetState(usd=5.0, tokens=10**6)
    now = datetime.now(UTC)
    limits = Limits(max_agents=8, queue=True)
    return {
        "budget_observe_us": per_call_us(lambda: observe(state, result), iterations),
        "reset_from_codex_text_us": per_call_us(
            lambda: reset_from_text(CODEX_TEXT, now), iterations
        ),
        "admit_us": per_call_us(lambda: admit(limits, 7), iterations),
        "check_branch_us": per_call_us(lambda: check_branch("feature/login-42"), iterations),
    }


# --- a budget in a host ----------------------------------------------------------------


def start_host(home: Path, agent_id: str, *args: str) -> int:
    argv = [PY, "-m", "agenthost", "serve", "--agent-id", agent_id, "--home", str(home)]
    argv += ["--agent", "demo", *args, "--detach", "--", "--pace", "0"]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    lock = json.loads((home / "hosts" / f"{agent_id}.lock").read_text())
    return int(lock["pid"])


def turn(sock: str) -> None:
    request(sock, "host.send", {"input": "count these words please"})
    wait(lambda: request(sock, "host.status")["agent"]["state"] == "idle", "the turn's end")


def bench_budget(turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ahbg-", dir="/tmp") as tmp:
        home = Path(tmp)
        pids = {
            "with_budget": start_host(
                home, "b", "--budget-usd", "1000", "--budget-tokens", "1000000000"
            ),
            "without": start_host(home, "n"),
        }
        try:
            figures: dict[str, float] = {}
            for name, pid in pids.items():
                sock = str(home / "hosts" / f"{'b' if name == 'with_budget' else 'n'}.sock")
                wait(lambda s=sock: request(s, "host.status")["agent"]["state"] == "idle", "idle")
                turn(sock)  # warm: the first turn loads what turns need
                before = process_cpu_ns(pid)
                for _ in range(turns):
                    turn(sock)
                figures[f"cpu_ms_per_turn_{name}"] = round(
                    (process_cpu_ns(pid) - before) / 1e6 / turns, 3
                )
                figures[f"pss_kib_{name}"] = pss_kib(pid)
            return figures
        finally:
            for pid in pids.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


# --- the sweep of escaped processes -------------------------------------------------------

ESCAPEE = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(600)\n"
    "    os._exit(0)\n"
    "os.wait()\n"
)


def bench_sweep(escapees: int) -> dict[str, float]:
    if not set_subreaper(True):
        raise SystemExit("cannot become a child subreaper here")
    reaper = Subreaper()
    try:
        for _ in range(escapees):  # each leaves a setsid'd grandchild, re-parented to us
            subprocess.run([PY, "-c", ESCAPEE], check=True, start_new_session=True)
        wait(lambda: len(reaper.orphans()) >= escapees, "the orphans re-parented")
        t0 = time.process_time()
        ended = asyncio.run(reaper.end_escapees(1.0))
        sweep_ms = 1e3 * (time.process_time() - t0)
        t0 = time.process_time()
        asyncio.run(reaper.end_escapees(1.0))
        idle_ms = 1e3 * (time.process_time() - t0)
    finally:
        set_subreaper(False)
    return {
        "escapees": len(ended),
        "cpu_ms_to_end_them": round(sweep_ms, 2),
        "cpu_ms_when_none": round(idle_ms, 2),
    }


# --- a worktree ----------------------------------------------------------------------------


def children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1e3 * (usage.ru_utime + usage.ru_stime)


def bench_worktree(files: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ahbw-", dir="/tmp") as tmp:
        repo, home = Path(tmp) / "repo", Path(tmp) / "home"
        repo.mkdir()
        home.mkdir(mode=0o700)
        git = ["git", "-C", str(repo)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        for i in range(files):
            (repo / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run(
            [*git, "-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"], check=True
        )
        spec = SpawnSpec(agent_id="w1", worktree="", repo=str(repo))
        t0, c0 = time.process_time(), children_cpu_ms()
        prepared = prepare(home, spec, home / "w1.log")
        make = 1e3 * (time.process_time() - t0) + children_cpu_ms() - c0
        t0, c0 = time.process_time(), children_cpu_ms()
        removal = remove(prepared)
        drop = 1e3 * (time.process_time() - t0) + children_cpu_ms() - c0
        assert removal is not None and removal.removed
        return {"files": files, "cpu_ms_make": round(make, 1), "cpu_ms_remove": round(drop, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--escapees", type=int, default=50)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args()
    if args.quick:
        args.turns, args.escapees, args.files = 3, 3, 20
    configure_logging("warning")  # to stderr: stdout is the figures
    figures = {
        "decisions": bench_decisions(2_000 if args.quick else 50_000),
        "budget": bench_budget(args.turns),
        "sweep": bench_sweep(args.escapees),
        "worktree": bench_worktree(args.files),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
