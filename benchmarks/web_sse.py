"""What N Server-Sent Event streams cost the web gateway: its CPU time and PSS.

``.venv/bin/python benchmarks/web_sse.py [--sizes 1,10,50,200] [--flood 3000]
[--tree NAME=PATH ...]`` starts a
demo agent and ``agenthost web`` in a fresh home, and for each size opens N streams of
``GET /api/agents/demo/events`` (from the agent's head; spread over ten read tokens, as
the gateway caps the streams of one), makes the agent print
``--flood`` messages, and waits until every stream has the turn's result. Per size it
reports the PSS of a fresh gateway with the streams open and after the flood, the CPU
seconds it spent delivering the flood to them, and that per thousand events
delivered (the same figure as microseconds of CPU per event per browser; the default
flood is large enough for the CPU of one browser's to span many of the kernel's 10 ms
ticks).
Every stream must receive
every offset once, in order, or the run fails. It prints a table and the JSON of the
figures; everything it started is stopped on exit.

``--tree NAME=PATH`` (repeatable) runs the gateway from the source tree at PATH (e.g.
a ``git worktree add /tmp/base-web COMMIT`` of an older commit), the host and the
clients staying this tree's: the trees take turns at each size, in one run, so that
two versions of the gateway are compared on the same machine at the same time.
Without it, the gateway is this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import psutil

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


async def deliver(
    url: str, token: str, viewers: list[str], size: int, flood: int
) -> dict[str, Any]:
    """Open ``size`` streams (spread over the ``viewers`` tokens: the gateway caps the
    streams of one token), flood the agent, check every stream; the figures."""
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=size + 10)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as api:
        start = (await api.get("/api/agents/demo/history", params={"limit": 1})).json()["offset"]
        opened = asyncio.Event()
        count = 0

        async def stream(viewer: str) -> list[int]:
            nonlocal count
            seen: list[int] = []
            async with api.stream(
                "GET",
                "/api/agents/demo/events",
                params={"after": start},
                headers={"Authorization": f"Bearer {viewer}"},
            ) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"a stream was refused: {(await response.aread())!r}")
                count += 1
                if count == size:
                    opened.set()
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        seen.append(int(line[4:]))
                    elif line.startswith("data: ") and '"type":"result"' in line:
                        return seen
            raise RuntimeError("a stream ended early")

        readers = [asyncio.create_task(stream(viewers[n % len(viewers)])) for n in range(size)]
        await asyncio.wait_for(opened.wait(), 60)
        gateway = psutil.Process(int(os.environ["WEB_SSE_GATEWAY_PID"]))
        pss = gateway.memory_full_info().pss
        before = cpu_seconds(gateway)
        await api.post("/api/agents/demo/send", json={"input": f"/flood {flood}"})
        results = await asyncio.wait_for(asyncio.gather(*readers), 300)
        spent = cpu_seconds(gateway) - before
        pss_after = gateway.memory_full_info().pss
    last = results[0][-1]
    for seen in results:
        if seen != list(range(start + 1, last + 1)):
            raise RuntimeError("a stream missed or repeated an event")
    events = (last - start) * size
    return {
        "streams": size,
        "events_per_stream": last - start,
        "gateway_pss_mib": round(pss / 2**20, 1),
        "gateway_pss_after_mib": round(pss_after / 2**20, 1),
        "gateway_cpu_s": round(spent, 2),
        "cpu_ms_per_1000_events": round(spent * 1e6 / events, 2),
    }


def run_gateway(env: dict[str, str], tree: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """``agenthost web`` of the source ``tree`` on a free port: the process, the admin
    token if it printed one (the home's first start), and its URL."""
    web = subprocess.Popen(
        [PY, "-m", "agenthost", "web", "--listen", "127.0.0.1:0", "--log-level", "warning"],
        env={**env, "PYTHONPATH": str(tree)}, cwd=tree,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert web.stdout is not None
    token = ""
    line = web.stdout.readline().decode()
    if line.startswith("token admin: "):  # the first start of the home
        token = line.removeprefix("token admin: ").strip()
        line = web.stdout.readline().decode()
    return web, token, line.split()[-1]


VIEWERS = 10
"""Read tokens the streams are spread over: 200 streams are 20 per token, below the
gateway's cap per token (docs/web.md, Limits)."""


def add_viewer(env: dict[str, str], name: str) -> str:
    """A new read token of the benchmark's home."""
    done = subprocess.run(
        [PY, "-m", "agenthost", "web", "token", "add", name, "--scope", "read"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.strip()


def parse_trees(given: list[str]) -> list[tuple[str, Path]]:
    """``NAME=PATH`` options as (name, resolved path); this tree when none is given."""
    trees = []
    for item in given or [f"this={ROOT}"]:
        name, sep, path = item.partition("=")
        if not sep or not name or not (Path(path) / "agenthost" / "__init__.py").is_file():
            raise SystemExit(f"--tree wants NAME=PATH of a source tree, not {item!r}")
        trees.append((name, Path(path).resolve()))
    return trees


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,50,200")
    parser.add_argument("--flood", type=int, default=3000)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    trees = parse_trees(args.tree)
    home = Path(tempfile.mkdtemp(prefix="ah-bench-web-", dir="/tmp"))
    env = {**os.environ, "AGENTHOST_HOME": str(home), "AGENTHOST_DEMO_PACE": "0"}
    procs: list[subprocess.Popen[bytes]] = []
    token = ""
    viewers: list[str] = []
    try:
        host = subprocess.Popen(
            [PY, "-m", "agenthost", "serve", "--agent-id", "demo", "--ring-size", "100000"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(host)
        rows = []
        for size in sizes:
            for name, tree in trees:
                log(f"{name}: {size} streams, /flood {args.flood} ...")
                web, admin, url = run_gateway(env, tree)
                token = token or admin
                procs.append(web)
                os.environ["WEB_SSE_GATEWAY_PID"] = str(web.pid)
                while not (home / "hosts" / "demo.sock").exists():
                    if host.poll() is not None:
                        raise RuntimeError("the demo host exited")
                    asyncio.run(asyncio.sleep(0.05))  # waiting for the host's socket
                if not viewers:
                    viewers = [add_viewer(env, f"bench-{n}") for n in range(VIEWERS)]
                row = asyncio.run(deliver(url, token, viewers, size, args.flood))
                rows.append({"tree": name, **row})
                web.terminate()  # a fresh gateway per size: its memory is that size's
                web.wait(30)
                assert web.stdout is not None
                web.stdout.close()
                procs.remove(web)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    print(
        f"{'tree':>6} {'streams':>8} {'events each':>12} {'PSS MiB':>8} {'after':>6} "
        f"{'CPU s':>7} {'us/event/browser':>17} {'x 1 browser':>12}"
    )
    for r in rows:
        one = next((o for o in rows if o["tree"] == r["tree"] and o["streams"] == 1), None)
        ratio = (
            f"{r['cpu_ms_per_1000_events'] / one['cpu_ms_per_1000_events']:.2f}"
            if one and one["cpu_ms_per_1000_events"]
            else "-"
        )
        print(
            f"{r['tree']:>6} {r['streams']:>8} {r['events_per_stream']:>12} "
            f"{r['gateway_pss_mib']:>8} {r['gateway_pss_after_mib']:>6} {r['gateway_cpu_s']:>7} "
            f"{r['cpu_ms_per_1000_events']:>17} {ratio:>12}"
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
