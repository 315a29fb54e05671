"""What the sandbox's network proxy costs: throughput through a CONNECT tunnel and the
CPU per MB of the proxy and of the bridge, and the bridge's start.

``.venv/bin/python benchmarks/sandbox_proxy.py [--mib 256] [--runs 3]`` starts, as
processes of their own: an upstream on 127.0.0.1 (it sends N bytes, or counts what it
is sent), the proxy (:func:`agenthost.sandbox.proxy.start_proxy` on uvloop, as in a
host) on a Unix socket, and the bridge (``python -P -m agenthost.sandbox.inner``, in
front of a ``sleep``). Then it moves ``--mib`` MiB down (upstream to client) and up
(client to upstream) three ways: straight to the upstream (the baseline), through the
proxy's socket (CONNECT, "proxy alone"), and through the bridge's TCP port ("proxy +
bridge", what an agent in a sandbox gets). It reports MB/s (wall; quote it as a ratio
to the baseline of the same run) and the CPU seconds per MB of the proxy and of the
bridge (their process CPU times, ``/proc/PID/stat``), the median of ``--runs``.

``bridge_start`` is the CPU of ``inner -- true`` (the command's side: what delays the
agent's start) and of the same with the bridge child's own CPU (this process as a child
subreaper reaps it), per start, against a bare ``python -P -c pass``.

``--quick`` runs it small (the smoke test). Everything it starts is ended on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000
BUFFER = 1 << 20
PR_SET_CHILD_SUBREAPER = 36


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the processes -------------------------------------------------------------------


def serve_upstream() -> None:
    """``--upstream``: per connection, ``GET n`` sends n bytes; ``PUT`` counts until the
    end and answers the count."""
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    print(server.getsockname()[1], flush=True)
    chunk = b"x" * BUFFER

    def handle(conn: socket.socket) -> None:
        with conn:
            command = b""
            while not command.endswith(b"\n"):
                command += conn.recv(1)
            if command.startswith(b"GET "):
                left = int(command[4:])
                while left:
                    left -= conn.send(memoryview(chunk)[: min(left, BUFFER)])
            else:
                total, buffer = 0, bytearray(BUFFER)
                while size := conn.recv_into(buffer):
                    total += size
                conn.sendall(b"%d" % total)

    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def serve_proxy(path: str, port: int) -> None:
    """``--proxy PATH PORT``: the proxy, allowing 127.0.0.1:PORT, on uvloop."""
    import uvloop

    from agenthost.log import configure_logging
    from agenthost.sandbox.allowlist import AllowList
    from agenthost.sandbox.proxy import start_proxy

    configure_logging("warning")

    async def main() -> None:
        await start_proxy(Path(path), AllowList.parse([f"127.0.0.1:{port}"]))
        print("ready", flush=True)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # polling a condition


# --- the transfers -------------------------------------------------------------------


def tunnel(sock: socket.socket, port: int) -> socket.socket:
    target = f"127.0.0.1:{port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += sock.recv(1)
    if not head.startswith(b"HTTP/1.1 200 "):
        raise RuntimeError(f"CONNECT refused: {head!r}")
    return sock


def download(sock: socket.socket, size: int) -> None:
    sock.sendall(b"GET %d\n" % size)
    total, buffer = 0, bytearray(BUFFER)
    while got := sock.recv_into(buffer):
        total += got
    if total != size:
        raise RuntimeError(f"received {total} of {size} bytes")


def upload(sock: socket.socket, size: int) -> None:
    sock.sendall(b"PUT\n")
    chunk = memoryview(b"y" * BUFFER)
    left = size
    while left:
        left -= sock.send(chunk[: min(left, BUFFER)])
    sock.shutdown(socket.SHUT_WR)
    answer = b""
    while got := sock.recv(64):
        answer += got
    if int(answer) != size:
        raise RuntimeError(f"the upstream counted {answer!r} of {size} bytes")


def measure(
    opener: Callable[[], socket.socket],
    size: int,
    watched: dict[str, psutil.Process],
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for direction, move in (("down", download), ("up", upload)):
        before = {name: cpu(p) for name, p in watched.items()}
        started = time.perf_counter()
        with opener() as sock:
            move(sock, size)
        wall = time.perf_counter() - started
        row: dict[str, Any] = {"mb_per_s": size / MB / wall}
        for name, process in watched.items():
            row[f"{name}_cpu_s_per_mb"] = (cpu(process) - before[name]) / (size / MB)
        figures[direction] = row
    return figures


def median_rows(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        direction: {
            key: statistics.median(run[direction][key] for run in runs)
            for key in runs[0][direction]
        }
        for direction in runs[0]
    }


def bridge_start(runs: int, sock: str) -> dict[str, float]:
    """CPU ms per start: bare python, inner's command side, inner with its bridge."""

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def per_run(argv: list[str], reap_orphans: bool) -> float:
        before = children_cpu()
        for _ in range(runs):
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            if reap_orphans:
                # the bridge, orphaned when `true` ended, is ours to reap: wait for it
                os.waitpid(-1, 0)
        return (children_cpu() - before) / runs * 1000

    port = free_port()
    inner = [PY, "-P", "-m", "agenthost.sandbox.inner", "--listen", f"127.0.0.1:{port}"]
    inner += ["--socket", sock, "--", "true"]
    figures = {
        "python_bare_ms": per_run([PY, "-P", "-c", "pass"], False),
        "inner_command_side_ms": per_run(inner, False),
    }
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        figures["inner_with_bridge_ms"] = per_run(inner, True)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    return figures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run(size: int, runs: int, starts: int) -> dict[str, Any]:
    started: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="ah-bench-", dir="/tmp") as tmp:
        try:
            upstream = subprocess.Popen([PY, __file__, "--upstream"], stdout=subprocess.PIPE)
            started.append(upstream)
            assert upstream.stdout is not None
            up_port = int(upstream.stdout.readline())
            path = os.path.join(tmp, "proxy.sock")
            proxy = subprocess.Popen(
                [PY, __file__, "--proxy", path, str(up_port)], stdout=subprocess.PIPE
            )
            started.append(proxy)
            assert proxy.stdout is not None
            if proxy.stdout.readline() != b"ready\n":
                raise RuntimeError("the proxy did not start")
            bridge_port = free_port()
            inner = subprocess.Popen(
                [PY, "-P", "-m", "agenthost.sandbox.inner", "--listen"]
                + [f"127.0.0.1:{bridge_port}", "--socket", path, "--", "sleep", "3600"]
            )
            started.append(inner)
            wait_port(bridge_port)
            bridge = psutil.Process(inner.pid).children()[0]
            proxy_process = psutil.Process(proxy.pid)

            def direct() -> socket.socket:
                return socket.create_connection(("127.0.0.1", up_port))

            def via_proxy() -> socket.socket:
                sock = socket.socket(socket.AF_UNIX)
                sock.connect(path)
                return tunnel(sock, up_port)

            def via_bridge() -> socket.socket:
                return tunnel(socket.create_connection(("127.0.0.1", bridge_port)), up_port)

            results: dict[str, Any] = {"mib": size / (1 << 20), "runs": runs}
            ways: list[tuple[str, Callable[[], socket.socket], dict[str, psutil.Process]]] = [
                ("direct", direct, {}),
                ("proxy", via_proxy, {"proxy": proxy_process}),
                ("proxy_bridge", via_bridge, {"proxy": proxy_process, "bridge": bridge}),
            ]
            samples: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in ways}
            for i in range(runs):  # alternating, so that the machine's load hits each
                for name, opener, watched in ways:
                    log(f"run {i + 1}/{runs}: {name}")
                    samples[name].append(measure(opener, size, watched))
            for name, _, _ in ways:
                results[name] = median_rows(samples[name])
            for name in ("proxy", "proxy_bridge"):
                for direction in ("down", "up"):
                    row = results[name][direction]
                    row["ratio_to_direct"] = (
                        row["mb_per_s"] / results["direct"][direction]["mb_per_s"]
                    )
            results["bridge_start"] = bridge_start(starts, path)
            return results
        finally:
            for process in reversed(started):
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def table(results: dict[str, Any]) -> str:
    lines = [
        "| path | direction | MB/s | × direct | proxy CPU ms/MB | bridge CPU ms/MB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in ("direct", "proxy", "proxy_bridge"):
        for direction in ("down", "up"):
            row = results[name][direction]
            ratio = row.get("ratio_to_direct")
            lines.append(
                f"| {name.replace('_', ' + ')} | {direction} | {row['mb_per_s']:.0f} | "
                + (f"{ratio:.2f}" if ratio else "1")
                + f" | {row.get('proxy_cpu_s_per_mb', 0) * 1000:.2f} | "
                + f"{row.get('bridge_cpu_s_per_mb', 0) * 1000:.2f} |"
            )
    start = results["bridge_start"]
    lines.append("")
    lines.append(
        f"start CPU per run: python -P -c pass {start['python_bare_ms']:.1f} ms, "
        f"inner's command side {start['inner_command_side_ms']:.1f} ms, "
        f"inner with its bridge {start['inner_with_bridge_ms']:.1f} ms"
    )
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--upstream"]:
        serve_upstream()
        return
    if sys.argv[1:2] == ["--proxy"]:
        serve_proxy(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--mib", type=int, default=256, help="MiB moved each way per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--starts", type=int, default=50, help="bridge starts measured")
    args = parser.parse_args()
    if args.quick:
        args.mib, args.runs, args.starts = 4, 1, 3
    results = run(args.mib << 20, args.runs, args.starts)
    print(table(results))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
