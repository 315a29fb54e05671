"""What a terminal agent's output costs through the web gateway, to SSE readers and to
the page's xterm.js in Chromium.

``.venv/bin/python benchmarks/web_terminal.py [--mib 8] [--readers 1,10]`` starts, in
a fresh home, a terminal agent (``--agent pty``: a Python program that writes
``--mib`` MiB of 80-column text lines each time it reads a key, then ``DONE``) and
``agenthost web``. For each count of readers it opens that many
``GET /api/agents/flood/events?after=HEAD`` streams (Python, httpx), types the key,
and waits until every stream has every byte (the count is checked); then it opens the
agent's page in Chromium (Debian's, headless, through Playwright), types the key there
and waits until xterm.js shows ``DONE``. It reports the CPU seconds the host, the
gateway and Chromium (all its processes) spent, per MiB, the gateway's PSS after, and
the wall time of each row relative to the one-reader row of the same run. Everything it
started is stopped on exit.
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
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

LINE = 80
sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import PY, cpu, pss_mib  # noqa: E402

SCREENFUL = str(Path(__file__).resolve().parent / "agents" / "screenful.py")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def chromium_cpu() -> float:
    """The CPU seconds of every Chromium process this benchmark started."""
    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name():
                total += cpu(p)
        except psutil.NoSuchProcess:
            pass
    return total


async def readers(url: str, token: str, count: int, mib: int, rounds: int) -> float:
    """Open ``count`` streams after the head, type the key (the flood's ``rounds``-th),
    wait for every byte; the wall seconds."""
    want = mib * 1024 * 1024 + len(f"DONE {rounds}\r\n")
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=count + 5)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as api:
        head = (await api.get("/api/agents/flood/screen")).json()["offset"]
        opened = 0
        ready = asyncio.Event()

        async def stream() -> int:
            nonlocal opened
            got = 0
            async with api.stream("GET", f"/api/agents/flood/events?after={head}") as r:
                opened += 1
                if opened == count:
                    ready.set()
                async for line in r.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event.get("type") == "terminal":
                        got += len(event["data"].encode())
                        if got >= want:
                            return got
            return got

        tasks = [asyncio.create_task(stream()) for _ in range(count)]
        await ready.wait()
        start = time.monotonic()
        await api.post("/api/agents/flood/input", json={"data": "g"})
        got = await asyncio.gather(*tasks)
        wall = time.monotonic() - start
        assert all(g == want for g in got), got
        return wall


def page(url: str, token: str, rounds: int) -> tuple[float, float]:
    """The page's xterm.js gets one flood: (wall seconds, Chromium's CPU seconds)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        ctx = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=url)
        pg = ctx.new_page()
        pg.goto(url)
        pg.locator("#token").fill(token)
        pg.locator("#login button[type=submit]").click()
        pg.locator('.agent[data-key="flood"] a').click()
        pg.wait_for_function(
            "() => { const t = document.getElementById('terminal');"
            " return t && t.terminalView && t.terminalView.applied().length > 0; }"
        )
        before = chromium_cpu()
        start = time.monotonic()
        pg.locator("#terminal").click()
        pg.keyboard.type("g")
        pg.wait_for_function(
            # not async: a promise would be truthy at once
            "(n) => document.getElementById('terminal').terminalView.lines()"
            ".some((l) => l.endsWith('DONE ' + n))",
            arg=rounds,
            timeout=300_000,
            polling=100,
        )
        wall = time.monotonic() - start
        used = chromium_cpu() - before
        applied = pg.evaluate("() => document.getElementById('terminal').terminalView.applied()")
        events = [a for a in applied if isinstance(a, int)]
        assert events == list(range(events[0], events[-1] + 1)), "an event missed or twice"
        browser.close()
    return wall, used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--readers", default="1,10")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ah-bench-webterm-", dir="/tmp"))
    env = {**os.environ, "AGENTHOST_HOME": str(home)}
    procs: list[subprocess.Popen[bytes]] = []
    rows: list[dict[str, Any]] = []
    try:
        host = subprocess.Popen(
            [PY, "-m", "agenthost", "serve", "--agent-id", "flood", "--agent", "pty",
             "--size", "80x24", "--", PY, SCREENFUL, str(args.mib)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(host)
        web = subprocess.Popen(
            [PY, "-m", "agenthost", "web", "--listen", "127.0.0.1:0", "--log-level", "warning"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(web)
        assert web.stdout is not None
        token = web.stdout.readline().decode().removeprefix("token admin: ").strip()
        url = web.stdout.readline().decode().split()[-1]
        while not (home / "hosts" / "flood.sock").exists():
            time.sleep(0.05)  # the host's socket appears once it listens
        hostp, webp = psutil.Process(host.pid), psutil.Process(web.pid)

        def measure(name: str, run: Any) -> None:
            h0, w0 = cpu(hostp), cpu(webp)
            wall, chrome = run()
            h, w = cpu(hostp) - h0, cpu(webp) - w0
            rows.append(
                {
                    "readers": name,
                    "mib": args.mib,
                    "wall_s": round(wall, 2),
                    "host_cpu_s_per_mib": round(h / args.mib, 3),
                    "gateway_cpu_s_per_mib": round(w / args.mib, 3),
                    "chromium_cpu_s_per_mib": None
                    if chrome is None
                    else round(chrome / args.mib, 3),
                    "gateway_pss_mib": round(pss_mib(webp), 1),
                }
            )
            log(str(rows[-1]))

        counts = [int(c) for c in args.readers.split(",")]
        for n, count in enumerate(counts, 1):
            log(f"{count} SSE readers, {args.mib} MiB ...")
            measure(
                f"{count} SSE",
                lambda c=count, n=n: (asyncio.run(readers(url, token, c, args.mib, n)), None),
            )
        log(f"the page in Chromium, {args.mib} MiB ...")
        measure("page (xterm.js)", lambda: page(url, token, len(counts) + 1))
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    base = rows[0]["wall_s"] or 1
    print(
        f"{'readers':>16} {'host CPU s/MiB':>15} {'gateway CPU s/MiB':>18} "
        f"{'Chromium CPU s/MiB':>19} {'gateway PSS MiB':>16} {'wall (x 1 reader)':>18}"
    )
    for r in rows:
        chrome = "-" if r["chromium_cpu_s_per_mib"] is None else r["chromium_cpu_s_per_mib"]
        print(
            f"{r['readers']:>16} {r['host_cpu_s_per_mib']:>15} {r['gateway_cpu_s_per_mib']:>18} "
            f"{chrome:>19} {r['gateway_pss_mib']:>16} {r['wall_s'] / base:>18.2f}"
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
