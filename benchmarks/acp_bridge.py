"""What `agenthost acp ID` (the ACP editor bridge) costs: CPU and memory of the bridge
process while an editor loads a long conversation and follows a live one.

    .venv/bin/python benchmarks/acp_bridge.py [--messages 5000] [--runs 5] [--json]

A demo host (``--pace 0``) is given a conversation of ``--messages`` assistant messages
(the demo's ``/flood N``). Each run then execs ``agenthost acp ID`` as an editor would
and plays the editor on its stdin/stdout:

* ``initialize``, answered: the bridge's CPU time so far is its start-up;
* ``session/load``: every update of the replay, then the load's answer; the CPU time
  this took, per replayed update, and the bridge's PSS and RSS at that moment;
* ``session/prompt`` ``/flood N``: the live updates, then the prompt's answer; CPU time
  per live update (each run's flood makes the next run's replay longer).

CPU time is the kernel's clock of the process (``/proc/PID/schedstat``, robust to a busy
machine, unlike wall time); memory is read from ``/proc/PID/smaps_rollup``. Prints the
median, the 90th percentile and the minimum of each figure over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup import cpu_ms, memory_mib, spread  # noqa: E402

PY = sys.executable
AGENT = "bench-acp"
TIMEOUT = 120.0


def agenthost(home: Path, *args: str) -> str:
    """Run one CLI command; its stdout (raises with its stderr when it fails)."""
    command, *rest = args  # --home before any `--` (serve's agent arguments)
    done = subprocess.run(
        [PY, "-m", "agenthost", command, "--home", str(home), *rest],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"agenthost {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class Editor:
    """``agenthost acp ID`` run as an editor runs it, and our side of its stdio."""

    def __init__(self, home: Path) -> None:
        argv = [PY, "-m", "agenthost", "acp", "--home", str(home), AGENT]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self._fd = self.stdout.fileno()
        self._buffer = b""
        self._ids = 0

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        line = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self.stdin.write(json.dumps(line).encode() + b"\n")
        self.stdin.flush()
        return self._ids

    def until_answer(self, rid: int) -> int:
        """Read up to the answer to request ``rid``; return the updates read before it."""
        updates = 0
        while True:
            message = json.loads(self._line())
            if message.get("method") == "session/update":
                updates += 1
            elif message.get("id") == rid:
                if "error" in message:
                    raise RuntimeError(f"request {rid} failed: {message['error']}")
                return updates

    def _line(self) -> bytes:
        """The next line of the bridge's stdout (our own buffer: select() cannot see
        what a buffered reader has already taken in)."""
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._fd], [], [], deadline - time.monotonic())
            if not ready:
                raise RuntimeError(f"the bridge said nothing for {TIMEOUT} s")
            data = os.read(self._fd, 1 << 16)
            if not data:
                raise RuntimeError("the bridge closed its stdout")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=TIMEOUT)


def one_run(home: Path, messages: int) -> dict[str, float]:
    editor = Editor(home)
    try:
        pid = editor.proc.pid
        editor.until_answer(editor.request("initialize", {"protocolVersion": 1}))
        start_cpu = cpu_ms(pid)
        load = {"sessionId": AGENT, "cwd": str(home), "mcpServers": []}
        replayed = editor.until_answer(editor.request("session/load", load))
        load_cpu = cpu_ms(pid) - start_cpu
        rss, pss = memory_mib(pid)
        prompt = [{"type": "text", "text": f"/flood {messages}"}]
        before = cpu_ms(pid)
        live = editor.until_answer(
            editor.request("session/prompt", {"sessionId": AGENT, "prompt": prompt})
        )
        live_cpu = cpu_ms(pid) - before
    finally:
        editor.close()
    return {
        "start_cpu_ms": start_cpu,
        "replayed_updates": replayed,
        "load_cpu_ms": load_cpu,
        "load_us_per_update": load_cpu * 1000 / max(1, replayed),
        "pss_mib_after_load": pss,
        "rss_mib_after_load": rss,
        "live_updates": live,
        "live_us_per_update": live_cpu * 1000 / max(1, live),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000, help="messages per flood")
    parser.add_argument("--runs", type=int, default=5, help="editor sessions (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ahacp-", dir="/tmp"))
    agenthost(home, "serve", "--agent-id", AGENT, "--detach", "--", "--pace", "0")
    try:
        agenthost(home, "send", AGENT, f"/flood {args.messages}")
        agenthost(home, "wait", AGENT, "--state", "idle", "--timeout", str(TIMEOUT))
        runs = [one_run(home, args.messages) for _ in range(args.runs)]
    finally:
        agenthost(home, "stop", AGENT)
    figures = {key: spread([run[key] for run in runs]) for key in runs[0]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"agenthost acp, {args.runs} runs, floods of {args.messages} messages:")
    for key, v in figures.items():
        print(f"  {key:22} p50 {v['p50']:10.1f}  p90 {v['p90']:10.1f}  min {v['min']:10.1f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
