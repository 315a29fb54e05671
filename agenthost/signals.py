"""Signal handlers that belong to a service's entry point, given back when it ends.

A service (a host, the daemon) only offers callbacks; its entry point decides which
signals reach them, installs them on the running loop for the life of the service and
then restores what was there before, so that a service run inside another program (a
test, an embedding application) leaves that program's handlers as it found them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping


@contextlib.contextmanager
def signal_handlers(
    handlers: Mapping[signal.Signals, Callable[[], object]],
    *,
    ignored: Iterable[signal.Signals] = (),
) -> Iterator[None]:
    """Call ``handlers`` from the running loop and ignore ``ignored`` while inside;
    on the way out, remove them and put back the handlers that were there before."""
    loop = asyncio.get_running_loop()
    ignored = tuple(ignored)
    previous = {sig: signal.getsignal(sig) for sig in (*handlers, *ignored)}
    try:
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)
        for sig, callback in handlers.items():
            loop.add_signal_handler(sig, callback)
        yield
    finally:
        for sig in handlers:
            loop.remove_signal_handler(sig)
        for sig, before in previous.items():
            if before is not None:  # None: set from outside Python, cannot be restored
                signal.signal(sig, before)
