"""Hosts started by a daemon: the CPU each spent from its creation to idle, and its memory.

A daemon runs in a private home; ``count`` idle ``lines`` hosts (``sleep infinity``) are
spawned through it one after the other (``daemon.spawn``, the way ``agenthost run`` and
every daemon client start agents). Once each host answered a ping, its agent runs and the
daemon follows every one of them, this reads for each host (found by the ``host_pid`` of
its spawn response, nothing else):

* its CPU time since it was created (``procs.process_cpu_ns``: since the fork, or since
  the fork before the exec, of the host process itself; every thread, not its agent);
* after ``settle`` seconds, its PSS, RSS and USS (psutil ``memory_full_info``) and its
  shared dirty memory (``/proc/PID/smaps_rollup``): pages written by a parent before a
  fork and still shared copy-on-write, ~0 for a host that was exec'd;
* how it was started: ``exec`` when its parent is the daemon (the daemon started the
  ``serve`` command), ``fork`` otherwise (forked by a process that has the host's code
  imported, and reparented if that was a double fork). The figures do not depend on it.

Also the PSS of the daemon and of its other children (a host factory, when the daemon has
one), and the CPU time each of them spent per spawn (their CPU time before the first spawn
and after the last, over ``count``). The result goes into the results JSON under
``spawned``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

import psutil
from daemon import Bench, request
from procs import BenchError, process_cpu_ns, subreaper
from procs import request as host_request

MiB = 1 << 20
IDLE = ["sleep", "infinity"]


def smaps_rollup(text: str) -> dict[str, int]:
    """The ``Name: N kB`` lines of ``/proc/PID/smaps_rollup``, in bytes; anything else
    (the header line, a malformed line) is skipped."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or len(parts) != 2 or parts[1] != "kB" or not parts[0].isdigit():
            continue
        fields[name.strip()] = int(parts[0]) * 1024
    return fields


def stats(values: list[float]) -> dict[str, float]:
    """Median, mean, min and max of a non-empty list."""
    return {
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
    }


def start_mode(parent: int, daemon_pid: int) -> str:
    """``exec`` when the daemon itself started the host's process, else ``fork``."""
    return "exec" if parent == daemon_pid else "fork"


def wait_idle(socket_path: str, timeout: float = 30) -> None:
    """Until the host answers a ping and its agent runs (for ``sleep infinity``, idle)."""
    host_request(socket_path, "host.ping")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent = host_request(socket_path, "host.status")["agent"]
        if agent["pid"] and agent["state"] == "running":
            return
        time.sleep(0.02)  # polling interval
    raise BenchError(f"the agent of {socket_path} is not running within {timeout:g}s")


def wait_followed(bench: Bench, ids: list[str], timeout: float = 60) -> None:
    """Until the daemon runs every agent of ``ids`` and has seen its first event."""
    deadline = time.monotonic() + timeout
    want = set(ids)
    while time.monotonic() < deadline:
        agents = request(bench.sock, "daemon.list")["agents"]
        seen = {
            a["agent_id"]
            for a in agents
            if a["status"] == "running" and a.get("last_offset", 0) >= 1
        }
        if want <= seen:
            return
        time.sleep(0.05)  # polling interval
    raise BenchError("the daemon did not follow every spawned host in time")


def memory(pid: int) -> dict[str, float]:
    """PSS, RSS, USS and shared dirty memory of one process, in MiB."""
    info = psutil.Process(pid).memory_full_info()
    shared_dirty = 0
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            shared_dirty = smaps_rollup(fh.read()).get("Shared_Dirty", 0)
    return {
        "pss_mib": info.pss / MiB,
        "rss_mib": info.rss / MiB,
        "uss_mib": info.uss / MiB,
        "shared_dirty_mib": shared_dirty / MiB,
    }


def measure(count: int, settle: float) -> dict[str, Any]:
    """Spawn ``count`` idle hosts through a new daemon and read their figures."""
    with subreaper():
        bench = Bench()
        try:
            bench.start_daemon()
            assert bench.daemon is not None
            return _measure(bench, bench.daemon.pid, count, settle)
        finally:
            bench.close()


def _cpu_of(pids: list[int]) -> dict[int, int]:
    """CPU time (ns) of each of ``pids`` that still runs."""
    used = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            used[pid] = process_cpu_ns(pid)
    return used


def _children(pid: int) -> list[int]:
    return [child.pid for child in psutil.Process(pid).children()]


def _measure(bench: Bench, daemon_pid: int, count: int, settle: float) -> dict[str, Any]:
    ids = [f"s{i:03d}" for i in range(count)]
    # what the daemon and its children (a factory) spend on the spawns: their CPU before
    helpers_before = _cpu_of([daemon_pid, *_children(daemon_pid)])
    hosts = []
    # one at a time: hosts starting side by side on a small machine would inflate each
    # other's CPU time (caches), which is what is measured here
    for spawned in (bench.spawn([agent_id], IDLE, parallel=1)[0] for agent_id in ids):
        wait_idle(spawned["socket_path"])
        hosts.append(spawned)
    wait_followed(bench, ids)
    pids = [int(h["host_pid"]) for h in hosts]
    cpu = [process_cpu_ns(pid) for pid in pids]
    others = [pid for pid in _children(daemon_pid) if pid not in pids]
    helpers = _cpu_of([daemon_pid, *others])
    time.sleep(settle)  # start-up garbage collected and pages settled, as for idle_rss
    idle_cpu = [process_cpu_ns(pid) - before for pid, before in zip(pids, cpu, strict=True)]
    rows: list[dict[str, Any]] = []
    for pid, used, idle in zip(pids, cpu, idle_cpu, strict=True):
        rows.append(
            {
                "pid": pid,
                "started": start_mode(psutil.Process(pid).ppid(), daemon_pid),
                "cpu_ms": used / 1e6,
                "idle_cpu_ms": idle / 1e6,
                **memory(pid),
            }
        )

    def helper(pid: int) -> dict[str, Any]:
        """A process that works for the hosts: its memory, its CPU per spawn."""
        spent = helpers.get(pid, 0) - helpers_before.get(pid, helpers.get(pid, 0))
        return {"pid": pid, "spawn_cpu_ms": spent / 1e6 / count, **memory(pid)}

    children = []
    for pid in others:
        with contextlib.suppress(psutil.Error, OSError):
            cmdline = " ".join(psutil.Process(pid).cmdline()).strip()[:200]
            children.append({**helper(pid), "cmdline": cmdline})
    started = [r["started"] for r in rows]
    pss_total = sum(r["pss_mib"] for r in rows) + sum(c["pss_mib"] for c in children)
    return {
        "hosts": count,
        "settle_s": settle,
        "started": {mode: started.count(mode) for mode in sorted(set(started))},
        **{
            key: stats([r[key] for r in rows])
            for key in ("cpu_ms", "idle_cpu_ms", "pss_mib", "rss_mib", "uss_mib")
        },
        "shared_dirty_mib": stats([r["shared_dirty_mib"] for r in rows]),
        # what each agent costs with the daemon's other children (a factory) shared out
        "pss_with_children_mib": pss_total / count,
        "daemon": helper(daemon_pid),
        "daemon_children": children,
        "per_host": rows,
    }
