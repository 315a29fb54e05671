"""The approval links the gateway honoured: ``<home>/web/links.db`` (SQLite), one row
per link nonce, so a link decides at most once, across gateway restarts and between
two gateways of one home.

A nonce is *claimed* (an INSERT on the primary key: atomic, whoever comes second
fails) before the host is asked, and *released* again when the link decided nothing
(the request had been answered another way, or its agent was gone): such a link was
not used, and following it again says why again instead of "used".
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from agenthost.errors import ConfigError
from agenthost.privatedb import open_private

BUSY_MS: Final = 5000
"""How long a claim waits for another process's write to the ledger."""
KEEP_SECONDS: Final = 86400
"""Rows stay this long after their link expired (an expired link is refused as such
before the ledger is read, so older rows only take room)."""


def ledger_path(home: Path) -> Path:
    """Where a home's gateway records the links it honoured."""
    return home / "web" / "links.db"


class LinkLedger:
    """The nonces of honoured links. Each call opens its own connection (calls come
    from worker threads); every method raises ConfigError for a ledger it cannot use."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call, closed after it; a ledger that cannot be opened,
        read or written is ConfigError."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            conn = open_private(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"the link ledger {self.path} is unusable: {exc}") from exc
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS used ("
                " nonce TEXT PRIMARY KEY, expires INTEGER NOT NULL, used_at REAL NOT NULL)"
            )
            yield conn
        except sqlite3.Error as exc:
            raise ConfigError(f"the link ledger {self.path} is unusable: {exc}") from exc
        finally:
            conn.close()

    def claim(self, nonce: str, expires: int) -> bool:
        """Record ``nonce``; False when it was recorded before (the link was used)."""
        with self._open() as conn:
            try:
                with conn:
                    conn.execute(
                        "DELETE FROM used WHERE expires < ?", (int(time.time()) - KEEP_SECONDS,)
                    )
                    conn.execute(
                        "INSERT INTO used (nonce, expires, used_at) VALUES (?, ?, ?)",
                        (nonce, expires, time.time()),
                    )
            except sqlite3.IntegrityError:
                return False
        return True

    def release(self, nonce: str) -> None:
        """Forget ``nonce`` (its link decided nothing)."""
        with self._open() as conn, conn:
            conn.execute("DELETE FROM used WHERE nonce = ?", (nonce,))

    def used(self, nonce: str) -> bool:
        """Whether ``nonce`` is recorded (read only: what a GET asks)."""
        with self._open() as conn:
            row = conn.execute("SELECT 1 FROM used WHERE nonce = ?", (nonce,)).fetchone()
        return row is not None
