"""The individual measurements. Each returns a plain dict that goes into the results JSON."""

from __future__ import annotations

import contextlib
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
from procs import (
    FLOOD,
    HERE,
    PY,
    BenchError,
    Host,
    Procs,
    kill_group,
    process_cpu_ns,
    read_line,
    request,
)

CLIENTS = str(HERE / "clients.py")
RELAY = str(HERE / "relay.py")
DEMO_AGENT = [PY, "-m", "agenthost.agents.demo_agent", "--pace", "0"]
LINES_AGENT = [PY, FLOOD, "--stdin"]
MiB = 1 << 20


def cpu_seconds(procs: list[psutil.Process]) -> float:
    """CPU time of the processes that still run, in seconds: every thread of each (a
    host's journal thread included), in nanoseconds (``procs.process_cpu_ns``); psutil's
    user + system times count in clock ticks (10 ms), too coarse for short runs."""
    total = 0
    for proc in procs:
        with contextlib.suppress(OSError):
            total += process_cpu_ns(proc.pid)
    return total / 1e9


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
        used = cpu_seconds([host.ps])
        ready.append((host.ready_ns - host.started_ns) / 1e6)
        pinged.append((done - host.started_ns) / 1e6)
        cpu.append(used * 1e3)
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


def attach_replay(procs: Procs, events: int, attaches: int, warmup: int = 3) -> dict[str, Any]:
    """``host.attach`` at offset 0 on a host whose ring holds the whole stream: the time
    from the send of the request to the receipt of the ``events``-th replayed event, in
    ms, over ``attaches`` fresh connections (connecting is not timed).

    The host runs the flood agent with a ring of ``2 * events`` events, floods ``events``
    lines and waits until the end marker is in; so the stream (the state event, the
    lines, the end marker: ``events + 2`` events) is all in the ring and the replay
    needs no journal read. Every attach is checked: the response must succeed and not
    be truncated, and the ``events``-th event after it must carry offset ``events``.
    """
    host = procs.start_host("lines", LINES_AGENT, ["--ring-size", str(2 * events)])
    wait_state(host, ("running",))
    request(host.socket, "host.send", {"input": trigger_text("lines", events, 0)})
    # until the end marker is the newest event (wait_flood_over would also take the
    # state event of a flood that has not begun yet)
    deadline = time.monotonic() + 60
    while not is_end("host", "lines", last_event(host)):
        if time.monotonic() > deadline:
            raise BenchError("the flood before the replay did not end")
        time.sleep(0.02)  # polling interval
    line = b'{"type":"host.attach","id":"r","payload":{"offset":0}}\n'
    times, errors = [], []
    buf = bytearray(1 << 18)
    for i in range(warmup + attaches):
        chunks = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(host.socket)
            lines = 0
            start = time.perf_counter_ns()
            sock.sendall(line)
            while lines <= events:  # the response line, then ``events`` events
                got = sock.recv_into(buf)
                if not got:
                    break
                lines += buf.count(b"\n", 0, got)
                chunks.append(bytes(buf[:got]))
            elapsed = time.perf_counter_ns() - start
        received = b"".join(chunks).split(b"\n")
        error = replay_error(received, events)
        if error:
            errors.append(f"attach {i}: {error}")
        elif i >= warmup:
            times.append(elapsed / 1e6)
    procs.stop_host(host)
    times.sort()
    return {
        "events": events,
        "attaches": attaches,
        "ring_size": 2 * events,
        "complete": not errors,
        "errors": errors[:10],
        "p50_ms": statistics.median(times) if times else 0.0,
        "p90_ms": percentile(times, 90),
        "min_ms": times[0] if times else 0.0,
        "max_ms": times[-1] if times else 0.0,
    }


def replay_error(lines: list[bytes], events: int) -> str | None:
    """What is wrong with one replay (the response line, then the events), if anything."""
    if len(lines) <= events:
        return f"{len(lines) - 1} events received, {events} expected"
    response = json.loads(lines[0])
    if not response.get("success") or response["payload"].get("truncated"):
        return f"attach response: {lines[0][:200]!r}"
    first, last = json.loads(lines[1])["offset"], json.loads(lines[events])["offset"]
    if (first, last) != (1, events):
        return f"offsets {first}..{last} replayed, 1..{events} expected"
    return None


def pss_hosts(procs: Procs, count: int, settle: float) -> dict[str, Any]:
    """``count`` idle hosts side by side (``lines`` agent ``sleep infinity``): the PSS,
    RSS and USS of each host process (not its agent), in MiB. PSS charges each shared
    page (the interpreter, libraries) to the processes sharing it in equal parts, so
    its sum is what the hosts cost together."""
    hosts = [procs.start_host("lines", ["sleep", "infinity"]) for _ in range(count)]
    for host in hosts:
        wait_state(host, ("running",))
    time.sleep(settle)  # as for idle_rss: start-up garbage collected, pages settled
    infos = [host.ps.memory_full_info() for host in hosts]
    for host in hosts:
        procs.stop_host(host)

    def stats(values: list[float]) -> dict[str, float]:
        return {"mean": statistics.fmean(values), "max": max(values), "min": min(values)}

    return {
        "hosts": count,
        "pss_mib": stats([i.pss / MiB for i in infos]),
        "rss_mib": stats([i.rss / MiB for i in infos]),
        "uss_mib": stats([i.uss / MiB for i in infos]),
    }


def flood_memory(
    procs: Procs, clients: int, count: int, runs: int, settle: float
) -> dict[str, Any]:
    """RSS of one ``lines`` host (default ring, as users run it) idle, then after a
    full-speed flood of ``count`` lines to ``clients`` clients, once the flood is over
    and ``settle`` seconds passed: what the flood leaves behind (buffers the host keeps
    or the allocator does not give back). ``runs`` fresh hosts; the run with the median
    ratio after / idle, and every ratio."""
    measured = []
    for _ in range(runs):
        host = procs.start_host("lines", LINES_AGENT)
        wait_state(host, ("running",))
        time.sleep(settle)  # as for idle_rss
        idle = rss(host.ps)
        flood = host_flood(procs, host, "lines", clients, count)
        wait_flood_over(host, "lines")
        time.sleep(settle)
        after = rss(host.ps)
        procs.stop_host(host)
        measured.append(
            {
                "idle": idle,
                "after": after,
                "ratio": after["rss_mib"] / idle["rss_mib"],
                "complete": flood["complete"],
                "dropped": flood["dropped"],
            }
        )
    ordered = sorted(measured, key=lambda m: m["ratio"])
    return {
        "clients": clients,
        "agent_lines": count,
        "runs": runs,
        **ordered[(len(ordered) - 1) // 2],
        "all_ratios": [round(m["ratio"], 3) for m in measured],
    }
