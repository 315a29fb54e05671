"""The durable event journal behind a host's ring (see docs/journal.md).

Every event a host publishes is appended, encoded exactly as clients receive it, to
append-only JSONL segments under ``<home>/journal/<agent_id>/``. Clients that were away
longer than the ring holds replay from it; a host restarted for the same agent continues
the same stream (same epoch, offsets growing on); ``agenthost export`` reads it without
a host.
"""

from agenthost.journal.reader import JournalCorrupt, JournalReader
from agenthost.journal.writer import (
    JournalConfig,
    JournalFailed,
    JournalWriter,
    Recovery,
    SyncPolicy,
)

__all__ = [
    "JournalConfig",
    "JournalCorrupt",
    "JournalFailed",
    "JournalReader",
    "JournalWriter",
    "Recovery",
    "SyncPolicy",
]
