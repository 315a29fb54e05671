"""Reading the journal: ranges of events, chat history pages, whole conversations.

Readers run in the host (in a worker thread, to replay old events to a client) and in
the CLI (``agenthost export`` works without a host). Inside the host a reader gets the
writer, so it never reads past what is fully written. Segments are found by name,
positions through a sparse index (one entry per 256 records): a read costs a seek and
the records it returns.

Every record served is checked: a whole line carrying the expected offset. A segment
deleted by retention while a reader wants it reads as "pruned" (None), never as an
error; one deleted while it is open is still read to its end.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agenthost.errors import AgentHostError
from agenthost.journal.segments import list_segments, read_meta, record_offset, scan_segment

if TYPE_CHECKING:
    from agenthost.journal.writer import JournalWriter

PAGE_BYTES: Final = 4 << 20
"""How many bytes of journal records one page of history holds at most (one entry
always fits, whatever its size)."""


_CHAT = b'"type":"chat_entry"'


class JournalCorrupt(AgentHostError):
    """A journal record is not what its position says (a damaged file)."""


class JournalReader:
    """Reads one agent's journal directory."""

    def __init__(self, directory: Path, writer: JournalWriter | None = None) -> None:
        self.directory = directory
        self.writer = writer
        self._indexes: dict[Path, list[tuple[int, int]]] = {}
        self._lock = threading.Lock()  # the index cache is shared by worker threads

    def exists(self) -> bool:
        return bool(list_segments(self.directory))

    def epoch(self) -> str | None:
        """The epoch the journal's stream belongs to (from its ``meta.json``), or None."""
        meta = read_meta(self.directory)
        return meta["epoch"] if meta is not None else None

    def oldest_offset(self) -> int | None:
        """The offset of the oldest record kept, or None if the journal is empty."""
        segments = list_segments(self.directory)
        return segments[0][0] if segments else None

    # --- ranges ----------------------------------------------------------------------

    def read(self, start: int, until: int, max_bytes: int = 1 << 18) -> list[bytes] | None:
        """Records ``start`` to ``until`` (inclusive), at most about ``max_bytes``.

        None if ``start`` is older than what is kept (pruned). Fewer records than asked
        when the journal ends first (or the byte budget is spent; at least one record
        is returned when one exists).
        """
        segments = list_segments(self.directory)
        firsts = [first for first, _ in segments]
        i = bisect.bisect_right(firsts, start) - 1
        if i < 0:
            return None
        out: list[bytes] = []
        size = 0
        expected = start
        while i < len(segments) and expected <= until and (size < max_bytes or not out):
            first, path = segments[i]
            try:
                for record in self._records(path, first, expected):
                    if record_offset(record) != expected:
                        raise JournalCorrupt(f"{path.name}: no record {expected} where expected")
                    out.append(record)
                    size += len(record)
                    expected += 1
                    if expected > until or size >= max_bytes:
                        break
            except FileNotFoundError:
                if not out:
                    return None  # pruned under our feet
                break
            i += 1
        return out

    def _records(self, path: Path, first: int, start: int) -> Iterator[bytes]:
        """Whole records of one segment from offset ``start`` on (start >= first)."""
        limit, index = self._limit_and_index(path, first)
        pos = 0
        if index:
            j = bisect.bisect_right(index, (start, float("inf"))) - 1
            if j >= 0:
                pos = index[j][1]
        with open(path, "rb") as fh:
            fh.seek(pos)
            while limit is None or pos < limit:
                line = fh.readline()
                if not line.endswith(b"\n"):
                    return  # the end of what is written (or a torn tail: never served)
                pos += len(line)
                offset = record_offset(line)
                if offset is not None and offset < start:
                    continue
                yield line

    def _limit_and_index(self, path: Path, first: int) -> tuple[int | None, list[tuple[int, int]]]:
        if self.writer is not None:
            active = self.writer.active_segment()
            if active is not None and active[1] == path:
                return active[2], active[3]
        with self._lock:
            index = self._indexes.get(path)
        if index is None:
            index = scan_segment(path, first).index
            with self._lock:
                self._indexes[path] = index
        return None, index

    def iter_records(self, start: int = 1) -> Iterator[bytes]:
        """Every record from ``start`` (or the oldest kept) to the end, in order."""
        for first, path in list_segments(self.directory):
            try:
                yield from self._records(path, first, max(start, first))
            except FileNotFoundError:
                continue

    # --- chat history ------------------------------------------------------------------

    def chat_entries(
        self,
        *,
        before: int | None = None,
        after: int | None = None,
        limit: int = 100,
        max_segments: int | None = None,
        max_bytes: int = PAGE_BYTES,
    ) -> tuple[list[dict[str, Any]], bool]:
        """A page of history entries (oldest first) and whether there are more.

        ``after``: the oldest ``limit`` entries after that offset. ``before``: the
        newest ``limit`` entries before it. Neither: the newest ``limit``.
        ``max_segments`` bounds how far back a ``before`` page looks. A page also ends
        once its entries' records pass ``max_bytes`` (at least one entry always comes):
        a client may ask for any ``limit``, and the page is built in memory.
        """
        if after is not None:
            page: list[dict[str, Any]] = []
            size = 0
            for record in self.iter_records(after + 1):
                entry = _chat_entry(record)
                if entry is not None and (before is None or entry["offset"] < before):
                    if len(page) == limit or (page and size + len(record) > max_bytes):
                        return page, True
                    page.append(entry)
                    size += len(record)
            return page, False
        segments: list[list[dict[str, Any]]] = []  # newest segment first
        count = size = 0
        looked = 0
        more = False
        for first, path in reversed(list_segments(self.directory)):
            if before is not None and first >= before:
                continue
            if max_segments is not None and looked >= max_segments:
                more = True
                break
            looked += 1
            found: list[tuple[dict[str, Any], int]] = []
            try:
                for record in self._records(path, first, first):
                    entry = _chat_entry(record)
                    if entry is not None and (before is None or entry["offset"] < before):
                        found.append((entry, len(record)))
            except FileNotFoundError:
                break  # pruned: nothing older is left either
            kept: list[dict[str, Any]] = []
            for entry, length in reversed(found):  # newest first, until the page is full
                if count == limit or (count and size + length > max_bytes):
                    more = True
                    break
                kept.append(entry)
                count += 1
                size += length
            segments.append(kept[::-1])
            if more:
                break
        return [entry for kept in reversed(segments) for entry in kept], more


def _chat_entry(record: bytes) -> dict[str, Any] | None:
    if _CHAT not in record[:80]:
        return None
    try:
        event = json.loads(record)
    except ValueError:
        return None
    entry = event.get("chat_entry") if isinstance(event, dict) else None
    if not isinstance(entry, dict):
        return None
    return {**entry, "offset": event.get("offset")}
