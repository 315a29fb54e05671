"""The host's hot path in one process, without sockets: the Python part of CPU per line.

``hotpath.py`` measures a real host, whose CPU per line includes the kernel's work (the
pipe reads, ten socket writes per batch) and swings with the machine's load. This
feeds the same agent output through the same code (``LineSplitter`` and
``AgentStream.publish_stdout``: splitting, parsing, encoding, the ring) in one
process, with no journal and a broadcast that only keeps the batch, so that only the
Python part is left. Each ``--tree`` runs in a subprocess of its own; runs alternate
between trees::

    .venv/bin/python benchmarks/hotpath_python.py --tree /tmp/old --tree . --agent lines
    .venv/bin/python benchmarks/hotpath_python.py --tree /tmp/old --tree . --agent demo

Prints CPU µs per agent line (user + system of the process, ``time.process_time``)
per run and the median per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# what the agents print: the flood agent's numbered lines, the demo's flood messages
CHUNK = 64 << 10  # what one read of a full pipe returns


def agent_output(kind: str, count: int) -> bytes:
    if kind == "lines":
        return b"".join(b"line %08d %s\n" % (i, b"x" * 50) for i in range(1, count + 1))
    session = "20afa8ae-549f-45a2-a9e4-61e841c8760a"
    out = []
    for i in range(1, count + 1):
        message = {
            "type": "assistant",
            "message": {
                "id": f"msg_demo_{i:04d}",
                "type": "message",
                "role": "assistant",
                "model": "demo-1",
                "content": [{"type": "text", "text": f"flood {i}/{count}"}],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            "parent_tool_use_id": None,
            "session_id": session,
            "uuid": f"5065e058-6025-42a4-8a78-{i:012d}",
        }
        out.append(json.dumps(message).encode() + b"\n")  # as the demo prints it
    return b"".join(out)


def child(kind: str, count: int, repeat: int) -> None:
    """Run in the tree's own process: print one JSON list of CPU µs per line."""
    import time

    from agenthost.agents import make_adapter
    from agenthost.host.stream import AgentStream
    from agenthost.linesplit import LineSplitter

    data = agent_output(kind, count)
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    results = []
    for _ in range(repeat + 1):  # the first run warms up
        adapter = make_adapter(kind)
        kept: list[bytes] = []
        stream = AgentStream(
            "bench",
            lambda _first, batch, _count, kept=kept: kept.append(batch),
            lambda _data: None,
            ring_size=count * 2 + 10,
            ring_bytes=1 << 30,
            history_size=1000,
            history_bytes=16 << 20,
        )
        splitter = LineSplitter()
        started = time.process_time()
        for chunk in chunks:
            lines = splitter.feed(chunk)
            if lines:
                stream.publish_stdout(lines, adapter)
        results.append(1e6 * (time.process_time() - started) / count)
    print(json.dumps(results[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", help="source tree(s) to compare")
    parser.add_argument("--agent", choices=("lines", "demo"), default="lines")
    parser.add_argument("--count", type=int, help="lines per run (200,000; demo: 20,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per tree")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    count = args.count or (200_000 if args.agent == "lines" else 20_000)
    if args.child:
        child(args.agent, count, 1)
        return 0
    trees = args.tree or [str(Path(__file__).resolve().parent.parent)]
    results: dict[str, list[float]] = {tree: [] for tree in trees}
    for n in range(args.repeat):
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
            argv = [sys.executable, __file__, "--child", "--agent", args.agent]
            out = subprocess.run(
                [*argv, "--count", str(count)],
                env=env,
                cwd=tree,
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            ).stdout
            us = json.loads(out.splitlines()[-1])[0]
            results[tree].append(us)
            print(f"{n + 1} {tree}: {us:.3f} us/line", flush=True)
    for tree, values in results.items():
        print(f"median {tree}: {statistics.median(values):.3f} us/line ({args.agent})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
