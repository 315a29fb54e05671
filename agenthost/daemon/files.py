"""Where the daemon keeps its files under the home directory.

::

    <home>/daemon.sock   the daemon's socket (0600; the home directory is 0700)
    <home>/daemon.lock   flock held by the running daemon: one daemon per home
    <home>/daemon.db     the registry (SQLite, WAL: also daemon.db-wal, daemon.db-shm)
    <home>/logs/daemon.log   stderr of a daemon started in the background
"""

from __future__ import annotations

from pathlib import Path

from agenthost.errors import AgentHostError, Busy
from agenthost.lockfile import is_lock_held
from agenthost.paths import journal_dir, lock_path, logs_dir


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


def refuse_if_running(home: Path, agent_id: str) -> None:
    """Raise Busy if a host for the agent runs (holds its lock): it is not forgotten,
    and its journal is in use."""
    if is_lock_held(lock_path(home, agent_id)):
        raise Busy(
            f"a host for agent {agent_id!r} is running: a live agent is not forgotten",
            hint=f"stop it first: agenthost stop {agent_id}",
        )


def purge_journal(home: Path, agent_id: str) -> bool:
    """Delete the agent's journal directory; False if it has none. Raise Busy while a
    host for the agent runs: it is writing that journal."""
    refuse_if_running(home, agent_id)
    directory = journal_dir(home, agent_id)
    # a symlink is not a journal a host made: never follow it out of the home
    if directory.is_symlink() or not directory.is_dir():
        return False
    import shutil  # (not at the top: `list` imports this module for its paths)

    try:
        shutil.rmtree(directory)
    except OSError as exc:
        raise AgentHostError(f"cannot delete the journal {directory}: {exc.strerror}") from exc
    return True
