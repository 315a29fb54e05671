"""Where the daemon keeps its files under the home directory.

::

    <home>/daemon.sock   the daemon's socket (0600; the home directory is 0700)
    <home>/daemon.lock   flock held by the running daemon: one daemon per home
    <home>/daemon.db     the registry (SQLite, WAL: also daemon.db-wal, daemon.db-shm)
    <home>/logs/daemon.log   stderr of a daemon started in the background
"""

from __future__ import annotations

from pathlib import Path

from agenthost.paths import logs_dir


def daemon_socket_path(home: Path) -> Path:
    """``<home>/daemon.sock``."""
    return home / "daemon.sock"


def daemon_lock_path(home: Path) -> Path:
    """``<home>/daemon.lock``."""
    return home / "daemon.lock"


def registry_path(home: Path) -> Path:
    """``<home>/daemon.db``."""
    return home / "daemon.db"


def daemon_log_path(home: Path) -> Path:
    """``<home>/logs/daemon.log``."""
    return logs_dir(home) / "daemon.log"
