"""The daemon's registry: what it knows about agents, in SQLite (``<home>/daemon.db``).

Every write is one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``), in WAL mode: a
crash at any point, ``kill -9`` included, leaves the database as of the last committed
transaction, never half of one. ``synchronous=NORMAL`` is enough for that (a WAL
commit is atomic without an fsync per transaction); it only trades the last commits
before a *power* loss, which the start-up reconcile rebuilds from the live hosts.

What is kept, per agent: its spawn spec (for restarts), its status, the host's pid and
version, the stream position the daemon has seen (``epoch``, ``last_offset``: written
in batches, not once per event), the restart count and what is known of its last end;
plus an ``exits`` log of every end (exited, lost, stopped).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agenthost.daemon.protocol import AgentStatus, DaemonAgent, SpawnSpec
from agenthost.daemon.spec import REDACTED as REDACTED
from agenthost.daemon.spec import redacted as redacted
from agenthost.errors import RegistryError
from agenthost.privatedb import open_private, open_readonly

SCHEMA_VERSION: Final = 1
EXITS_KEPT: Final = 100  # per agent: enough to see a crash loop, bounded for ever-running ones

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    managed INTEGER NOT NULL DEFAULT 1,
    spec TEXT,
    state TEXT NOT NULL DEFAULT '',
    host_pid INTEGER NOT NULL DEFAULT 0,
    agent_pid INTEGER NOT NULL DEFAULT 0,
    epoch TEXT NOT NULL DEFAULT '',
    last_offset INTEGER NOT NULL DEFAULT 0,
    restarts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    signal TEXT,
    ended_at REAL,
    last_error TEXT,
    session_id TEXT,
    host_version TEXT,
    host_protocol_version TEXT,
    host_started_at REAL,
    next_restart_at REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS exits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    epoch TEXT NOT NULL DEFAULT '',
    host_pid INTEGER NOT NULL DEFAULT 0,
    last_offset INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    signal TEXT,
    reason TEXT,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS exits_by_agent ON exits (agent_id, id);
"""


@dataclass(slots=True)
class AgentRecord:
    """One row of ``agents``: the daemon's in-memory copy is the authority while it runs."""

    agent_id: str
    status: str
    managed: bool = True
    spec: SpawnSpec | None = None
    state: str = ""
    host_pid: int = 0
    agent_pid: int = 0
    epoch: str = ""
    last_offset: int = 0
    restarts: int = 0
    exit_code: int | None = None
    signal: str | None = None
    ended_at: float | None = None
    last_error: str | None = None
    session_id: str | None = None
    host_version: str | None = None
    host_protocol_version: str | None = None
    host_started_at: float | None = None
    next_restart_at: float | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    stop_reason: str | None = None
    """(added) Why the daemon stopped the agent itself: ``idle`` (``--idle-stop``)."""
    queued_at: float | None = None
    """(added) When a spawn was queued (``--max-agents`` with ``--queue``)."""
    structured_spec: SpawnSpec | None = None
    """(added) Set while the agent runs its CLI's own TUI (``daemon.switch``): the
    structured agent's spec it returns to; ``spec`` is then the terminal agent's."""

    @property
    def active(self) -> bool:
        """Whether the agent's host may still be alive."""
        return self.status in {
            AgentStatus.SPAWNING,
            AgentStatus.RUNNING,
            AgentStatus.UNREACHABLE,
            AgentStatus.EXITED,
        }

    def to_wire(self, *, older_version: bool = False) -> DaemonAgent:
        """The ``daemon.list`` entry for this record."""
        return DaemonAgent(
            agent_id=self.agent_id,
            status=self.status,
            managed=self.managed,
            state=self.state,
            host_pid=self.host_pid,
            agent_pid=self.agent_pid,
            epoch=self.epoch,
            last_offset=self.last_offset,
            restarts=self.restarts,
            exit_code=self.exit_code,
            signal=self.signal,
            ended_at=_dt(self.ended_at),
            last_error=self.last_error,
            session_id=self.session_id,
            host_version=self.host_version,
            host_protocol_version=self.host_protocol_version,
            older_version=older_version,
            next_restart_at=_dt(self.next_restart_at),
            stop_reason=self.stop_reason,
            queued_at=_dt(self.queued_at),
            tui=self.structured_spec is not None,
            structured_spec=redacted(self.structured_spec),
            branch=_branch(self),
            worktree=self.spec.cwd if self.spec and self.spec.worktree is not None else None,
            forked_from=_forked_from(self),
            created_at=_dt(self.created_at) or datetime.now(UTC),
            updated_at=_dt(self.updated_at) or datetime.now(UTC),
            spec=redacted(self.spec),
        )


_COLUMNS: Final = tuple(f.name for f in fields(AgentRecord))
ADDED_COLUMNS: Final = {"stop_reason": "TEXT", "queued_at": "REAL", "structured_spec": "TEXT"}
"""Columns added to ``agents`` after schema 1 was published. Added in place (``ALTER
TABLE``) without a new schema version: an older agenthost reads the columns it knows
and never sees these (its writes leave them NULL)."""


@dataclass(frozen=True, slots=True)
class ExitRecord:
    """One row of ``exits``: how a host run ended."""

    agent_id: str
    outcome: str
    """``exited`` (the agent's end was seen), ``lost`` (the host vanished) or ``stopped``."""
    epoch: str = ""
    host_pid: int = 0
    last_offset: int = 0
    state: str = ""
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    at: float = 0.0


class Registry:
    """The SQLite registry. Not thread-safe: use it from one thread (the event loop)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        try:
            if readonly:
                self._db = open_readonly(path, isolation_level=None, timeout=5.0)
            else:
                self._db = open_private(path, isolation_level=None, timeout=5.0)
            self._db.row_factory = sqlite3.Row
            self._setup()
        except (sqlite3.Error, OSError) as exc:
            with contextlib.suppress(Exception):
                self._db.close()
            raise RegistryError(f"cannot open the registry {path}: {exc}") from exc

    def _setup(self) -> None:
        db = self._db
        db.execute("PRAGMA busy_timeout = 5000")
        if self.readonly:
            self._check_version(writable=False)
            return
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        with self.transaction():
            # statement by statement: executescript() would commit our transaction first
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            have = {row[1] for row in db.execute("PRAGMA table_info(agents)")}
            for name, kind in ADDED_COLUMNS.items():
                if name not in have:
                    db.execute(f"ALTER TABLE agents ADD COLUMN {name} {kind}")
            self._check_version(writable=True)

    def _check_version(self, *, writable: bool) -> None:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            row = None  # no tables yet (a reader before the first daemon)
        version = int(row[0]) if row else None
        if version is None and writable:
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
            )
        elif version is not None and version > SCHEMA_VERSION:
            raise RegistryError(
                f"the registry {self.path} has schema {version}, newer than this agenthost "
                f"understands ({SCHEMA_VERSION})",
                hint="run the newer agenthost, or move the file aside to start afresh",
            )

    def close(self) -> None:
        """Close the database (a no-op if closed)."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any error."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.path}: {exc}") from exc
        try:
            yield db
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise RegistryError(f"cannot commit to the registry {self.path}: {exc}") from exc

    # --- reading ------------------------------------------------------------------------

    def load(self) -> dict[str, AgentRecord]:
        """Every agent, by id."""
        try:
            rows = self._db.execute("SELECT * FROM agents ORDER BY agent_id").fetchall()
        except sqlite3.OperationalError as exc:
            if self.readonly and "no such table" in str(exc):
                return {}
            raise RegistryError(f"cannot read the registry {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot read the registry {self.path}: {exc}") from exc
        return {row["agent_id"]: _from_row(row) for row in rows}

    def exits(self, agent_id: str, limit: int = 20) -> list[ExitRecord]:
        """The agent's most recent ends, newest first."""
        try:
            rows = self._db.execute(
                "SELECT * FROM exits WHERE agent_id = ? ORDER BY id DESC LIMIT ?",
                (agent_id, limit),
            ).fetchall()
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot read the registry {self.path}: {exc}") from exc
        return [ExitRecord(**{k: row[k] for k in row.keys() if k != "id"}) for row in rows]

    def integrity(self) -> str:
        """``PRAGMA integrity_check``: ``"ok"`` for a sound database."""
        try:
            return "\n".join(str(r[0]) for r in self._db.execute("PRAGMA integrity_check"))
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot check the registry {self.path}: {exc}") from exc

    # --- writing ------------------------------------------------------------------------

    def save(self, *records: AgentRecord) -> None:
        """Insert or replace whole rows, in one transaction."""
        if not records:
            return
        now = time.time()
        placeholders = ", ".join("?" for _ in _COLUMNS)
        sql = f"INSERT OR REPLACE INTO agents ({', '.join(_COLUMNS)}) VALUES ({placeholders})"
        try:
            with self.transaction() as db:
                for record in records:
                    record.updated_at = now
                    db.execute(sql, _to_row(record))
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.path}: {exc}") from exc

    def save_positions(self, positions: Iterable[tuple[str, str, int, str]]) -> int:
        """Record ``(agent_id, epoch, last_offset, state)`` for many agents in one
        transaction (the batched stream positions). Return how many rows changed."""
        rows = [
            (epoch, offset, state, time.time(), agent) for agent, epoch, offset, state in positions
        ]
        if not rows:
            return 0
        try:
            with self.transaction() as db:
                cursor = db.executemany(
                    "UPDATE agents SET epoch = ?, last_offset = ?, state = ?, updated_at = ? "
                    "WHERE agent_id = ?",
                    rows,
                )
                return cursor.rowcount
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.path}: {exc}") from exc

    def record_end(self, record: AgentRecord, end: ExitRecord) -> None:
        """Save the agent's row and append ``end`` to its exits, atomically."""
        now = time.time()
        record.updated_at = now
        placeholders = ", ".join("?" for _ in _COLUMNS)
        try:
            with self.transaction() as db:
                db.execute(
                    f"INSERT OR REPLACE INTO agents ({', '.join(_COLUMNS)}) "
                    f"VALUES ({placeholders})",
                    _to_row(record),
                )
                db.execute(
                    "INSERT INTO exits (agent_id, outcome, epoch, host_pid, last_offset, state, "
                    "exit_code, signal, reason, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        end.agent_id,
                        end.outcome,
                        end.epoch,
                        end.host_pid,
                        end.last_offset,
                        end.state,
                        end.exit_code,
                        end.signal,
                        end.reason,
                        end.at or now,
                    ),
                )
                db.execute(
                    "DELETE FROM exits WHERE agent_id = ? AND id NOT IN "
                    "(SELECT id FROM exits WHERE agent_id = ? ORDER BY id DESC LIMIT ?)",
                    (end.agent_id, end.agent_id, EXITS_KEPT),
                )
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.path}: {exc}") from exc

    def forget(self, agent_id: str) -> bool:
        """Delete an agent and its exits; False if it was not known."""
        try:
            with self.transaction() as db:
                db.execute("DELETE FROM exits WHERE agent_id = ?", (agent_id,))
                return db.execute("DELETE FROM agents WHERE agent_id = ?", (agent_id,)).rowcount > 0
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.path}: {exc}") from exc


def _to_row(record: AgentRecord) -> tuple[Any, ...]:
    values = []
    for name in _COLUMNS:
        value = getattr(record, name)
        if name in ("spec", "structured_spec"):
            value = value.model_dump_json() if value is not None else None
        elif name == "managed":
            value = int(value)
        values.append(value)
    return tuple(values)


def _from_row(row: sqlite3.Row) -> AgentRecord:
    present = row.keys()  # a registry an older daemon wrote, read-only: no added columns
    data: dict[str, Any] = {name: row[name] if name in present else None for name in _COLUMNS}
    parsed = _spec(data.pop("spec"))
    data["structured_spec"] = _spec(data["structured_spec"])
    data["managed"] = bool(data["managed"])
    return AgentRecord(spec=parsed, **data)


def _spec(text: str | None) -> SpawnSpec | None:
    try:
        return SpawnSpec.model_validate_json(text) if text else None
    except ValidationError:
        return None  # a spec this version cannot read: the agent is still listed


def _forked_from(record: AgentRecord) -> str | None:
    # (in its TUI, the structured spec says it: the terminal agent's does not fork)
    spec = record.structured_spec or record.spec
    return spec.fork.from_agent if spec is not None and spec.fork is not None else None


def _branch(record: AgentRecord) -> str | None:
    spec = record.spec
    if spec is None or spec.worktree is None:
        return None
    return spec.worktree or f"agenthost/{record.agent_id}"  # as worktrees.branch_for


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, UTC) if ts is not None else None
