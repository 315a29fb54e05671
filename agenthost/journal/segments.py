"""The journal's files: segment names, record checks, the torn-tail repair.

A journal is a directory of append-only segment files. Each record is one stream event
exactly as clients receive it: a JSON object on one line. A segment is named after the
offset of its first record, zero-padded so that names sort like offsets::

    <home>/journal/<agent_id>/00000000000000000001.jsonl
    <home>/journal/<agent_id>/00000000000000104857.jsonl
    <home>/journal/<agent_id>/meta.json

A record is valid when it is a whole line (ends with a newline), carries the offset that
follows the previous record's, and (for the records checked in full) parses as JSON. A
crash in the middle of a write leaves a prefix of a record at the end of the last
segment; garbage may follow it. Reopening keeps the longest valid prefix of the segment
and cuts the rest: nothing valid is lost, nothing invalid is ever served.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

SUFFIX: Final = ".jsonl"
META: Final = "meta.json"
"""The journal's own facts (its epoch, ...), beside the segments."""
_NAME_RE: Final = re.compile(r"^(\d{20})\.jsonl$")
# our encoder writes "offset" right after "agent_id": a cheap, exact way to read it
_OFFSET_RE: Final = re.compile(rb'"offset":(\d{1,19}),"timestamp":"')
FULL_CHECK_TAIL: Final = 64  # records at the end of a segment that are parsed in full


def segment_name(first_offset: int) -> str:
    """The file name of a segment whose first record has ``first_offset``."""
    return f"{first_offset:020d}{SUFFIX}"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """(first offset, path) of every segment, oldest first; [] if there is no journal."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        match = _NAME_RE.match(name)
        if match:
            found.append((int(match.group(1)), directory / name))
    found.sort()
    return found


def record_offset(record: bytes) -> int | None:
    """The offset a record carries, or None if it does not look like one of ours."""
    match = _OFFSET_RE.search(record, 0, 400)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class ScanResult:
    """What a scan of one segment found."""

    first_offset: int
    last_offset: int  # first_offset - 1 when the segment holds no valid record
    valid_bytes: int  # the length of the valid prefix
    size: int  # the file's size when scanned
    index: list[tuple[int, int]]  # sparse (offset, byte position) pairs
    error: str | None = None  # why the valid prefix ends before the file does


INDEX_EVERY: Final = 256  # records between two entries of a segment's sparse index


def scan_segment(path: Path, first_offset: int) -> ScanResult:
    """Find the longest valid prefix of a segment (and build its sparse index).

    Read a line at a time: a reader scans a rolled segment (16 MiB by default) in a
    worker thread to index it, and the whole file in one buffer took that much of the
    thread's malloc arena, which kept it after the buffer was freed (17 MiB of RSS per
    worker thread after a flood that caught clients up from the journal).
    """
    expected = first_offset
    pos = 0
    index: list[tuple[int, int]] = []
    tail: deque[tuple[int, bytes]] = deque(maxlen=FULL_CHECK_TAIL)  # (position, record)
    error = None
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size  # what is scanned, if the file grows
        while pos < size:
            line = fh.readline(size - pos)
            if not line:  # the file shrank meanwhile
                size = pos
                break
            if not line.endswith(b"\n"):
                error = f"a record cut short at byte {pos} (a torn write)"
                break
            if record_offset(line) != expected:
                error = f"no record with offset {expected} at byte {pos}"
                break
            if (expected - first_offset) % INDEX_EVERY == 0:
                index.append((expected, pos))
            tail.append((pos, line))
            expected += 1
            pos += len(line)
    # The cheap check trusts the offset field; parse the newest records in full, where a
    # torn write or appended garbage would be.
    for i, (start, record) in enumerate(tail):
        try:
            json.loads(record)
        except ValueError:
            bad = expected - len(tail) + i
            error = f"record {bad} at byte {start} is not valid JSON"
            expected = bad
            pos = start
            index = [(o, p) for o, p in index if o < expected]
            break
    return ScanResult(first_offset, expected - 1, pos, size, index, error)


def repair_tail(path: Path, scan: ScanResult) -> int:
    """Cut what follows the valid prefix of a segment; return the bytes removed."""
    removed = scan.size - scan.valid_bytes
    if removed > 0:
        with open(path, "r+b") as fh:
            fh.truncate(scan.valid_bytes)
            fh.flush()
            os.fsync(fh.fileno())
    return removed


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file.

    ``durable=False`` skips the two fsyncs (file, directory): a host crash still leaves
    one whole file, a power loss may leave neither; the caller syncs later."""
    tmp = path.with_name(f".{path.name}.tmp")
    # a new file, ours and 0600: one left there (a crash, or planted) is never reused,
    # or its owner and mode would pass to ``path``
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_meta(directory: Path) -> dict[str, Any] | None:
    """A journal directory's ``meta.json``, or None when it is missing, unreadable or
    has no string ``epoch``."""
    try:
        meta = json.loads((directory / META).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("epoch"), str):
        return None
    return meta
