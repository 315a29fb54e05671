"""A governance record the daemon writes into an agent's journal between two hosts.

When the daemon switches an agent between its structured mode and its CLI's own TUI
(``daemon.switch``), one host ends and another starts under the same id, continuing
the same journal. The switch is the daemon's decision, so the daemon records it, as
hosts record theirs: a ``governance`` event and a ``governance`` history entry
(``action`` ``switched``), appended while *no host runs*: the daemon holds the agent's
host lock meanwhile, so it is the journal's single writer, and the next host continues
the stream after the two events (they are offsets like any other).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from agenthost.journal.writer import JournalConfig, JournalWriter, SyncPolicy
from agenthost.lockfile import HostLock
from agenthost.names import EventType
from agenthost.paths import journal_dir, lock_path
from agenthost.protocol import EventEncoder
from agenthost.timefmt import now_rfc3339

log = structlog.get_logger("agenthost.daemon.journalnote")


def governance_record(action: str, actor: str, reason: str, **detail: Any) -> dict[str, Any]:
    """The ``governance`` object of the event (as hosts write theirs)."""
    return {
        **{k: v for k, v in detail.items() if v is not None},
        "action": action,
        "actor": actor,
        "reason": reason,
    }


def write_note(home: Path, agent_id: str, record: dict[str, Any]) -> int:
    """Append a ``governance`` event and its history entry to the agent's journal;
    return the offset of the last one. Blocking (call it in a thread).

    Raise HostAlreadyRunning when a host holds the agent's lock (it is the writer
    then), JournalFailed or ConfigError when the journal cannot be written."""
    lock = HostLock(lock_path(home, agent_id))
    lock.acquire()
    try:
        writer = JournalWriter(
            journal_dir(home, agent_id), agent_id, JournalConfig(sync=SyncPolicy.ALWAYS)
        )
        recovery = writer.open()
        try:
            first = recovery.next_offset
            stamp = now_rfc3339()
            encoder = EventEncoder(agent_id)
            action = str(record["action"]).replace("_", " ")
            entry = {
                "role": "governance",
                "content": f"{action} by {record['actor']}: {record['reason']}",
                "governance": record,
                "timestamp": stamp,
            }
            data = encoder.event(EventType.GOVERNANCE, first, stamp, {"governance": record})
            data += encoder.event(EventType.CHAT_ENTRY, first + 1, stamp, {"chat_entry": entry})
            writer.append(data, first, 2)
            if writer.failed is not None:
                from agenthost.journal.writer import JournalFailed

                raise JournalFailed(writer.failed)
        finally:
            writer.close()
    finally:
        lock.release()
    log.info("journal.note", agent_id=agent_id, action=record["action"], offset=first + 1)
    return first + 1
