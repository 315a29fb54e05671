"""Appending to the journal, on the host's event path, without waiting for the disk.

Each batch of events is ``write``-n to the active segment *before* it is handed to
clients: the kernel has it in its page cache (a memory copy), so a host that is killed
the next instant (``kill -9``) loses nothing any client saw. Waiting for the disk
(``fsync``) is what is slow; it happens according to the sync policy:

* ``interval`` (default): a background thread fsyncs every ``sync_interval`` seconds
  when something was written. A power loss loses at most that interval.
* ``always``: fsync after every batch, before the batch reaches clients. Nothing is
  lost even on power loss; the event path waits for the disk.
* ``none``: the kernel writes back when it likes (within ~30 s on Linux).

Retention (age, total size) deletes whole old segments from the background thread; a
reader that has a segment open keeps reading it (an unlinked file lives on while
open), so pruning never races a reader.

If a write fails (disk full, I/O error) the journal stops for the life of this host:
the host keeps serving from its ring and reports the error. The epoch is then
invalidated (``meta.json`` removed): the host kept numbering events it could not
journal, so a host started later must not reuse those offsets under the same name.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

import structlog

from agenthost.errors import AgentHostError
from agenthost.homefiles import open_checked
from agenthost.journal.segments import (
    INDEX_EVERY,
    META,
    list_segments,
    read_meta,
    repair_tail,
    scan_segment,
    segment_name,
    write_atomic,
)
from agenthost.paths import ensure_private_dir

log = structlog.get_logger("agenthost.journal")

FORMAT: Final = 1
PRUNE_EVERY: Final = 60.0  # seconds between retention passes (and after each roll)


class SyncPolicy(StrEnum):
    """When the journal waits for the disk (see the module docstring)."""

    ALWAYS = "always"
    INTERVAL = "interval"
    NONE = "none"


@dataclass(frozen=True)
class JournalConfig:
    """How a host journals its events. Sizes in bytes, times in seconds; 0 = no limit."""

    sync: SyncPolicy = SyncPolicy.INTERVAL
    sync_interval: float = 1.0
    segment_bytes: int = 16 << 20
    max_bytes: int = 1 << 30
    max_age: float = 30 * 86400.0


class JournalFailed(AgentHostError):
    """A write to the journal failed; the journal is off for the life of this host."""


@dataclass
class Recovery:
    """What opening a journal found."""

    epoch: str
    next_offset: int
    new_epoch: bool
    repaired_bytes: int = 0
    repair_note: str | None = None


@dataclass
class _Active:
    first_offset: int
    path: Path
    fd: int
    size: int
    index: list[tuple[int, int]] = field(default_factory=list)


class JournalWriter:
    """The single writer of one agent's journal (the host holds the agent's lock)."""

    def __init__(self, directory: Path, agent_id: str, config: JournalConfig) -> None:
        self.directory = directory
        self.agent_id = agent_id
        self.config = config
        self.failed: str | None = None
        self.committed_offset = 0  # the newest offset fully written
        self._active: _Active | None = None
        self._lock = threading.Lock()  # guards _active swaps against the sync thread
        self._dirty = False
        self._to_sync: list[int] = []  # dup'ed fds of rolled segments, to fsync and close
        self._stop = threading.Event()
        self._prune_due = True
        self._meta_unsynced = False  # a new meta.json the sync thread has yet to fsync
        self._thread: threading.Thread | None = None

    # --- opening ---------------------------------------------------------------------

    def open(self) -> Recovery:
        """Create or recover the journal; return the epoch and the next offset.

        Raise ConfigError for a journal directory of another user, UntrustedFile for
        a segment to continue that is not the user's own: the agent's transcript is
        never appended where someone else can read or rewrite it."""
        ensure_private_dir(self.directory)
        meta = read_meta(self.directory)
        segments = list_segments(self.directory)
        recovery = Recovery(epoch="", next_offset=1, new_epoch=meta is None)
        if segments:
            first, path = segments[-1]
            scan = scan_segment(path, first)
            if scan.error is not None:
                recovery.repaired_bytes = repair_tail(path, scan)
                recovery.repair_note = (
                    f"journal: {recovery.repaired_bytes} bytes after offset "
                    f"{scan.last_offset} dropped on reopen: {scan.error}"
                )
                log.warning("journal.repaired", path=str(path), detail=recovery.repair_note)
            recovery.next_offset = scan.last_offset + 1
            fd = _open_append(path)
            self._active = _Active(first, path, fd, scan.valid_bytes, scan.index)
        if meta is None:
            meta = {
                "format": FORMAT,
                "agent_id": self.agent_id,
                "epoch": uuid.uuid4().hex,
                "created_at": time.time(),
            }
            # A new journal's meta is made durable by the first background sync (before
            # any segment is fsynced), not here: two fsyncs on open cost a new host
            # 50-200 ms of start-up on a busy disk (measured: docs/performance.md).
            # Under ``always`` nothing may wait for a later sync.
            durable = self.config.sync is SyncPolicy.ALWAYS
            write_atomic(self.directory / META, (json.dumps(meta) + "\n").encode(), durable=durable)
            self._meta_unsynced = self.config.sync is SyncPolicy.INTERVAL
        recovery.epoch = str(meta["epoch"])
        self.committed_offset = recovery.next_offset - 1
        if self.config.sync is not SyncPolicy.NONE or self.config.max_bytes or self.config.max_age:
            self._thread = threading.Thread(
                target=self._background, name="journal-sync", daemon=True
            )
            self._thread.start()
        return recovery

    # --- the event path -----------------------------------------------------------------

    def append(self, data: bytes, first_offset: int, count: int) -> None:
        """Write a batch of ``count`` encoded events starting at ``first_offset``.

        Raise JournalFailed (once) if the write fails; later calls do nothing.
        """
        if self.failed is not None:
            return
        try:
            offset, rest, left = first_offset, data, count
            while rest:
                part, records = self._fitting(rest, offset, left)
                self._write(part, offset)
                offset += records
                left -= records
                rest = rest[len(part) :]
        except OSError as exc:
            self._fail(f"journal write failed: {exc.strerror or exc}")
        self.committed_offset = first_offset + count - 1

    def _fitting(self, data: bytes, first_offset: int, count: int) -> tuple[bytes, int]:
        """The records of ``data`` (``count`` of them) that fit the active segment
        (rolling to a new one when none do) and how many they are. A batch larger than
        the room left is cut at a record boundary, so segments keep to their size and
        retention is exact; a single record larger than a whole segment gets a segment
        of its own. (A batch that fits, the usual case, is not counted again.)"""
        active = self._active or self._roll(first_offset)
        room = self.config.segment_bytes - active.size
        if len(data) <= room:
            return data, count
        cut = data.rfind(b"\n", 0, max(room, 0)) + 1
        if cut == 0:  # not even one record fits here
            if active.size:
                self._roll(first_offset)
                return self._fitting(data, first_offset, count)
            cut = data.find(b"\n") + 1 or len(data)  # an empty segment takes one record
        return data[:cut], data.count(b"\n", 0, cut)

    def _write(self, data: bytes, first_offset: int) -> None:
        active = self._active
        assert active is not None
        if not active.index or first_offset - active.index[-1][0] >= INDEX_EVERY:
            active.index.append((first_offset, active.size))
        view = memoryview(data)
        while view:
            written = os.write(active.fd, view)
            view = view[written:]
        active.size += len(data)
        if self.config.sync is SyncPolicy.ALWAYS:
            os.fsync(active.fd)
        else:
            self._dirty = True

    def _roll(self, first_offset: int) -> _Active:
        path = self.directory / segment_name(first_offset)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        new = _Active(first_offset, path, fd, 0)
        with self._lock:
            old, self._active = self._active, new
            if old is not None:
                # fsync the finished segment in the background, then close it
                self._to_sync.append(os.dup(old.fd))
                os.close(old.fd)
            self._prune_due = True
        if self.config.sync is SyncPolicy.ALWAYS:
            _fsync_path(self.directory)
        log.info("journal.segment", path=str(path))
        return new

    def _fail(self, message: str) -> None:
        self.failed = message
        log.error("journal.failed", error=message)
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            with contextlib.suppress(OSError):
                # a short write may have left part of the batch: cut back to the last
                # whole record (shrinking needs no free space)
                os.ftruncate(active.fd, active.size)
            with contextlib.suppress(OSError):
                os.close(active.fd)
        # offsets go on without the journal: a later host must not reuse them under
        # this epoch (unlinking needs no free space)
        with contextlib.suppress(OSError):
            os.unlink(self.directory / META)
        raise JournalFailed(message)

    # --- reading what is committed (for readers in this process) -----------------------

    def active_segment(self) -> tuple[int, Path, int, list[tuple[int, int]]] | None:
        """(first offset, path, committed size, sparse index) of the active segment."""
        active = self._active
        if active is None:
            return None
        return active.first_offset, active.path, active.size, list(active.index)

    # --- background --------------------------------------------------------------------

    def _background(self) -> None:
        interval = self.config.sync_interval if self.config.sync is SyncPolicy.INTERVAL else 1.0
        last_prune = 0.0
        while not self._stop.wait(max(0.01, interval)):
            try:
                self._sync()
                now = time.monotonic()
                if self._prune_due or now - last_prune > PRUNE_EVERY:
                    self._prune_due = False
                    last_prune = now
                    self.prune()
            except OSError as exc:
                # e.g. EMFILE while the host is out of descriptors (os.dup, scandir):
                # an exception here used to end this thread, and with it every fsync and
                # prune for the life of the host. Try again next round.
                log.warning("journal.background_failed", error=str(exc))

    def _sync(self) -> None:
        if self._meta_unsynced:
            self._meta_unsynced = False
            try:
                _fsync_path(self.directory / META)
                _fsync_path(self.directory)
            except OSError as exc:
                log.warning("journal.fsync_failed", error=str(exc))
        with self._lock:
            pending, self._to_sync = self._to_sync, []
            fd = None
            if self._dirty and self._active is not None and self.config.sync is not SyncPolicy.NONE:
                try:
                    fd = os.dup(self._active.fd)  # the writer may roll meanwhile
                except OSError:  # out of descriptors: keep everything for the next round
                    self._to_sync[:0] = pending
                    raise
                self._dirty = False
        for dup in [*pending, *([fd] if fd is not None else [])]:
            try:
                if self.config.sync is not SyncPolicy.NONE:
                    os.fsync(dup)
            except OSError as exc:
                log.warning("journal.fsync_failed", error=str(exc))
            finally:
                os.close(dup)

    def prune(self) -> list[Path]:
        """Delete the oldest segments beyond the size and age limits (never the active
        one); return what was deleted."""
        active = self._active
        segments = list_segments(self.directory)
        if active is not None:
            segments = [s for s in segments if s[1] != active.path]
        removed: list[Path] = []
        sizes = {path: _size(path) for _, path in segments}
        total = sum(sizes.values()) + (active.size if active else 0)
        now = time.time()
        for _, path in segments:
            too_big = self.config.max_bytes and total > self.config.max_bytes
            too_old = self.config.max_age and now - _mtime(path) > self.config.max_age
            if not (too_big or too_old):
                break  # oldest first: the rest are newer and smaller in total
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
                total -= sizes[path]
        if removed:
            log.info("journal.pruned", segments=len(removed))
        return removed

    def close(self) -> None:
        """Stop the background thread, fsync what is pending and close the files."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._dirty = self._dirty or self.config.sync is not SyncPolicy.NONE
        self._sync()
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            with contextlib.suppress(OSError):
                os.fsync(active.fd)
            os.close(active.fd)


def _open_append(path: Path) -> int:
    return open_checked(path, os.O_WRONLY | os.O_APPEND)


def _fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory's fsync makes its entries durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()
