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


def test_the_factory_preloads_every_adapter_and_what_acp_hosts_load() -> None:
    import importlib

    from agenthost.agents import AGENT_KINDS, adapter_class
    from agenthost.hostfactory.process import preload_modules

    modules = preload_modules()
    for kind in AGENT_KINDS:
        cls = adapter_class(kind)
        assert cls is not None and cls.__module__ in modules, kind
    assert "agenthost.host.clientcalls" in modules  # loaded by an ACP agent's first call
    for name in modules:  # each one exists
        importlib.import_module(name)
