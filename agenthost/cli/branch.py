"""The branch of an agent's own worktree, for ``agenthost status`` (both its paths)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def worktree_branch(home: Path | None, agent_id: str, cwd: str) -> str | None:
    """The branch of the agent's directory when it is the worktree agenthost made for
    it (``<home>/worktrees/<id>``, ``run --worktree``), "" when its branch cannot be
    read; None for any other directory, and without ``home``."""
    import os

    from agenthost.paths import worktrees_dir

    if home is None or not cwd:
        return None
    own = worktrees_dir(home) / agent_id
    if os.path.realpath(cwd) != os.path.realpath(own):
        return None
    # a worktree's .git is a file that names its git directory, whose HEAD names the
    # branch; the agent can write both: read as untrusted text
    gitdir = _small_text(own / ".git").partition("gitdir:")[2].strip()
    head = _small_text(own / gitdir / "HEAD").strip() if gitdir else ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else ""


def _small_text(path: Path, limit: int = 4096) -> str:
    """The start of the regular file at ``path``, "" for anything else or an error
    (opened without blocking: a FIFO in its place must not hang ``status``)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
