"""Run the daemon to completion in this process, on uvloop."""

from __future__ import annotations

import asyncio
import gc

import uvloop

from agenthost.daemon.service import Daemon, DaemonConfig


def run_daemon(config: DaemonConfig) -> None:
    """Build the daemon and serve until SIGTERM/SIGINT. Errors before serving propagate."""
    daemon = Daemon(config)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        # what is imported now lives as long as the process: keep it out of the
        # cyclic collector's generations (as the host does)
        gc.freeze()
        runner.run(daemon.run())
