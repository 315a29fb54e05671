"""Run a host to completion in this process, on uvloop: the host's entry point.

The entry point owns the signals (the host only offers callbacks): SIGTERM and SIGINT
stop the agent and then the host, SIGUSR1 re-creates its socket, SIGHUP and SIGPIPE
are ignored (a host outlives terminals and readers). The handlers that were there
before are back once the host has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
from collections.abc import Callable, Iterator

import uvloop

from agenthost.host.host import Host, HostConfig
from agenthost.host.process import ORPHAN_GRACE
from agenthost.host.reaper import Subreaper, set_subreaper
from agenthost.signals import signal_handlers


def run_host(config: HostConfig, *, subreaper: bool = False) -> None:
    """Build the host and serve until it stops. Errors before serving propagate.

    ``subreaper``: this process is the host's own (``agenthost serve``): it becomes the
    child subreaper of the agent's tree (:mod:`agenthost.host.reaper`)."""
    host = Host(config)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        # Everything imported so far lives as long as the process: keep it out of the
        # cyclic collector's generations so collections stay short. (The CLI turned
        # the collector off while importing: on again from here.)
        gc.freeze()
        gc.enable()
        runner.run(serve_host(host, subreaper=subreaper))


async def serve_host(host: Host, *, subreaper: bool = False) -> None:
    """``await host.run()`` with the host's signal handlers installed, then removed.

    With ``subreaper`` (a process of its own), orphans of the agent's tree are reaped
    on SIGCHLD, ended when the agent ends, and whatever is left when the host ends."""
    handlers: dict[signal.Signals, Callable[[], object]] = {
        signal.SIGTERM: functools.partial(host.on_stop_signal, signal.SIGTERM),
        signal.SIGINT: functools.partial(host.on_stop_signal, signal.SIGINT),
        signal.SIGUSR1: host.on_rebind_signal,
    }
    reaper = Subreaper() if subreaper and set_subreaper(True) else None
    with contextlib.ExitStack() as stack:
        stack.enter_context(signal_handlers(handlers, ignored=(signal.SIGHUP, signal.SIGPIPE)))
        if reaper is not None:
            stack.enter_context(_reaping(reaper))
            host.process.sweeper = reaper.end_escapees
        await host.run()
        if reaper is not None:  # e.g. what an ACP agent's terminals left behind
            await reaper.end_escapees(ORPHAN_GRACE)


@contextlib.contextmanager
def _reaping(reaper: Subreaper) -> Iterator[None]:
    """Reap exited orphans on SIGCHLD. A Python-level handler, not the loop's: uvloop
    keeps SIGCHLD to itself (``add_signal_handler`` refuses it), for the children it
    spawns, and the host spawns none through it (its processes are ``Popen``'s)."""
    before = signal.signal(signal.SIGCHLD, lambda _sig, _frame: reaper.reap())
    try:
        yield
    finally:
        signal.signal(signal.SIGCHLD, before)
