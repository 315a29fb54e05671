"""The journal's writer and reader on real files: round trips, segments, recovery from
torn writes and garbage, retention, failures (a full disk is /dev/full)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.journal import (
    JournalConfig,
    JournalFailed,
    JournalReader,
    JournalWriter,
    SyncPolicy,
)
from agenthost.journal.segments import list_segments, record_offset, scan_segment, segment_name
from agenthost.protocol import EventEncoder

ENC = EventEncoder("a1")
TS = "2026-01-01T00:00:00.000000Z"


def event(offset: int, text: str | None = None) -> bytes:
    return ENC.output(offset, TS, text if text is not None else f"line {offset}", "stdout")


def chat(offset: int, content: str) -> bytes:
    entry = {"role": "user", "content": content, "timestamp": TS}
    return ENC.event("chat_entry", offset, TS, {"chat_entry": entry})


def batch(first: int, count: int) -> bytes:
    return b"".join(event(o) for o in range(first, first + count))


@pytest.fixture
def jdir(tmp_path: Path) -> Path:
    return tmp_path / "journal" / "a1"


def open_writer(jdir: Path, **kw: object) -> tuple[JournalWriter, int, str]:
    config = JournalConfig(**{"sync": SyncPolicy.NONE, "max_bytes": 0, "max_age": 0, **kw})  # type: ignore[arg-type]
    writer = JournalWriter(jdir, "a1", config)
    recovery = writer.open()
    return writer, recovery.next_offset, recovery.epoch


@pytest.fixture
def written(jdir: Path) -> Iterator[tuple[JournalWriter, JournalReader]]:
    """1000 events in segments of ~8 KiB (many segments)."""
    writer, nxt, _ = open_writer(jdir, segment_bytes=8192)
    assert nxt == 1
    for first in range(1, 1001, 20):
        writer.append(batch(first, 20), first, 20)
    yield writer, JournalReader(jdir, writer)
    writer.close()


def test_round_trip_across_segments(written: tuple[JournalWriter, JournalReader]) -> None:
    writer, reader = written
    assert len(list_segments(writer.directory)) > 10
    for start, until in [(1, 1000), (1, 1), (257, 300), (999, 1000), (500, 10_000)]:
        records = reader.read(start, until, max_bytes=1 << 30)
        assert records is not None
        assert [record_offset(r) for r in records] == list(range(start, min(until, 1000) + 1))
        assert records[0] == event(start)
    assert reader.read(1001, 2000) == []  # the future is empty, not an error
    assert [record_offset(r) for r in reader.iter_records(995)] == list(range(995, 1001))


def test_read_respects_the_byte_budget_but_returns_one(
    written: tuple[JournalWriter, JournalReader],
) -> None:
    _, reader = written
    records = reader.read(1, 1000, max_bytes=1)
    assert records is not None and len(records) == 1
    some = reader.read(1, 1000, max_bytes=4000)
    assert some is not None and 1 < len(some) < 1000
    assert sum(len(r) for r in some) < 4000 + len(some[-1])


def test_a_reader_without_the_writer_reads_the_same(
    written: tuple[JournalWriter, JournalReader],
) -> None:
    writer, reader = written
    writer.close()
    cold = JournalReader(writer.directory)
    assert cold.read(1, 1000, 1 << 30) == reader.read(1, 1000, 1 << 30)


def test_reopen_continues_epoch_and_offsets(jdir: Path) -> None:
    writer, _, epoch = open_writer(jdir)
    writer.append(batch(1, 50), 1, 50)
    writer.close()
    again, nxt, epoch2 = open_writer(jdir)
    assert (nxt, epoch2) == (51, epoch)
    again.append(batch(51, 10), 51, 10)
    again.close()
    records = JournalReader(jdir).read(1, 60, 1 << 30)
    assert records is not None and [record_offset(r) for r in records] == list(range(1, 61))


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-7],  # a torn write: the last record cut short
        lambda data: data + b'{"kind":"event","type":"out',  # a torn record after
        lambda data: data + os.urandom(300),  # random garbage appended
        lambda data: data + b"\n\n\n",  # blank lines
        lambda data: data + event(99),  # a whole record with the wrong offset
        lambda data: data[:-3] + b"}}\n",  # a last line that is not JSON
    ],
)
def test_damaged_tail_is_cut_on_reopen(jdir: Path, damage: object) -> None:
    writer, _, epoch = open_writer(jdir)
    writer.append(batch(1, 40), 1, 40)
    writer.close()
    (first, path), *_ = reversed(list_segments(jdir))
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    again, nxt, epoch2 = open_writer(jdir)
    assert epoch2 == epoch
    records = JournalReader(jdir, again).read(1, 100, 1 << 30)
    assert records is not None
    offsets = [record_offset(r) for r in records]
    assert offsets == list(range(1, nxt))  # only whole, valid records, in order
    assert nxt in (40, 41)  # at most the damaged last record is lost
    for r in records:
        json.loads(r)
    again.append(batch(nxt, 5), nxt, 5)  # and it goes on from there
    again.close()
    final = JournalReader(jdir).read(1, 10**6, 1 << 30)
    assert final is not None
    assert final == [event(o) for o in range(1, nxt + 5)]  # byte for byte
    # the damage is gone from the files, not just skipped by readers
    on_disk = b"".join(p.read_bytes() for _, p in list_segments(jdir))
    assert on_disk == b"".join(final)


def test_missing_meta_starts_a_new_epoch_after_the_kept_offsets(jdir: Path) -> None:
    writer, _, epoch = open_writer(jdir)
    writer.append(batch(1, 10), 1, 10)
    writer.close()
    (jdir / "meta.json").unlink()
    again, nxt, epoch2 = open_writer(jdir)
    assert epoch2 != epoch and nxt == 11
    again.close()


def test_disk_full_fails_once_invalidates_the_epoch_and_keeps_what_was_written(
    jdir: Path,
) -> None:
    writer, _, _ = open_writer(jdir)
    writer.append(batch(1, 10), 1, 10)
    assert writer._active is not None
    full = os.open("/dev/full", os.O_WRONLY)  # every write: ENOSPC
    os.close(writer._active.fd)
    writer._active.fd = full
    with pytest.raises(JournalFailed, match="No space left"):
        writer.append(batch(11, 5), 11, 5)
    assert writer.failed is not None and writer.committed_offset == 10
    writer.append(batch(16, 5), 16, 5)  # a no-op now, not a second error
    assert not (jdir / "meta.json").exists()  # nobody may continue this epoch
    records = JournalReader(jdir).read(1, 100, 1 << 30)
    assert records is not None and len(records) == 10
    writer.close()


def test_prune_by_size_and_age_never_the_active_segment(jdir: Path) -> None:
    writer, _, _ = open_writer(jdir, segment_bytes=4096, max_bytes=20_000)
    for first in range(1, 601, 10):
        writer.append(batch(first, 10), first, 10)
    before = list_segments(jdir)
    removed = writer.prune()
    after = list_segments(jdir)
    assert removed and len(after) == len(before) - len(removed)
    assert sum(p.stat().st_size for _, p in after) <= 20_000 + 4096
    assert after[-1] == before[-1]  # the active one stays
    reader = JournalReader(jdir, writer)
    assert reader.read(1, 10) is None  # pruned
    oldest = reader.oldest_offset()
    assert oldest is not None and oldest > 1
    records = reader.read(oldest, 600, 1 << 30)
    assert records is not None and record_offset(records[-1]) == 600
    writer.close()
    aged, _, _ = open_writer(jdir, segment_bytes=4096, max_age=3600)
    old = time.time() - 7200
    for _, path in list_segments(jdir)[:-1]:
        os.utime(path, (old, old))
    aged.prune()
    assert len(list_segments(jdir)) == 1
    aged.close()


def test_a_segment_pruned_while_read_is_read_to_its_end(jdir: Path) -> None:
    writer, _, _ = open_writer(jdir, segment_bytes=4096)
    for first in range(1, 301, 10):
        writer.append(batch(first, 10), first, 10)
    writer.close()
    reader = JournalReader(jdir)
    records = reader.iter_records(1)
    first_record = next(records)
    list_segments(jdir)[0][1].unlink()  # retention strikes mid-read
    rest = list(records)
    offsets = [record_offset(first_record)] + [record_offset(r) for r in rest]
    assert offsets[0] == 1 and offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_chat_pages(jdir: Path) -> None:
    writer, _, _ = open_writer(jdir, segment_bytes=2048)
    offset = 1
    contents = []
    for i in range(60):
        writer.append(event(offset), offset, 1)
        offset += 1
        writer.append(chat(offset, f"m{i}"), offset, 1)
        contents.append((offset, f"m{i}"))
        offset += 1
    reader = JournalReader(jdir, writer)
    newest, more = reader.chat_entries(limit=10)
    assert [e["content"] for e in newest] == [f"m{i}" for i in range(50, 60)] and more
    page, more = reader.chat_entries(before=newest[0]["offset"], limit=25)
    assert [e["content"] for e in page] == [f"m{i}" for i in range(25, 50)] and more
    first, more = reader.chat_entries(after=0, limit=5)
    assert [e["content"] for e in first] == ["m0", "m1", "m2", "m3", "m4"] and more
    tail, more = reader.chat_entries(after=contents[-3][0], limit=5)
    assert [e["content"] for e in tail] == ["m58", "m59"] and not more
    everything, more = reader.chat_entries(after=0, limit=1000)
    assert [(e["offset"], e["content"]) for e in everything] == contents and not more
    writer.close()


def test_chat_pages_end_at_the_byte_budget(jdir: Path) -> None:
    # a client may ask for any limit; the page is bounded by bytes all the same
    writer, _, _ = open_writer(jdir, segment_bytes=4096)
    big = "x" * 1000
    for offset in range(1, 41):
        writer.append(chat(offset, f"{offset}:{big}"), offset, 1)
    reader = JournalReader(jdir, writer)
    size = len(chat(40, f"40:{big}"))  # the largest record here (the others are a few bytes less)

    first, more = reader.chat_entries(after=0, limit=10**9, max_bytes=5 * size)
    assert [e["offset"] for e in first] == [1, 2, 3, 4, 5] and more
    nxt, more = reader.chat_entries(after=5, limit=10**9, max_bytes=5 * size)
    assert [e["offset"] for e in nxt] == [6, 7, 8, 9, 10] and more

    newest, more = reader.chat_entries(limit=10**9, max_bytes=7 * size)
    assert [e["offset"] for e in newest] == list(range(34, 41)) and more
    older, more = reader.chat_entries(before=34, limit=10**9, max_bytes=7 * size)
    assert [e["offset"] for e in older] == list(range(27, 34)) and more

    # one entry always comes, even when it alone is over the budget
    one, more = reader.chat_entries(after=0, limit=10, max_bytes=1)
    assert [e["offset"] for e in one] == [1] and more
    last, more = reader.chat_entries(before=41, limit=10, max_bytes=1)
    assert [e["offset"] for e in last] == [40] and more
    # and a budget that holds everything ends the page with the journal
    everything, more = reader.chat_entries(after=0, limit=10**9, max_bytes=10**9)
    assert len(everything) == 40 and not more
    writer.close()


def test_segment_names_sort_like_offsets() -> None:
    names = [segment_name(o) for o in (1, 9, 10, 123456789, 10**15)]
    assert names == sorted(names)


def test_a_batch_larger_than_a_segment_is_cut_at_record_boundaries(jdir: Path) -> None:
    writer, _, _ = open_writer(jdir, segment_bytes=4096)
    writer.append(batch(1, 500), 1, 500)  # ~60 KiB in one batch
    huge = event(501, "x" * 10_000)  # one record larger than a whole segment
    writer.append(huge + batch(502, 10), 501, 11)
    writer.close()
    segments = list_segments(jdir)
    assert len(segments) > 10
    for first, path in segments:
        data = path.read_bytes()
        assert data.endswith(b"\n") and record_offset(data) == first  # whole records only
        assert len(data) <= 4096 or data.count(b"\n") == 1  # only a lone record exceeds it
    assert JournalReader(jdir).read(1, 511, 1 << 30) == [
        *[event(o) for o in range(1, 501)],
        huge,
        *[event(o) for o in range(502, 512)],
    ]


@pytest.mark.parametrize("policy", list(SyncPolicy))
def test_new_meta_is_written_at_once_and_made_durable_by_the_first_sync(
    jdir: Path, policy: SyncPolicy
) -> None:
    writer, _, epoch = open_writer(jdir, sync=policy, sync_interval=3600.0)
    try:
        # readable at once (a crash of the host keeps it), whatever the policy
        assert json.loads((jdir / "meta.json").read_bytes())["epoch"] == epoch
        assert not list(jdir.glob(".*.tmp"))
        # only ``interval`` leaves the fsync to the background thread's first pass
        assert writer._meta_unsynced is (policy is SyncPolicy.INTERVAL)
        writer._sync()
        assert writer._meta_unsynced is False
    finally:
        writer.close()
    again, _, epoch2 = open_writer(jdir, sync=policy)
    again.close()
    assert epoch2 == epoch and again._meta_unsynced is False


def test_a_segment_is_scanned_a_line_at_a_time(jdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader indexes a rolled segment in a worker thread: the whole file in one
    buffer (16 MiB by default) stayed in that thread's malloc arena after the scan."""
    writer, _, _ = open_writer(jdir)
    writer.append(batch(1, 600), 1, 600)
    writer.close()
    (first, path), *_ = list_segments(jdir)
    whole = path.read_bytes()

    def read_bytes(self: Path) -> bytes:
        raise AssertionError(f"{self} read whole")

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    scan = scan_segment(path, first)
    assert (scan.last_offset, scan.valid_bytes, scan.size, scan.error) == (
        600,
        len(whole),
        len(whole),
        None,
    )
    assert [o for o, _ in scan.index] == [1, 257, 513]
    assert all(whole[p:].startswith(event(o)) for o, p in scan.index)
