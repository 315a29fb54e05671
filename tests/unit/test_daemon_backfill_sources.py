"""agenthost.daemon.backfill's sources on real files: a journal read as the host wrote
it, damaged journals and missing hosts (garbage in: nothing wrong is ever sent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agenthost.daemon.backfill import SLICE_EVENTS, HostSource, JournalSource, open_source
from agenthost.daemon.fanout import Held
from agenthost.journal import JournalReader
from agenthost.journal.segments import segment_name
from agenthost.protocol import EventEncoder


def records(first: int, last: int) -> list[bytes]:
    encoder = EventEncoder("a")
    lines = [f"line {o}".encode() for o in range(first, last + 1)]
    return encoder.output_lines(first, "2026-01-01T00:00:00.000001Z", lines, "stdout")


def journal(home: Path, epoch: str | bytes, body: bytes) -> Path:
    directory = home / "journal" / "a"
    directory.mkdir(parents=True)
    meta = epoch if isinstance(epoch, bytes) else json.dumps({"epoch": epoch}).encode()
    (directory / "meta.json").write_bytes(meta)
    (directory / segment_name(1)).write_bytes(body)
    return directory


def test_the_journal_is_passed_through_in_slices(tmp_path: Path) -> None:
    written = records(1, SLICE_EVENTS + 10)
    journal(tmp_path, "e", b"".join(written))

    async def run() -> None:
        found = await open_source(tmp_path, "a", "e", 0, timeout=0.5)
        assert found is not None
        held, source = found
        assert held == Held("e", 1) and isinstance(source, JournalSource)
        first, frames = await source.read(1, SLICE_EVENTS + 10)
        assert first == 1 and frames == written[:SLICE_EVENTS]  # one slice, the same bytes
        first, frames = await source.read(SLICE_EVENTS + 1, SLICE_EVENTS + 10)
        assert frames == written[SLICE_EVENTS:]

    asyncio.run(run())


def test_a_damaged_journal_is_never_served(tmp_path: Path) -> None:
    good = records(1, 5)
    bad = b'{"kind":"event","agent_id":"a","offset":9,"timestamp":"x"}\n'  # not offset 6
    journal(tmp_path, "e", b"".join(good) + bad + b"\x00garbage\xff\n")

    async def run() -> None:
        found = await open_source(tmp_path, "a", "e", 0, timeout=0.5)
        assert found is not None
        _, source = found
        assert await source.read(1, 5) == (1, good)
        # past the damage: the journal has nothing good, and no host answers
        assert await source.read(6, 10) == (6, [])

    asyncio.run(run())


def test_no_usable_journal_and_no_host_means_no_backfill(tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir(mode=0o700)

    async def run() -> None:
        # another epoch, a meta.json that is not JSON, one without an epoch: the
        # journal is not this stream's; no host runs: nothing to backfill from
        for meta in ("other", b"\x00{not json", b'{"epoch": 5}'):
            journal(tmp_path, meta, b"".join(records(1, 3)))
            assert await open_source(tmp_path, "a", "e", 0, timeout=0.5) is None
            for path in (tmp_path / "journal" / "a").iterdir():
                path.unlink()
            (tmp_path / "journal" / "a").rmdir()
        host = HostSource(tmp_path, "a", "e", 0.5)
        assert await host.read(1, 3) == (1, [])
        assert await host.held(0) is None

    asyncio.run(run())


def test_a_journal_without_segments_asks_the_host(tmp_path: Path) -> None:
    directory = journal(tmp_path, "e", b"")
    (directory / segment_name(1)).unlink()
    (tmp_path / "hosts").mkdir(mode=0o700)
    reader = JournalReader(directory)
    assert reader.oldest_offset() is None

    async def run() -> None:
        assert await open_source(tmp_path, "a", "e", 0, timeout=0.5) is None

    asyncio.run(run())


def test_a_journal_that_cannot_be_listed_asks_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # EIO or EACCES while listing the segments (root, as the tests run, never gets
    # EACCES: the fault is injected) must not fail the whole watch: the host is asked
    journal(tmp_path, "e", b"".join(records(1, 3)))
    (tmp_path / "hosts").mkdir(mode=0o700)

    def broken(self: JournalReader) -> int | None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(JournalReader, "oldest_offset", broken)

    async def run() -> None:
        assert await open_source(tmp_path, "a", "e", 0, timeout=0.5) is None  # no host

    asyncio.run(run())
