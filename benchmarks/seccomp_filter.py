"""Cost of the sandbox's seccomp filter: the CPU time of the first ``compile_filter()``
of a process (the pyseccomp import, which loads libseccomp.so.2, counted apart), of a
``filter_fd()``, the PSS the binding adds, and the program's size.

    .venv/bin/python benchmarks/seccomp_filter.py [--runs 9] [--json]

Each run is a fresh interpreter (the program is cached per process, so only a first
call is a cost), timed with ``time.process_time`` (this process's CPU, user + system;
robust to a busy machine, unlike wall-clock). PSS from ``/proc/self/smaps_rollup``
before the import and after the first compile. Prints the median and the maximum.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

ONE_RUN = """
import json, os, time
def pss_kb():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("Pss:"))
from agenthost.sandbox import seccomp
pss0 = pss_kb()
t0 = time.process_time()
import pyseccomp
t1 = time.process_time()
program = seccomp.compile_filter()
t2 = time.process_time()
fd = seccomp.filter_fd()
t3 = time.process_time()
os.close(fd)
print(json.dumps({
    "import_ms": (t1 - t0) * 1e3,
    "compile_ms": (t2 - t1) * 1e3,
    "filter_fd_ms": (t3 - t2) * 1e3,
    "pss_added_kb": pss_kb() - pss0,
    "bytes": len(program),
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = parser.parse_args()
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", ONE_RUN], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(args.runs)
    ]
    if args.json:
        print(json.dumps(runs))
        return 0
    size = runs[0]["bytes"]
    print(f"program: {size} bytes, {size // 8} BPF instructions")
    for key in ("import_ms", "compile_ms", "filter_fd_ms", "pss_added_kb"):
        values = [r[key] for r in runs]
        print(f"{key:14} median {statistics.median(values):8.2f}  max {max(values):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
