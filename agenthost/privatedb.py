"""SQLite files of the home (the daemon's registry, the notice record, the gateway's
used links): created 0600 whatever the umask, opened read-only by URI, and used only
when they are the user's own (:mod:`agenthost.homefiles`): whoever can write the
registry decides what the daemon restarts, whoever can write the link ledger lets a
used approval link decide again."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Final

from agenthost.homefiles import check_beside, open_checked

SIDE_FILES: Final = ("-wal", "-shm", "-journal")
"""What SQLite opens beside a database by name: a planted write-ahead log is replayed
into it."""


def _check(path: Path, flags: int) -> None:
    """Open ``path`` with ``flags`` through the checks (UntrustedFile), then check the
    files SQLite will open beside it. SQLite then opens the same name: nobody else can
    have replaced it, as its directory passed the check too."""
    os.close(open_checked(path, flags))
    check_beside(path, SIDE_FILES)


def open_private(path: Path, **options: Any) -> sqlite3.Connection:
    """``path`` opened read-write, created 0600 first if missing (SQLite would use the
    umask); its -wal and -shm files take the database file's permissions. Raise
    UntrustedFile for a database (or a file beside it) that is not the user's own;
    OSError and sqlite3.Error are the caller's to translate."""
    _check(path, os.O_RDWR | os.O_CREAT)
    conn: sqlite3.Connection = sqlite3.connect(path, **options)
    return conn


def open_readonly(path: Path, **options: Any) -> sqlite3.Connection:
    """``path`` opened read-only (never created); quoted, so a home with ``?`` or
    ``#`` in its name is still a path. Raise UntrustedFile as :func:`open_private`;
    FileNotFoundError for a missing database."""
    _check(path, os.O_RDONLY)
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **options)
    return conn
