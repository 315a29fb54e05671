"""Schedules and runs in the daemon's registry (``<home>/daemon.db``, two more tables).

A run is inserted in the same transaction that moves its schedule's next due time on,
so a daemon killed at any point either ran a due time and moved past it, or did
neither: it never runs one twice nor loses one. A run's ``key`` (a webhook's delivery
id, a schedule's due time) is unique per source and name: a replayed delivery finds the
first run instead of starting another.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import ValidationError

from agenthost.automation.model import RunRecord, ScheduleSpec
from agenthost.daemon.registry import Registry
from agenthost.errors import RegistryError

RUNS_KEPT: Final = 200
"""Runs kept per source and name (the newest): enough to see a pattern, bounded."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    next_at REAL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    name TEXT NOT NULL,
    key TEXT,
    agent_id TEXT,
    msg_offset INTEGER,
    started_at REAL NOT NULL,
    ended_at REAL,
    result TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_key ON runs (source, name, key);
CREATE INDEX IF NOT EXISTS runs_by_name ON runs (source, name, run_id);
"""


@dataclass(slots=True)
class Schedule:
    """One row of ``schedules``."""

    spec: ScheduleSpec
    next_at: float | None
    created_at: float


class RunStore:
    """The two tables, over the registry's connection (one thread: the event loop)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._db = registry._db  # noqa: SLF001 - the same database, one writer
        try:
            with registry.transaction() as db:
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    db.execute(statement)
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {registry.path}: {exc}") from exc

    # --- schedules ----------------------------------------------------------------------

    def schedules(self) -> dict[str, Schedule]:
        """Every schedule this version can read, by name."""
        rows = self._read("SELECT * FROM schedules ORDER BY name")
        found = {}
        for row in rows:
            try:
                spec = ScheduleSpec.model_validate_json(row["spec"])
            except ValidationError:
                continue  # written by a newer version, or damaged: left as it is
            found[row["name"]] = Schedule(spec, row["next_at"], row["created_at"])
        return found

    def put_schedule(self, schedule: Schedule) -> None:
        """Insert or replace a schedule."""
        self._write(
            "INSERT OR REPLACE INTO schedules (name, spec, next_at, created_at) "
            "VALUES (?, ?, ?, ?)",
            (
                schedule.spec.name,
                schedule.spec.model_dump_json(),
                schedule.next_at,
                schedule.created_at,
            ),
        )

    def remove_schedule(self, name: str) -> bool:
        """Delete a schedule (its runs are kept: they are history); False if unknown."""
        try:
            with self.registry.transaction() as db:
                return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount > 0
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.registry.path}: {exc}") from exc

    # --- runs ---------------------------------------------------------------------------

    def begin_run(
        self,
        run: RunRecord,
        *,
        next_at: tuple[str, float] | None = None,
    ) -> tuple[RunRecord, bool]:
        """Insert ``run`` (its ``run_id`` is assigned) and, with ``next_at``, move that
        schedule's due time on, in one transaction. A run of the same source, name and
        key already there is returned instead, with True (nothing is written), unless
        it failed before its message reached the agent: a redelivery (GitHub's
        "Redeliver") then runs again, and the failed run keeps its record under the key
        ``KEY#RUN_ID``."""
        try:
            with self.registry.transaction() as db:
                if run.key is not None:
                    row = db.execute(
                        "SELECT * FROM runs WHERE source = ? AND name = ? AND key = ?",
                        (run.source, run.name, run.key),
                    ).fetchone()
                    if row is not None and (row["result"] != "failed" or row["msg_offset"]):
                        return _run(row), True
                    if row is not None:  # it never reached its agent: a redelivery may
                        db.execute(
                            "UPDATE runs SET key = ? WHERE run_id = ?",
                            (f"{run.key}#{row['run_id']}", row["run_id"]),
                        )
                cursor = db.execute(
                    "INSERT INTO runs (source, name, key, agent_id, msg_offset, started_at, "
                    "ended_at, result, reason, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _row(run),
                )
                if next_at is not None:
                    db.execute("UPDATE schedules SET next_at = ? WHERE name = ?", next_at[::-1])
                db.execute(
                    "DELETE FROM runs WHERE source = ? AND name = ? AND run_id NOT IN "
                    "(SELECT run_id FROM runs WHERE source = ? AND name = ? "
                    "ORDER BY run_id DESC LIMIT ?)",
                    (run.source, run.name, run.source, run.name, RUNS_KEPT),
                )
                run_id = cursor.lastrowid
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.registry.path}: {exc}") from exc
        assert run_id is not None
        return run.model_copy(update={"run_id": run_id}), False

    def set_next(self, name: str, next_at: float) -> None:
        """Move a schedule's due time on (a decision that started no run)."""
        self._write("UPDATE schedules SET next_at = ? WHERE name = ?", (next_at, name))

    def update_run(self, run: RunRecord) -> None:
        """Write a run's agent, offset, end, result and reason."""
        self._write(
            "UPDATE runs SET agent_id = ?, msg_offset = ?, ended_at = ?, result = ?, "
            "reason = ?, detail = ? WHERE run_id = ?",
            (
                run.agent_id,
                run.offset,
                _ts(run.ended_at),
                run.result,
                run.reason,
                json.dumps(run.detail),
                run.run_id,
            ),
        )

    def runs(
        self, source: str | None = None, name: str | None = None, limit: int = 20
    ) -> list[RunRecord]:
        """The newest runs, newest first."""
        where, args = [], []
        for column, value in (("source", source), ("name", name)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        return [_run(r) for r in self._read(sql + " ORDER BY run_id DESC LIMIT ?", *args, limit)]

    def running(self) -> list[RunRecord]:
        """Runs not yet ended (a daemon that restarts follows them again)."""
        return [_run(r) for r in self._read("SELECT * FROM runs WHERE result = 'running'")]

    # --- plumbing -----------------------------------------------------------------------

    def _read(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot read the registry {self.registry.path}: {exc}") from exc

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        try:
            with self.registry.transaction() as db:
                db.execute(sql, args)
        except sqlite3.Error as exc:
            raise RegistryError(f"cannot write the registry {self.registry.path}: {exc}") from exc


def _row(run: RunRecord) -> tuple[Any, ...]:
    return (
        run.source,
        run.name,
        run.key,
        run.agent_id,
        run.offset,
        _ts(run.started_at),
        _ts(run.ended_at),
        run.result,
        run.reason,
        json.dumps(run.detail),
    )


def _run(row: sqlite3.Row) -> RunRecord:
    try:
        detail = json.loads(row["detail"])
    except ValueError:
        detail = {}
    return RunRecord(
        run_id=row["run_id"],
        source=row["source"],
        name=row["name"],
        key=row["key"],
        agent_id=row["agent_id"],
        offset=row["msg_offset"],
        started_at=datetime.fromtimestamp(row["started_at"], UTC),
        ended_at=datetime.fromtimestamp(row["ended_at"], UTC) if row["ended_at"] else None,
        result=row["result"],
        reason=row["reason"],
        detail=detail if isinstance(detail, dict) else {},
    )


def _ts(when: datetime | None) -> float | None:
    return when.timestamp() if when is not None else None


def now_utc() -> datetime:
    """The time now, as runs record it."""
    return datetime.fromtimestamp(time.time(), UTC)
