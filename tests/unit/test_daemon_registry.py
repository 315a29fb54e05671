"""agenthost.daemon.registry: the SQLite registry, its transactions, and crashes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from agenthost.daemon.protocol import RestartPolicy, SpawnSpec
from agenthost.daemon.registry import (
    EXITS_KEPT,
    REDACTED,
    AgentRecord,
    ExitRecord,
    Registry,
    redacted,
)
from agenthost.daemon.service import open_registry
from agenthost.errors import RegistryError

from hosttools import PY, wait_for


def spec(agent_id: str = "a1") -> SpawnSpec:
    return SpawnSpec(
        agent_id=agent_id,
        agent="lines",
        command=["python3", "-c", "print(1)"],
        env={"K": "V"},
        restart=RestartPolicy(policy="on-failure", max_restarts=3),
    )


def test_round_trip_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "daemon.db"
    with Registry(path) as registry:
        record = AgentRecord("a1", "running", spec=spec(), epoch="e1", last_offset=9)
        record.session_id = "s-1"
        registry.save(record, AgentRecord("b2", "lost", managed=False, exit_code=-9))
        assert registry.integrity() == "ok"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with Registry(path, readonly=True) as again:
        loaded = again.load()
    assert sorted(loaded) == ["a1", "b2"]
    a1 = loaded["a1"]
    assert a1.spec == spec() and a1.epoch == "e1" and a1.last_offset == 9
    assert a1.session_id == "s-1" and a1.managed is True and a1.active
    b2 = loaded["b2"]
    assert b2.managed is False and b2.exit_code == -9 and b2.spec is None and not b2.active
    wire = a1.to_wire(older_version=True)
    assert wire.agent_id == "a1" and wire.older_version
    assert wire.spec == redacted(spec()) and wire.spec is not None
    assert wire.spec.env == {"K": REDACTED}  # secrets stay in the registry


def test_positions_are_batched_in_one_transaction(tmp_path: Path) -> None:
    with Registry(tmp_path / "d.db") as registry:
        registry.save(AgentRecord("a", "running"), AgentRecord("b", "running"))
        changed = registry.save_positions(
            [("a", "e", 5, "idle"), ("b", "f", 7, ""), ("x", "", 1, "")]
        )
        assert changed == 2  # the unknown agent changes nothing
        rows = {r.agent_id: (r.epoch, r.last_offset, r.state) for r in registry.load().values()}
    assert rows == {"a": ("e", 5, "idle"), "b": ("f", 7, "")}


def test_record_end_is_atomic_and_pruned(tmp_path: Path) -> None:
    with Registry(tmp_path / "d.db") as registry:
        record = AgentRecord("a", "running")
        for i in range(EXITS_KEPT + 5):
            record.restarts = i
            registry.record_end(record, ExitRecord("a", "exited", exit_code=i, at=float(i)))
        exits = registry.exits("a", limit=1000)
        assert len(exits) == EXITS_KEPT  # bounded, newest kept
        assert exits[0].exit_code == EXITS_KEPT + 4 and exits[-1].exit_code == 5
        assert registry.load()["a"].restarts == EXITS_KEPT + 4
        assert registry.forget("a") and registry.exits("a") == [] and not registry.forget("a")


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    with Registry(tmp_path / "d.db") as registry:
        registry.save(AgentRecord("a", "running", last_offset=1))
        with pytest.raises(RuntimeError), registry.transaction() as db:
            db.execute("UPDATE agents SET last_offset = 99")
            db.execute("INSERT INTO exits (agent_id, outcome, at) VALUES ('a', 'lost', 0)")
            raise RuntimeError("crash in the middle")
        assert registry.load()["a"].last_offset == 1 and registry.exits("a") == []


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    Registry(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(RegistryError, match="schema 99"):
        Registry(path)


def test_readonly_before_any_daemon(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    sqlite3.connect(path).close()  # an empty file: no tables yet
    with Registry(path, readonly=True) as registry:
        assert registry.load() == {}


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "daemon.db"
    path.write_bytes(b"this is not a database, " * 100)
    registry = open_registry(path)
    try:
        assert registry.load() == {} and registry.integrity() == "ok"
    finally:
        registry.close()
    aside = [p.name for p in tmp_path.iterdir() if ".broken-" in p.name]
    assert len(aside) == 1 and aside[0].startswith("daemon.db.broken-")


WRITER = """
import sys
from pathlib import Path
from agenthost.daemon.registry import AgentRecord, ExitRecord, Registry

registry = Registry(Path(sys.argv[1]))
record = AgentRecord("a", "running")
i = 0
while True:
    i += 1
    record.last_offset = i
    record.restarts = i
    # one transaction: the row and its exit, or neither
    registry.record_end(record, ExitRecord("a", "lost", last_offset=i))
    registry.save_positions([("a", "e", i, "running")])
"""


def test_kill_9_in_the_middle_of_writes_leaves_a_consistent_database(tmp_path: Path) -> None:
    path = tmp_path / "daemon.db"
    proc = subprocess.Popen([PY, "-c", WRITER, str(path)])
    try:

        def progress() -> int:
            try:
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
                    row = db.execute("SELECT last_offset FROM agents").fetchone()
            except sqlite3.Error:
                return 0  # not created yet
            return int(row[0]) if row else 0

        wait_for(lambda: progress() > 300, what="the writer under way")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Registry(path) as registry:
        assert registry.integrity() == "ok"
        record = registry.load()["a"]
        newest = registry.exits("a", limit=1)[0]
        # every committed transaction is whole: the row matches its last exit
        assert record.restarts == newest.last_offset
        assert record.last_offset == newest.last_offset
        assert len(registry.exits("a", limit=1000)) == min(record.restarts, EXITS_KEPT)
        record.last_offset += 1  # and it takes new writes
        registry.save(record)
    start = time.monotonic()
    with Registry(path) as again:
        assert again.load()["a"].last_offset == record.last_offset
    assert time.monotonic() - start < 5


def test_the_structured_spec_of_an_agent_in_its_tui_is_kept(tmp_path: Path) -> None:
    from agenthost.daemon.tuispec import to_tui

    structured = SpawnSpec(agent_id="t1", agent="claude", env={"KEY": "v"})
    record = AgentRecord("t1", "running", spec=to_tui(structured, "s1"))
    record.structured_spec = structured
    with Registry(tmp_path / "daemon.db") as registry:
        registry.save(record)
        loaded = registry.load()["t1"]
        assert loaded.structured_spec == structured and loaded.spec == record.spec
        wire = loaded.to_wire()
        assert wire.tui and wire.structured_spec is not None
        assert wire.structured_spec.env == {"KEY": "<redacted>"}  # as spec's
        record.structured_spec = None
        registry.save(record)
        assert registry.load()["t1"].structured_spec is None
        assert not registry.load()["t1"].to_wire().tui
    db = sqlite3.connect(tmp_path / "daemon.db")  # a spec this version cannot read
    db.execute("UPDATE agents SET structured_spec = '{\"agent\": 5}'")
    db.commit()
    db.close()
    with Registry(tmp_path / "daemon.db") as registry:
        assert registry.load()["t1"].structured_spec is None


def test_a_registry_of_before_the_tui_gains_its_column(tmp_path: Path) -> None:
    path = tmp_path / "daemon.db"
    with Registry(path) as registry:
        registry.save(AgentRecord("old", "stopped"))
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE agents DROP COLUMN structured_spec")
    db.commit()
    db.close()
    with Registry(path) as registry:
        assert registry.load()["old"].structured_spec is None
