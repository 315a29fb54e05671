"""Small asyncio helpers shared by the services."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_all(
    tasks: Iterable[asyncio.Task[Any]], *, wait: float = 0.5, rounds: int = 10
) -> list[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait for them to end; return the ones that would not.

    A cancellation can be lost on Python 3.11: ``asyncio.wait_for`` swallows it when
    its inner awaitable completes at the same moment, and the task then runs on to its
    next ``await``. So cancel again, a bounded number of times, instead of waiting for
    ever on a task that never saw its cancellation.
    """
    pending = [t for t in tasks if not t.done()]
    for _ in range(rounds):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _, still = await asyncio.wait(pending, timeout=wait)
        pending = list(still)
    return pending
