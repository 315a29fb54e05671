"""Run the daemon to completion in this process, on uvloop: the daemon's entry point.

The entry point owns the signals: SIGTERM and SIGINT stop the daemon (never its
hosts), SIGHUP and SIGPIPE are ignored (it outlives terminals and readers). The
handlers that were there before are back once the daemon has ended.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import signal

import uvloop

from agenthost.daemon.service import Daemon, DaemonConfig
from agenthost.hostfactory.handle import Factory
from agenthost.signals import signal_handlers


def run_daemon(config: DaemonConfig, factory: Factory | None = None) -> None:
    """Build the daemon and serve until SIGTERM/SIGINT. Errors before serving propagate.

    With ``factory`` (started before this process had a loop or a thread), hosts in
    sessions of their own are forked from it; the daemon closes it when it ends.
    """
    daemon = Daemon(config)
    daemon.spawner.use_factory(factory)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        # what is imported now lives as long as the process: keep it out of the
        # cyclic collector's generations (as the host does)
        gc.freeze()
        runner.run(serve_daemon(daemon))


async def serve_daemon(daemon: Daemon) -> None:
    """``await daemon.run()`` with its signal handlers installed, then removed."""
    handlers = {
        sig: functools.partial(daemon.on_signal, sig) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    with signal_handlers(handlers, ignored=(signal.SIGHUP, signal.SIGPIPE)):
        await daemon.run()
