"""Start-up cost of an exec'd host: CPU and memory of ``agenthost serve`` until it
answers its first ``host.ping``.

    .venv/bin/python benchmarks/startup.py [--runs 9] [--json]

Each run execs ``python -m agenthost serve --agent lines --linger 0 -- sleep infinity``
in a fresh home with a ``NOTIFY_SOCKET``, waits for READY=1, sends one ``host.ping`` on
a fresh connection, then reads the host's CPU time from ``/proc/PID/schedstat`` (first
field: nanoseconds on the CPU, robust to a busy machine, unlike wall-clock) and its
RSS and PSS from ``/proc/PID/smaps_rollup``; then stops the host. Prints the median,
the 90th percentile and the minimum of each figure. Standard library only, so that it
measures the same thing whatever else is installed.
"""

from __future__ import annotations

import argparse
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
import time
from pathlib import Path

PY = sys.executable


def read_line(sock: socket.socket) -> bytes:
    """One newline-terminated line from ``sock`` (a ping answer fits in one read)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the host closed the connection before answering")
        data += chunk
    return data


def ping(path: str) -> dict[str, object]:
    """Send ``host.ping`` on a fresh connection and return the response."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(b'{"type":"host.ping","id":"p"}\n')
        response: dict[str, object] = json.loads(read_line(sock))
    if not response.get("success"):
        raise RuntimeError(f"ping failed: {response}")
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


def one_start(tmp: Path) -> dict[str, float]:
    """Exec one host, ping it, measure it, stop it."""
    home = Path(tempfile.mkdtemp(prefix="ahs-", dir=tmp))
    argv = [PY, "-m", "agenthost", "serve", "--agent-id", "x", "--home", str(home)]
    argv += ["--agent", "lines", "--linger", "0", "--", "sleep", "infinity"]
    name = f"ahs-{secrets.token_hex(6)}"
    env = dict(os.environ)
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
                start_new_session=True,
            )
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            ping(str(home / "hosts" / "x.sock"))
            used = cpu_ms(proc.pid)
            rss, pss = memory_mib(proc.pid)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            sys.stderr.write((home / "host.log").read_text())
            raise
    # the agent (sleep) is in the host's session: take both down
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return {"cpu_ms": used, "rss_mib": rss, "pss_mib": pss}


def spread(values: list[float]) -> dict[str, float]:
    """Median, 90th percentile (nearest rank) and minimum."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(0.9 * len(ordered) + 0.5) - 1))
    return {"p50": statistics.median(ordered), "p90": ordered[rank], "min": ordered[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="host starts (default 9)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ahs-", dir="/tmp"))
    try:
        samples = []
        for _ in range(args.runs):
            samples.append(one_start(tmp))
            time.sleep(0.05)  # let the killed host's pages go before the next start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {key: spread([s[key] for s in samples]) for key in samples[0]}
    result["runs"] = {"n": args.runs}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, figures in result.items():
        if key == "runs":
            continue
        text = "  ".join(f"{name} {value:7.1f}" for name, value in figures.items())
        print(f"{key:8} {text}")
    print(f"({args.runs} starts of serve --agent lines -- sleep infinity)")


if __name__ == "__main__":
    main()
