"""Run a host to completion in this process, on uvloop."""

from __future__ import annotations

import asyncio
import gc
import signal

import uvloop

from agenthost.host.host import Host, HostConfig


def run_host(config: HostConfig) -> None:
    """Build the host and serve until it stops. Errors before serving propagate."""
    host = Host(config)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        # Everything imported so far lives as long as the process: keep it out of the
        # cyclic collector's generations so collections stay short. (The CLI turned
        # the collector off while importing: on again from here.)
        gc.freeze()
        gc.enable()
        try:
            runner.run(host.run())
        finally:
            # Closing the loop puts SIGUSR1 back to its default action (terminate):
            # a late "re-create your socket" must not turn a clean exit into a kill.
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
