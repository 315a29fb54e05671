"""The individual measurements. Each returns a plain dict that goes into the results JSON."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import statistics
import subprocess
import time
from typing import Any

import psutil
from clients import LIVE, is_end, percentile
from procs import FLOOD, HERE, PY, BenchError, Host, Procs, kill_group, read_line, request

CLIENTS = str(HERE / "clients.py")
RELAY = str(HERE / "relay.py")
DEMO_AGENT = [PY, "-m", "agenthost.agents.demo_agent", "--pace", "0"]
LINES_AGENT = [PY, FLOOD, "--stdin"]
MiB = 1 << 20


def cpu_seconds(procs: list[psutil.Process]) -> float:
    """CPU time of the processes that still run, in seconds.

    Read from ``/proc/PID/schedstat`` (nanoseconds) when the kernel has it; psutil's
    user + system times count in clock ticks (10 ms), too coarse for short runs.
    """
    total = 0.0
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/schedstat") as fh:
                total += int(fh.read().split()[0]) / 1e9
            continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def demo_user_message(text: str) -> str:
    """The stream-json line the demo adapter would write to the agent's stdin."""
    content = [{"type": "text", "text": text}]
    message = {"role": "user", "content": content}
    return json.dumps({"type": "user", "message": message, "session_id": "default"})


def trigger_text(kind: str, count: int, rate: float) -> str:
    """What starts one flood of ``count`` lines (``rate`` 0 means full speed)."""
    return f"{count} {rate:g}" if kind == "lines" else f"/flood {count}"


def run_clients(procs: Procs, args: list[str], timeout: float) -> dict[str, Any]:
    """Run the client process to completion and return its JSON result."""
    argv = [PY, CLIENTS, "--timeout", str(timeout), *args]
    proc = procs.popen(argv, stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise BenchError("the client process hung") from exc
    if proc.returncode != 0:
        raise BenchError(f"the client process failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


def derive(result: dict[str, Any], count: int) -> dict[str, Any]:
    """Add rates: agent lines/s, events/s (per client), server CPU per agent line."""
    duration = result["duration_s"] or float("nan")
    result["lines_per_s"] = count / duration
    result["events_per_s"] = result["events_per_client"] / duration
    if "server_cpu_s" in result and result["events_per_client"]:
        result["server_cpu_us_per_line"] = 1e6 * result["server_cpu_s"] / count
        result["server_cpu_util"] = result["server_cpu_s"] / duration
    return result


def host_flood(
    procs: Procs, host: Host, kind: str, clients: int, count: int, rate: float = 0.0
) -> dict[str, Any]:
    """One flood through a host, measured by ``clients`` attached clients."""
    latency = rate > 0
    timeout = 30 + (count / rate if latency else count / 2000)
    args = ["--socket", host.socket, "--proto", "host", "--kind", kind, "--count", str(count)]
    args += ["--clients", str(clients), "--trigger", trigger_text(kind, count, rate)]
    args += ["--latency"] if latency else []
    wait_flood_over(host, kind)
    server = [host.ps]
    cpu0, agent0 = cpu_seconds(server), cpu_seconds(host.agents)
    result = run_clients(procs, args, timeout)
    result["server_cpu_s"] = round(cpu_seconds(server) - cpu0, 4)
    result["agent_cpu_s"] = round(cpu_seconds(host.agents) - agent0, 4)
    return derive(result, count)


def relay_flood(
    procs: Procs, kind: str, clients: int, count: int, rate: float = 0.0
) -> dict[str, Any]:
    """The same flood through the minimal relay (a fresh relay and agent per run)."""
    latency = rate > 0
    timeout = 30 + (count / rate if latency else count / 2000)
    path = str(procs.tempdir() / "relay.sock")
    text = trigger_text(kind, count, rate)
    trigger = text if kind == "lines" else demo_user_message(text)
    agent = LINES_AGENT if kind == "lines" else DEMO_AGENT
    argv = [PY, RELAY, "--socket", path, "--clients", str(clients), "--trigger", trigger]
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # as the demo adapter runs the demo
    relay = procs.popen([*argv, "--", *agent], stdout=subprocess.PIPE, env=env)
    assert relay.stdout is not None
    if not select.select([relay.stdout], [], [], 30)[0] or relay.stdout.readline() != b"READY\n":
        raise BenchError("the relay did not start")
    args = ["--socket", path, "--proto", "raw", "--kind", kind, "--count", str(count)]
    args += ["--clients", str(clients)] + (["--latency"] if latency else [])
    result = run_clients(procs, args, timeout)
    try:
        out, _ = relay.communicate(timeout=30)
        result["server_cpu_s"] = json.loads(out.splitlines()[-1])["cpu_s"]
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        result["complete"] = False
        result["errors"].append("the relay did not finish cleanly")
    return derive(result, count)


def last_event(host: Host) -> bytes:
    """The newest event of the host's stream, or one of the newest during a flood
    (b"" if there is none yet)."""

    def attach(offset: int, event: bool) -> tuple[int, bytes]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(host.socket)
            request = {"type": "host.attach", "payload": {"offset": offset}}
            sock.sendall(json.dumps(request).encode() + b"\n")
            reader = sock.makefile("rb")
            head: int = json.loads(reader.readline())["payload"]["stream_offset"]
            return head, reader.readline().rstrip(b"\n") if event else b""

    head, _ = attach(LIVE, False)  # nothing is replayed: the response tells the head
    if head == 0:
        return b""
    return attach(head - 1, True)[1]  # the event at the head comes first


def wait_flood_over(host: Host, kind: str, timeout: float = 120) -> None:
    """Wait until the agent's last flood is over (its end marker is the newest event).

    After a run in which clients were dropped the agent is still flooding; the next run
    must not see the rest of it.
    """
    deadline = time.monotonic() + timeout
    while True:
        event = last_event(host)
        # before the first flood a lines agent's newest event is its state change
        if is_end("host", kind, event) or (kind == "lines" and b'"type":"state"' in event):
            return
        if time.monotonic() > deadline:
            raise BenchError(f"the {kind} agent did not finish its flood in {timeout:g}s")
        time.sleep(0.05)  # polling interval


def wait_state(host: Host, states: tuple[str, ...], timeout: float = 30) -> None:
    """Poll ``host.status`` until the agent has a pid and is in one of ``states``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent = request(host.socket, "host.status")["agent"]
        if agent["pid"] and agent["state"] in states:
            return
        time.sleep(0.02)
    raise BenchError(f"agent not in {states} within {timeout:g}s")


def rss(proc: psutil.Process) -> dict[str, float]:
    """Resident and unique memory of a process, in MiB."""
    info = proc.memory_full_info()
    return {"rss_mib": info.rss / MiB, "uss_mib": info.uss / MiB}


def idle_rss(procs: Procs, kind: str, settle: float) -> dict[str, float]:
    """Host memory once its agent runs and is idle (lines: ``sleep infinity``)."""
    command = ["sleep", "infinity"] if kind == "lines" else []
    host = procs.start_host(kind, command)
    wait_state(host, ("idle",) if kind == "demo" else ("running",))
    time.sleep(settle)  # let start-up garbage be collected and pages settle
    result = rss(host.ps)
    procs.stop_host(host)
    return result


def relay_idle_rss(procs: Procs, settle: float) -> dict[str, float]:
    """The relay's memory while it waits for clients: a bare Python process, for scale."""
    path = str(procs.tempdir() / "relay.sock")
    relay = procs.popen(
        [PY, RELAY, "--socket", path, "--", "sleep", "infinity"], stdout=subprocess.PIPE
    )
    assert relay.stdout is not None
    if not select.select([relay.stdout], [], [], 30)[0]:
        raise BenchError("the relay did not start")
    relay.stdout.readline()
    time.sleep(settle)
    result = rss(psutil.Process(relay.pid))
    kill_group(relay, signal.SIGKILL)  # the relay and its agent share a process group
    relay.wait()
    return result


def startup(procs: Procs, runs: int) -> dict[str, Any]:
    """Exec of ``serve`` to READY=1, and to a first answered ``host.ping``, in ms; and
    the CPU time (user + system) the host spent until that answer, which a busy
    machine inflates much less than the wall-clock figures."""
    ready, pinged, cpu = [], [], []
    for _ in range(runs):
        host = procs.start_host("lines", ["sleep", "infinity"])
        request(host.socket, "host.ping")
        done = time.monotonic_ns()
        times = host.ps.cpu_times()
        ready.append((host.ready_ns - host.started_ns) / 1e6)
        pinged.append((done - host.started_ns) / 1e6)
        cpu.append((times.user + times.system) * 1e3)
        procs.stop_host(host)
    return {
        "runs": runs,
        "ready_ms": spread(ready),
        "ping_ms": spread(pinged),
        "cpu_ms": spread(cpu),
    }


def spread(values: list[float]) -> dict[str, float]:
    """Median and 90th percentile (nearest rank) of a few samples."""
    ordered = sorted(values)
    return {"p50": statistics.median(ordered), "p90": percentile(ordered, 90), "min": ordered[0]}


def ping_rtt(host: Host, count: int, warmup: int = 50) -> dict[str, Any]:
    """Round trips of sequential ``host.ping`` on one raw connection, in µs."""
    line = b'{"type":"host.ping","id":"p"}\n'
    rtts = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(host.socket)
        for i in range(warmup + count):
            start = time.perf_counter_ns()
            sock.sendall(line)
            read_line(sock)
            if i >= warmup:
                rtts.append((time.perf_counter_ns() - start) / 1e3)
    rtts.sort()
    p50, p99 = percentile(rtts, 50), percentile(rtts, 99)
    return {"count": count, "p50_us": p50, "p99_us": p99, "max_us": rtts[-1]}
