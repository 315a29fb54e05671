"""The record of notices: ``<home>/attention/notices.db`` (SQLite).

One row per notice and channel: when, which agent, what kind, the title, and how the
delivery went (``sending``, ``retrying``, ``sent`` or ``failed``), after how many
attempts, and why it failed. The notice's key (agent, epoch, offset, kind) is unique
per channel, which is how a daemon restarted mid-episode knows a notice went out
already (:meth:`Ledger.claim`).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

from agenthost.errors import InternalError
from agenthost.paths import ensure_private_dir
from agenthost.privatedb import open_private, open_readonly

Status = Literal["sending", "retrying", "sent", "failed"]
MAX_ROWS: Final = 10_000
"""Older rows are dropped beyond this many."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS notices (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    key TEXT NOT NULL,
    agent TEXT NOT NULL,
    kind TEXT NOT NULL,
    channel TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    why TEXT,
    title TEXT NOT NULL,
    UNIQUE (key, channel)
);
CREATE INDEX IF NOT EXISTS notices_by_agent ON notices (agent, id);
"""


def ledger_path(home: Path) -> Path:
    """Where the record of notices lives."""
    return home / "attention" / "notices.db"


@dataclass(frozen=True, slots=True)
class Entry:
    """One delivery of one notice to one channel."""

    id: int
    time: float
    agent: str
    kind: str
    channel: str
    status: str
    attempts: int
    why: str | None
    title: str

    def to_json(self) -> dict[str, Any]:
        """The entry as ``notify log --json`` prints it."""
        return asdict(self)


class Ledger:
    """The notices database. One thread (the event loop, or the CLI)."""

    def __init__(self, home: Path, *, readonly: bool = False) -> None:
        path = ledger_path(home)
        try:
            if readonly:
                self._db = open_readonly(path)
            else:
                ensure_private_dir(path.parent)
                self._db = open_private(path, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                self.trim()  # once per opening: a daemon's start, a first delivery
        except (sqlite3.Error, OSError) as exc:
            raise InternalError(f"cannot open the notice ledger {path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def claim(self, key: str, agent: str, kind: str, channel: str, title: str) -> int | None:
        """Record a delivery about to start; None if this notice went to this channel
        before (a replay)."""
        try:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO notices (time, key, agent, kind, channel, status, title)"
                " VALUES (?, ?, ?, ?, ?, 'sending', ?)",
                (time.time(), key, agent, kind, channel, title),
            )
        except sqlite3.Error as exc:
            raise InternalError(f"cannot write the notice ledger: {exc}") from exc
        return cur.lastrowid if cur.rowcount == 1 else None

    def update(self, row: int, status: Status, attempts: int, why: str | None) -> None:
        """How a delivery went so far."""
        try:
            self._db.execute(
                "UPDATE notices SET status = ?, attempts = ?, why = ? WHERE id = ?",
                (status, attempts, why, row),
            )
        except sqlite3.Error as exc:
            raise InternalError(f"cannot write the notice ledger: {exc}") from exc

    def trim(self) -> None:
        """Drop the oldest rows beyond :data:`MAX_ROWS`."""
        self._db.execute(
            "DELETE FROM notices WHERE id <= (SELECT MAX(id) FROM notices) - ?", (MAX_ROWS,)
        )

    def entries(self, agent: str | None = None, limit: int = 20) -> list[Entry]:
        """The newest ``limit`` deliveries (of ``agent``), oldest first."""
        sql = "SELECT id, time, agent, kind, channel, status, attempts, why, title FROM notices"
        params: tuple[Any, ...] = ()
        if agent is not None:
            sql += " WHERE agent = ?"
            params = (agent,)
        sql += " ORDER BY id DESC LIMIT ?"
        try:
            rows = self._db.execute(sql, (*params, limit)).fetchall()
        except sqlite3.Error as exc:
            raise InternalError(f"cannot read the notice ledger: {exc}") from exc
        return [Entry(*row) for row in reversed(rows)]
