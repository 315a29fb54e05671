"""`agenthost run --worktree` with a real git repository, a real daemon and the demo
agent: a worktree per agent on its own branch, a setup command, `list` showing the
branch, and `forget` removing a clean worktree but keeping one with changes."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.cli.common import Exit

from daemontools import DaemonWorld, daemon_world

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        started.start_daemon()
        yield started


@pytest.fixture
def repo(home: Path) -> Path:
    path = home / "my repo"  # a space in the path, on purpose
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.invalid")
    git(path, "config", "user.name", "t")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path


def run(world: DaemonWorld, agent_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    return world.cli("run", "--agent-id", agent_id, "--agent", "demo", *args)


def test_an_agent_gets_a_worktree_on_its_own_branch(world: DaemonWorld, repo: Path) -> None:
    done = run(world, "w1", "--worktree", "--repo", str(repo), "--setup", "echo ready > SETUP")
    assert done.returncode == 0, done
    path = world.home / "worktrees" / "w1"
    assert (path / "README").read_text() == "hello\n"
    assert (path / "SETUP").read_text() == "ready\n"  # the setup ran in the worktree
    assert f"worktree {path}\nHEAD" in git(repo, "worktree", "list", "--porcelain")
    assert git(path, "branch", "--show-current").strip() == "agenthost/w1"
    status = json.loads(world.cli("status", "w1", "--json").stdout)
    assert status["agent"]["worktree"] == str(path)  # the agent runs in it
    agent = world.agents()["w1"]
    assert (agent["branch"], agent["worktree"]) == ("agenthost/w1", str(path))
    listed = world.cli("list")
    assert "BRANCH" in listed.stdout.splitlines()[0] and "agenthost/w1" in listed.stdout

    # stopped, then run again: the same worktree, on the same branch
    world.request("daemon.stop", {"agent_id": "w1"})
    again = run(world, "w1", "--worktree", "--repo", str(repo))
    assert again.returncode == 0, again
    assert world.agents()["w1"]["worktree"] == str(path)

    # forget removes a clean worktree; the branch and its commits stay
    world.request("daemon.stop", {"agent_id": "w1"})
    (path / "SETUP").unlink()
    forgot = world.cli("forget", "w1")
    assert forgot.returncode == 0, forgot
    assert f"removed its worktree {path} (its branch is kept)" in forgot.stdout
    assert not path.exists()
    assert "agenthost/w1" in git(repo, "branch", "--list")


def test_forget_keeps_a_worktree_with_changes_and_says_so(world: DaemonWorld, repo: Path) -> None:
    assert run(world, "w2", "--worktree", "feature/x", "--repo", str(repo)).returncode == 0
    path = world.home / "worktrees" / "w2"
    assert git(path, "branch", "--show-current").strip() == "feature/x"
    (path / "README").write_text("changed by the agent\n")
    world.request("daemon.stop", {"agent_id": "w2"})
    forgot = world.cli("forget", "w2", "--json")
    assert forgot.returncode == 0, forgot
    body = json.loads(forgot.stdout)
    assert body["worktree"] == str(path) and body["worktree_removed"] is False
    assert body["worktree_kept_reason"] == "it has uncommitted changes (1 file)"
    assert (path / "README").read_text() == "changed by the agent\n"  # nothing lost
    assert "w2" not in world.agents()


def test_forget_without_a_daemon_removes_the_worktree_too(world: DaemonWorld, repo: Path) -> None:
    assert run(world, "w3", "--worktree", "--repo", str(repo)).returncode == 0
    world.request("daemon.stop", {"agent_id": "w3"})
    world.daemons[-1].signal(9)
    world.daemons[-1].wait_exit()
    forgot = world.cli("forget", "w3")
    assert forgot.returncode == 0, forgot
    assert not (world.home / "worktrees" / "w3").exists()


def test_a_failing_setup_fails_the_run_and_leaves_nothing(world: DaemonWorld, repo: Path) -> None:
    done = run(world, "w4", "--worktree", "--repo", str(repo), "--setup", "echo nope >&2; exit 3")
    assert done.returncode != 0, done
    assert "the setup command failed (exit status 3)" in done.stderr and "nope" in done.stderr
    assert not (world.home / "worktrees" / "w4").exists()
    assert "agenthost/w4" not in git(repo, "branch", "--list")
    assert "w4" not in world.host_pids()


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        # usage errors: refused by `run` itself, before anything starts
        (["--worktree", "--repo", "/nonexistent-repo"], Exit.USAGE, "no such directory"),
        (["--worktree", "--repo", "/tmp"], Exit.USAGE, "is not in a git repository"),
        (["--worktree", "a b", "--repo", "REPO"], Exit.USAGE, "is not a usable branch name"),
        (["--worktree", "--cwd", "/tmp"], Exit.USAGE, "no --cwd with it"),
        (["--repo", "REPO"], Exit.USAGE, "--repo and --setup go with --worktree"),
        # the daemon's git says no: a worktree error, exit 14 (it was 5, `protocol`)
        (["--worktree", "main", "--repo", "REPO"], Exit.WORKTREE, "is checked out already"),
    ],
)
def test_bad_worktree_requests_are_refused_clearly(
    world: DaemonWorld, repo: Path, args: list[str], code: Exit, says: str
) -> None:
    args = [str(repo) if a == "REPO" else a for a in args]
    done = run(world, "bad", *args)
    assert done.returncode == code, done
    assert says in done.stderr, done
    assert not (world.home / "worktrees" / "bad").exists()
    assert "bad" not in world.agents()


@pytest.mark.parametrize("repo_arg", ["/nonexistent-repo", "/tmp", "FILE"])
def test_a_repo_that_is_no_repository_starts_no_daemon(home: Path, repo_arg: str) -> None:
    # it used to start a daemon in the background, which then said `invalid_payload`
    (home / "afile").write_text("")
    with daemon_world(home) as world:  # (no daemon started: `run` would start one)
        repo_arg = str(home / "afile") if repo_arg == "FILE" else repo_arg
        done = run(world, "bad", "--worktree", "--repo", repo_arg)
        assert done.returncode == Exit.USAGE, done
        assert "--repo" in done.stderr, done
        assert not (home / "daemon.lock").exists() and not (home / "logs").exists()
