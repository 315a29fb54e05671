"""Run a host to completion in this process, on uvloop: the host's entry point.

The entry point owns the signals (the host only offers callbacks): SIGTERM and SIGINT
stop the agent and then the host, SIGUSR1 re-creates its socket, SIGHUP and SIGPIPE
are ignored (a host outlives terminals and readers). The handlers that were there
before are back once the host has ended.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import signal
from collections.abc import Callable

import uvloop

from agenthost.host.host import Host, HostConfig
from agenthost.signals import signal_handlers


def run_host(config: HostConfig) -> None:
    """Build the host and serve until it stops. Errors before serving propagate."""
    host = Host(config)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        # Everything imported so far lives as long as the process: keep it out of the
        # cyclic collector's generations so collections stay short. (The CLI turned
        # the collector off while importing: on again from here.)
        gc.freeze()
        gc.enable()
        runner.run(serve_host(host))


async def serve_host(host: Host) -> None:
    """``await host.run()`` with the host's signal handlers installed, then removed."""
    handlers: dict[signal.Signals, Callable[[], object]] = {
        signal.SIGTERM: functools.partial(host.on_stop_signal, signal.SIGTERM),
        signal.SIGINT: functools.partial(host.on_stop_signal, signal.SIGINT),
        signal.SIGUSR1: host.on_rebind_signal,
    }
    with signal_handlers(handlers, ignored=(signal.SIGHUP, signal.SIGPIPE)):
        await host.run()
