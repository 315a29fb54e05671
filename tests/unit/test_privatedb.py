"""The home's SQLite files are private from their creation, whatever the umask."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.attention.ledger import Ledger, ledger_path
from agenthost.privatedb import open_private, open_readonly
from agenthost.web.linkledger import LinkLedger


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def modes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mode & 0o777 for p in directory.iterdir()}


def test_a_private_database_and_its_wal_are_0600(tmp_path: Path, loose_umask: None) -> None:
    db = open_private(tmp_path / "x.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (a)")
    db.execute("INSERT INTO t VALUES (1)")
    assert set(modes(tmp_path).values()) == {0o600}
    assert {"x.db", "x.db-wal", "x.db-shm"} <= set(modes(tmp_path))
    db.close()


def test_the_notice_record_and_the_used_links_are_private(
    tmp_path: Path, loose_umask: None
) -> None:
    Ledger(tmp_path).close()
    assert ledger_path(tmp_path).stat().st_mode & 0o777 == 0o600
    links = LinkLedger(tmp_path / "web" / "links.db")
    assert links.claim("nonce", 2_000_000_000)
    assert set(modes(tmp_path / "web").values()) == {0o600}


def test_read_only_never_creates_and_takes_odd_names(tmp_path: Path) -> None:
    odd = tmp_path / "a?b#c.db"
    with pytest.raises(FileNotFoundError):
        open_readonly(odd)
    assert not odd.exists()
    open_private(odd).close()
    open_readonly(odd).close()
