"""Small asyncio helpers of the daemon (they live in :mod:`agenthost.aio`, shared with
the wire server)."""

from __future__ import annotations

from agenthost.aio import cancel_all

__all__ = ["cancel_all"]
