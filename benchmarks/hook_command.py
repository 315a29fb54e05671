"""What one hook call costs a terminal agent: the CPU time of ``python -P -m
agenthost.terminal.hook KIND`` (start, read the payload, one exchange with a HookServer,
exit), against a bare ``python -P -c pass`` of the same interpreter, in one run.

    .venv/bin/python benchmarks/hook_command.py [--runs 30] [--json]

CPU: user + system time of the child (``RUSAGE_CHILDREN`` deltas), median over the
runs; the host's side (the server answering ``None``) is not counted. Claude Code runs
two to four hooks per tool call (PreToolUse, PermissionRequest when it asks,
PostToolUse) and two per turn (UserPromptSubmit, Stop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agenthost.host.hooks import HookServer  # noqa: E402

PAYLOAD = json.dumps(
    {
        "session_id": "1adddfba-6cf2-4bc1-a705-67104b6921c2",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "touch marker.txt && echo hello", "description": "x"},
        "tool_use_id": "toolu_fake00019504bbae74f04532",
    }
).encode()


async def child_cpu(argv: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
    )
    await proc.communicate(PAYLOAD)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


ROOT = str(Path(__file__).resolve().parent.parent)


async def measure(runs: int, directory: Path) -> dict[str, Any]:
    async def on_hook(kind: str, payload: dict[str, Any]) -> None:
        return None

    path = directory / "hooks.sock"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AGENTHOST_HOOK_SOCKET": str(path),
        "AGENTHOST_HOOK_TOKEN": "bench",
        "PYTHONPATH": ROOT,
    }
    hook = [sys.executable, "-P", "-m", "agenthost.terminal.hook", "PreToolUse"]
    bare = [sys.executable, "-P", "-c", "pass"]
    hook_cpu: list[float] = []
    bare_cpu: list[float] = []
    async with HookServer(path, "bench", on_hook):
        for _ in range(runs):
            hook_cpu.append(await child_cpu(hook, env))
            bare_cpu.append(await child_cpu(bare, env))
    return {
        "runs": runs,
        "hook_cpu_ms": round(statistics.median(hook_cpu) * 1000, 1),
        "bare_python_cpu_ms": round(statistics.median(bare_cpu) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="hookbench-"))  # 0700
    try:
        figures = asyncio.run(measure(args.runs, directory))
    finally:
        directory.rmdir()
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"hook command: {figures['hook_cpu_ms']} ms CPU per call "
        f"(bare python -P: {figures['bare_python_cpu_ms']} ms), median of {args.runs}"
    )


if __name__ == "__main__":
    main()
