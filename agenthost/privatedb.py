"""SQLite files of the home (the daemon's registry, the notice record, the gateway's
used links): created 0600 whatever the umask, and opened read-only by URI."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any


def open_private(path: Path, **options: Any) -> sqlite3.Connection:
    """``path`` opened read-write, created 0600 first if missing (SQLite would use the
    umask); its -wal and -shm files take the database file's permissions. OSError and
    sqlite3.Error are the caller's to translate."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    conn: sqlite3.Connection = sqlite3.connect(path, **options)
    return conn


def open_readonly(path: Path, **options: Any) -> sqlite3.Connection:
    """``path`` opened read-only (never created); quoted, so a home with ``?`` or
    ``#`` in its name is still a path."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **options)
    return conn
