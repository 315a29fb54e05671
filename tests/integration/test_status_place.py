"""``agenthost status`` names where the agent works: ``cwd:`` for a plain directory,
``worktree: PATH (branch B)`` for the git worktree agenthost made for it (issue 28:
every directory was called a worktree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import HostFactory
from hosttools import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def rows(home: Path, agent_id: str) -> dict[str, str]:
    shown = cli(home, "status", agent_id)
    assert shown.returncode == 0, shown
    return {k: v.strip() for k, _, v in (line.partition(":") for line in shown.stdout.splitlines())}


@pytest.fixture
def plain_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ah-cwd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *ident, *args], cwd=cwd, env=env, check=True, capture_output=True)


def worktree(home: Path, repo: Path, agent_id: str) -> Path:
    """What `run --worktree` makes: <home>/worktrees/<id> on agenthost/<id>."""
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    path = home / "worktrees" / agent_id
    git(repo, "worktree", "add", "-q", "-b", f"agenthost/{agent_id}", str(path))
    return path


def test_a_plain_directory_is_a_cwd(host_factory: HostFactory, home: Path, plain_dir: Path) -> None:
    host_factory("s1", "--agent", "lines", "--cwd", str(plain_dir), command=["cat"])
    shown = rows(home, "s1")
    assert shown["cwd"] == str(plain_dir) and "worktree" not in shown


def test_the_agents_own_worktree_names_its_branch(
    host_factory: HostFactory, home: Path, plain_dir: Path
) -> None:
    path = worktree(home, plain_dir, "s2")
    host_factory("s2", "--agent", "lines", "--cwd", str(path), command=["cat"])
    shown = rows(home, "s2")
    assert shown["worktree"] == f"{path} (branch agenthost/s2)" and "cwd" not in shown
    # another agent in that directory: a plain directory to it
    host_factory("s3", "--agent", "lines", "--cwd", str(path), command=["cat"])
    assert rows(home, "s3")["cwd"] == str(path)


@pytest.mark.parametrize("garbage", ["fifo", "dir", "text", "escapes"])
def test_a_worktree_whose_git_file_is_garbage_still_has_a_status(
    host_factory: HostFactory, home: Path, garbage: str
) -> None:
    # the agent can write its worktree's .git: status must neither hang nor break
    path = home / "worktrees" / "s4"
    path.mkdir(parents=True)
    dot_git = path / ".git"
    if garbage == "fifo":
        os.mkfifo(dot_git)
    elif garbage == "dir":
        dot_git.mkdir()
    elif garbage == "text":
        dot_git.write_bytes(b"\xff\xfe not a gitdir line")
    else:
        (path / "g").mkdir()
        dot_git.write_text("gitdir: g\n")
        (path / "g" / "HEAD").write_text("ref: refs/heads/\x1b[2Jevil\n")
    host_factory("s4", "--agent", "lines", "--cwd", str(path), command=["cat"])
    shown = rows(home, "s4")
    if garbage == "escapes":
        assert shown["worktree"] == f"{path} (branch \\x1b[2Jevil)"
    else:
        assert shown["worktree"] == str(path)
