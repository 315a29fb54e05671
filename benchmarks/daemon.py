"""How long a restarted daemon takes to rediscover and reattach 10, 50 and 100 hosts.

``make bench-daemon`` (= ``.venv/bin/python benchmarks/daemon.py``) starts a daemon in
a fresh home, spawns hosts through it (each a ``lines`` agent that prints 100 lines,
then idles), and for each size kills the daemon with SIGKILL and starts a new one,
``--repeat`` times. Per restart it measures, from the exec of ``agenthost daemon``:

* ready: until ``READY=1`` (what systemd waits for: every live host reattached);
* ping: until a first ``daemon.ping`` is answered on its socket;
* reconcile: the daemon's own figure, from the scan of the hosts directory until
  every host's attach was answered (``reconcile.seconds`` of ``daemon.ping``).

It prints a table, writes ``benchmarks/results/daemon-<date>.json`` and rewrites the
figures section of ``docs/daemon.md`` (between its ``daemon-bench`` markers).
``--quick`` runs tiny sizes and leaves the docs alone; ``--no-docs`` too; ``--sizes``
and ``--repeat`` change the run. Every process it starts is killed on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from procs import BenchError, process_cpu_ns, read_line, wait_ready

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "daemon.md"
START, END = "<!-- daemon-bench:start -->", "<!-- daemon-bench:end -->"
AGENT = ["sh", "-c", "seq 1 100; exec sleep 100000"]
EVENTS = 101  # the state event, then 100 lines
WIDTH = 88  # the prose of docs/daemon.md is wrapped at 88 columns
SPAWN_PARALLEL = 4  # a 2-core machine starts a few hosts at once, not a hundred


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def request(path: Path, mtype: str, payload: dict[str, Any] | None = None) -> Any:
    """One request to the daemon on a fresh connection; the response payload."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(120)
        sock.connect(str(path))
        sock.sendall(
            json.dumps({"type": mtype, "id": 1, "payload": payload or {}}).encode() + b"\n"
        )
        response = json.loads(read_line(sock))
    if not response.get("success"):
        raise BenchError(f"{mtype} failed: {response.get('error')}")
    return response.get("payload", {})


class Bench:
    """The home, the current daemon, and the cleanup of everything."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="ahbd-", dir="/tmp"))
        self.daemon: subprocess.Popen[bytes] | None = None

    @property
    def sock(self) -> Path:
        return self.home / "daemon.sock"

    def start_daemon(self) -> dict[str, float]:
        """Start a daemon; the times (ms) to READY=1 and to a first answered ping, and
        the daemon's own CPU time (ms, every thread) from its exec to READY=1, which a
        busy machine inflates much less than the wall-clock figures."""
        name = f"ahbd-{os.getpid()}-{time.monotonic_ns()}"
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "INVOCATION_ID")}
        argv = [PY, "-m", "agenthost", "daemon", "--home", str(self.home)]
        argv += ["--scan-interval", "0", "--log-level", "warning"]
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind("\0" + name)
            env["NOTIFY_SOCKET"] = "@" + name
            log_path = self.home / "daemon.log"
            with open(log_path, "ab") as out:
                t0 = time.monotonic_ns()
                self.daemon = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env
                )
            wait_ready(notify, self.daemon, 300, log_path)
            ready = time.monotonic_ns()
            cpu = process_cpu_ns(self.daemon.pid)
        request(self.sock, "daemon.ping")
        pinged = time.monotonic_ns()
        return {
            "ready_ms": (ready - t0) / 1e6,
            "ping_ms": (pinged - t0) / 1e6,
            "ready_cpu_ms": cpu / 1e6,
        }

    def kill_daemon(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()

    def spawn(
        self,
        ids: list[str],
        command: list[str] = AGENT,
        parallel: int = SPAWN_PARALLEL,
    ) -> list[dict[str, Any]]:
        """Spawn ``lines`` agents running ``command`` through the daemon, ``parallel`` at
        a time; the ``daemon.spawn`` responses, in the order of ``ids``."""
        errors: list[BaseException] = []
        pending = list(reversed(ids))
        spawned: dict[str, dict[str, Any]] = {}
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    agent_id = pending.pop()
                try:
                    payload = {"agent_id": agent_id, "agent": "lines", "command": command}
                    spawned[agent_id] = request(self.sock, "daemon.spawn", payload)
                except BaseException as exc:  # reported below
                    errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(parallel)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise BenchError(f"spawn failed: {errors[0]}")
        return [spawned[agent_id] for agent_id in ids]

    def wait_followed(self, count: int, timeout: float = 120) -> None:
        """Until the registry records every event of ``count`` agents as seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.closing(sqlite3.connect(self.home / "daemon.db", timeout=5)) as db:
                rows = db.execute("SELECT last_offset FROM agents").fetchall()
            if len(rows) == count and all(offset >= EVENTS for (offset,) in rows):
                return
            time.sleep(0.1)  # a poll with a deadline
        raise BenchError("the daemon did not see every agent's events in time")

    def close(self) -> None:
        """Kill the daemon and every host (their watchdogs end the agents), reap, clean."""
        self.kill_daemon()
        for lock in (self.home / "hosts").glob("*.lock"):
            with contextlib.suppress(ValueError, OSError):
                pid = json.loads(lock.read_text()).get("pid")
                if isinstance(pid, int):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # we are their subreaper: reap them all
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.05)
        shutil.rmtree(self.home, ignore_errors=True)


def measure(bench: Bench, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    rows = []
    bench.start_daemon()
    running = 0
    for size in sizes:
        log(f"{size} hosts: spawning {size - running} ...")
        bench.spawn([f"h{i:03d}" for i in range(running, size)])
        running = size
        bench.wait_followed(size)
        runs = []
        for _ in range(repeat):
            bench.kill_daemon()
            times = bench.start_daemon()
            report = request(bench.sock, "daemon.ping")["reconcile"]
            if len(report["reattached"]) != size or report["lost"]:
                raise BenchError(f"reconcile incomplete: {report}")
            runs.append({**times, "reconcile_ms": report["seconds"] * 1000})
        row = {
            "hosts": size,
            "runs": runs,
            **{
                key: round(statistics.median(r[key] for r in runs), 1)
                for key in ("ready_ms", "ping_ms", "reconcile_ms", "ready_cpu_ms")
            },
        }
        rows.append(row)
        log(
            f"  reconcile {row['reconcile_ms']:.0f} ms, ready {row['ready_ms']:.0f} ms "
            f"(daemon CPU {row['ready_cpu_ms']:.0f} ms), ping {row['ping_ms']:.0f} ms "
            f"(median of {repeat})"
        )
    return rows


def table(rows: list[dict[str, Any]], repeat: int) -> str:
    lines = [
        "| hosts | reconcile: scan -> all reattached | exec -> READY=1 "
        "| daemon CPU, exec -> READY=1 | exec -> first ping |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['hosts']} | {row['reconcile_ms']:,.0f} ms | {row['ready_ms']:,.0f} ms "
            f"| {row['ready_cpu_ms']:,.0f} ms | {row['ping_ms']:,.0f} ms |"
        )
    lines.append("")
    lines.append(
        textwrap.fill(
            f"Medians of {repeat} restarts (SIGKILL, then a new daemon) per size. The "
            "daemon's CPU time (all its threads, not its children) is robust to a busy "
            "machine; the wall-clock columns are not.",
            WIDTH,
        )
    )
    return "\n".join(lines)


def machine() -> str:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    python = platform.python_version()
    return f"{model}, {os.cpu_count()} cores, Linux {platform.release()}, Python {python}"


def rewrite_doc(text: str) -> None:
    doc = DOC.read_text()
    head, _, rest = doc.partition(START)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,50,100", help="host counts, ascending")
    parser.add_argument("--repeat", type=int, default=5, help="restarts per size")
    parser.add_argument("--quick", action="store_true", help="3 and 6 hosts, 2 restarts, no docs")
    parser.add_argument("--no-docs", action="store_true", help=f"do not rewrite {DOC.name}")
    parser.add_argument("--out", type=Path, help="results JSON path")
    args = parser.parse_args(argv)
    sizes = [3, 6] if args.quick else sorted(int(s) for s in args.sizes.split(","))
    repeat = 2 if args.quick else args.repeat
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # hosts outlive the daemons we kill: make this process their reaper, as init or
    # the service manager would be, so none is left a zombie
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    started = datetime.now(UTC)
    bench = Bench()
    try:
        rows = measure(bench, sizes, repeat)
    except BenchError as exc:
        log(f"benchmark failed: {exc}")
        return 1
    finally:
        bench.close()
    result = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "mode": "quick" if args.quick else "full",
        "rows": rows,
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"daemon-{started:%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    log(f"results: {out}")
    text = table(rows, repeat)
    print(text)
    if not (args.quick or args.no_docs):
        load = "/".join(str(x) for x in result["loadavg"])
        note = (
            f"Measured {result['date']} on {result['machine']}, load average {load} "
            "after the run (`make bench-daemon`)."
        )
        rewrite_doc(f"{textwrap.fill(note, WIDTH)}\n\n{text}")
        log(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
