"""The factory never forks a process that has another thread or a running event loop
(a lock held by another thread at the fork would stay locked forever in the child).
Each case runs in a fresh interpreter: the test process itself has threads and loops."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = {
    "a bare process": ("", None),
    "a second thread": (
        "import threading\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait, daemon=True).start()\n",
        "will not fork a process with 2 threads",
    ),
    "a running loop": (
        "import asyncio\nasync def main():\n    check_forkable()\nasyncio.run(main())\n",
        "will not fork a process with a running event loop",
    ),
    "a loop that has ended": (
        "import asyncio\nasync def main():\n    pass\nasyncio.run(main())\n",
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_forkable(case: str) -> None:
    setup, refusal = CASES[case]
    code = "from agenthost.hostfactory.process import check_forkable\n" + setup
    code += "check_forkable()\nprint('forkable')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if refusal is None:
        assert done.returncode == 0 and done.stdout == "forkable\n", done.stderr
    else:
        assert done.returncode != 0 and refusal in done.stderr
