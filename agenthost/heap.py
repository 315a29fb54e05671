"""Giving memory freed by Python back to the system (glibc's ``malloc_trim``), and when.

A flood to clients that lag fills their write buffers with event batches of tens or
hundreds of KiB. CPython takes such blocks from malloc, and glibc serves them from its
heap; once they are freed, the pages stay with the process wherever a live block sits
above them, so a host's RSS stayed at the flood's high-water mark. ``malloc_trim(0)``
returns every whole free page of the heap; it costs well under a millisecond when
there is little to return. The server (:mod:`agenthost.wire.server`) trims once the
buffers that grew large have drained (:class:`TrimPolicy`): after floods to 1, 10 and
100 clients, host RSS 66 -> 49 MiB against 40 MiB idle, median of 5
(``benchmarks/hotpath.py --mem-clients 1,10,100``).
"""

from __future__ import annotations

from collections.abc import Callable

_trim: Callable[[int], int] | None = None
_loaded = False


def trim() -> bool:
    """Return the free pages of the C heap to the system; False where there is no
    ``malloc_trim`` (not glibc)."""
    global _trim, _loaded
    if not _loaded:  # ctypes only once a process has something to give back
        _loaded = True
        try:
            import ctypes

            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True


class TrimPolicy:
    """When to trim, sans-IO: once the write buffers that grew large have drained.

    The server reports each :meth:`released` buffer and asks :meth:`check` when a check
    is due; after a trim, :meth:`trimmed` says when to look once more, for what a
    client's catch-up still in flight frees after it. Times in seconds, any clock.
    """

    __slots__ = ("poll", "wait", "gap", "again", "releases", "_follow_up", "_deadline", "_last")

    def __init__(
        self, *, poll: float = 0.02, wait: float = 2.0, gap: float = 0.05, again: float = 1.0
    ) -> None:
        self.poll = poll  # between checks that the buffers drained ...
        self.wait = wait  # ... for at most this long (a client may never read again)
        self.gap = gap  # at least this between two trims
        self.again = again  # the look once more, this long after a trim
        self.releases = 0  # buffers released since the last trim
        self._follow_up = False
        self._deadline: float | None = None
        self._last = float("-inf")

    def released(self) -> None:
        """A write buffer that passed its high-water mark drained (or its connection
        closed): what it held is free."""
        self.releases += 1

    def check(self, now: float, buffered: bool) -> float | None:
        """0: trim now (then call :meth:`trimmed`); more: check again in that many
        seconds; None: nothing to do. ``buffered``: some connection has bytes to send
        (they hold batches the others held too: trimming before they drain would give
        back little, and the rest would stay)."""
        if not (self.releases or self._follow_up):
            return None
        if self._deadline is None:
            self._deadline = now + self.wait
        if buffered and now < self._deadline:
            return self.poll
        return max(0.0, self._last + self.gap - now)

    def trimmed(self, now: float) -> float | None:
        """A trim was done at ``now``: when to check once more, or None."""
        self._deadline = None
        self._last = now
        self._follow_up = self.releases > 0
        self.releases = 0
        return self.again if self._follow_up else None
