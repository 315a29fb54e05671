"""A git worktree per agent: ``agenthost run --worktree [BRANCH] --repo DIR``.

The daemon does the git work (so that ``--remote`` works the same: the repository is on
the agent's machine). At a spawn, :func:`prepare` gives the agent a worktree of its own,
``<home>/worktrees/<agent id>``, on its own branch (``agenthost/<agent id>`` unless one
is named; created from the repository's HEAD when it does not exist, or from the
parent's branch for a fork), runs the optional
setup command in it, and returns the spec with ``cwd`` set to the worktree, which the
registry keeps: restarts and a later ``run`` of the same id use the same worktree. At
``forget``, :func:`remove` removes the worktree, unless it has uncommitted changes (then
it is kept, and the answer says so); the branch always stays, with its commits.

Branch names are checked before git runs (:func:`check_branch`: the rules of ``git
check-ref-format --branch``; a ConfigError, which ``run`` reports as a usage error, as
it does a ``--repo`` that is not a repository: :func:`find_repo`, before anything
starts). Everything else that fails (git, a branch checked out elsewhere, the setup)
is a WorktreeError that says what git said: its own wire code and exit status, 14.
Blocking (``subprocess``): the daemon runs these in a thread.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agenthost.daemon.protocol import ForgetResponse, SpawnSpec
from agenthost.errors import ConfigError, WorktreeError
from agenthost.launch import open_log
from agenthost.paths import ensure_private_dir, worktrees_dir

GIT_TIMEOUT: Final = 120.0
SETUP_TIMEOUT: Final = 1800.0
"""A setup command (``npm ci``, a build) may take a while; not for ever."""
OUTPUT_KEPT: Final = 2000
"""Characters of a failed command's output quoted in the error."""
_BAD_BRANCH: Final = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def branch_for(agent_id: str, requested: str) -> str:
    """The agent's branch: the one asked for, or ``agenthost/<agent id>``."""
    return requested or f"agenthost/{agent_id}"


def check_branch(name: str) -> str:
    """``name`` if git accepts it as a new branch name, else ConfigError saying why
    (the rules of ``git check-ref-format --branch``)."""
    why = None
    if not name or len(name) > 250:
        why = "it must have 1 to 250 characters"
    elif name.startswith("-"):
        why = "it must not start with '-'"
    elif _BAD_BRANCH.search(name):
        why = "no spaces, control characters, '..', '@{', '//' or any of ~^:?*[\\"
    elif name == "@" or name.endswith((".", "/", ".lock")) or name.startswith("/"):
        why = "it must not be '@', start with '/' or end with '.', '/' or '.lock'"
    elif any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        why = "no part may start with '.' or end with '.lock'"
    if why is not None:
        raise ConfigError(f"{name!r} is not a usable branch name: {why}")
    return name


def worktree_path(home: Path, agent_id: str) -> Path:
    """Where the agent's worktree lives."""
    return worktrees_dir(home) / agent_id


@dataclass(frozen=True, slots=True)
class Removal:
    """What ``forget`` did with an agent's worktree."""

    path: str
    removed: bool
    reason: str | None = None
    """Why it was kept (uncommitted changes, or git refused)."""


def keep_reason(porcelain: str) -> str | None:
    """Why a worktree whose ``git status --porcelain`` says this must be kept: None when
    it is clean (untracked files count as changes: they would be lost too)."""
    changed = [line for line in porcelain.splitlines() if line.strip()]
    if not changed:
        return None
    return f"it has uncommitted changes ({len(changed)} file{'s' if len(changed) != 1 else ''})"


def _git(repo: Path | str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
            check=False,
        )
    except FileNotFoundError:
        raise WorktreeError("git is not installed: --worktree needs it") from None
    except subprocess.TimeoutExpired:
        raise WorktreeError(f"git {args[0]} in {repo} took over {GIT_TIMEOUT:g}s") from None
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout).strip()[-OUTPUT_KEPT:]
        raise WorktreeError(f"git {' '.join(args[:2])} failed in {repo}: {said}")
    return result


def _worktrees(repo: Path) -> dict[str, str]:
    """Worktree path -> its branch (``refs/heads/...`` stripped; "" when detached)."""
    out: dict[str, str] = {}
    path = None
    for line in _git(repo, "worktree", "list", "--porcelain").stdout.splitlines():
        if line.startswith("worktree "):
            path = os.path.realpath(line[len("worktree ") :])
            out[path] = ""
        elif line.startswith("branch ") and path is not None:
            out[path] = line[len("branch ") :].removeprefix("refs/heads/")
    return out


def find_repo(repo: str) -> Path:
    """The top directory of the git repository ``repo`` (``--repo``) is in; ConfigError
    when it is no directory or in no repository (``run`` checks it before anything
    starts: a usage error)."""
    given = Path(repo).expanduser()
    if not given.is_dir():
        raise ConfigError(f"--repo {repo}: no such directory")
    top = _git(given, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0:
        raise ConfigError(f"--repo {repo} is not in a git repository")
    return Path(top.stdout.strip())


def prepare(home: Path, spec: SpawnSpec, log_file: Path) -> SpawnSpec:
    """The agent's worktree, made (or found again) for ``spec``; the spec to run, with
    ``cwd`` the worktree. Raise WorktreeError when git refuses or the setup fails (a
    worktree made here is then removed, with its new branch), and for a repository or
    a branch name ``run`` should have refused (a spawn request of another client)."""
    assert spec.worktree is not None
    try:
        if not spec.repo:
            raise ConfigError("--worktree needs the repository (--repo DIR)")
        branch = check_branch(branch_for(spec.agent_id, spec.worktree))
        repo = find_repo(spec.repo)
    except WorktreeError:
        raise
    except ConfigError as exc:
        raise WorktreeError(exc.message, hint=exc.hint) from None
    path = worktree_path(home, spec.agent_id)
    known = _worktrees(repo)
    here = known.get(os.path.realpath(path))
    if here is not None:  # made by an earlier run of this agent: use it again
        if here != branch:
            raise WorktreeError(
                f"the worktree {path} of agent {spec.agent_id!r} is on branch {here!r}, "
                f"not {branch!r}",
                hint=f"agenthost forget {spec.agent_id} removes it",
            )
        return spec.model_copy(update={"cwd": str(path), "repo": str(repo)})
    if path.exists():
        raise WorktreeError(
            f"{path} exists and is not a worktree of {repo}",
            hint=f"agenthost forget {spec.agent_id}, or move it away",
        )
    elsewhere = [p for p, b in known.items() if b == branch]
    if elsewhere:
        raise WorktreeError(f"branch {branch!r} is checked out already, in {elsewhere[0]}")
    ensure_private_dir(worktrees_dir(home))
    exists = _git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    new_branch = exists.returncode != 0
    if new_branch:
        # a fork's branch starts at its parent's branch (its head now), else at HEAD
        base = [spec.fork.branch] if spec.fork is not None and spec.fork.branch else []
        _git(repo, "worktree", "add", "-b", branch, str(path), *base)
    else:
        _git(repo, "worktree", "add", str(path), branch)
    if spec.setup:
        try:
            _setup(spec.setup, path, log_file)
        except WorktreeError:
            _git(repo, "worktree", "remove", "--force", str(path), check=False)
            if new_branch:
                _git(repo, "branch", "-D", branch, check=False)
            raise
    return spec.model_copy(update={"cwd": str(path), "repo": str(repo)})


def _setup(command: str, path: Path, log_file: Path) -> None:
    """Run the setup command in the new worktree; its output goes to the agent's log."""
    ensure_private_dir(log_file.parent)
    try:
        result = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=path,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SETUP_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise WorktreeError(f"the setup command ran over {SETUP_TIMEOUT:g}s: {command}") from None
    output = result.stdout + result.stderr
    with os.fdopen(open_log(log_file), "a", encoding="utf-8") as fh:  # ours only
        fh.write(f"worktree setup: {command}\n{output}")
        fh.write(f"worktree setup: exit status {result.returncode}\n")
    if result.returncode != 0:
        tail = output.strip()[-OUTPUT_KEPT:]
        raise WorktreeError(
            f"the setup command failed (exit status {result.returncode}): {command}"
            + (f"\n{tail}" if tail else "")
        )


def remove(spec: SpawnSpec) -> Removal | None:
    """Remove the worktree of an agent that is forgotten, unless it has uncommitted
    changes; None when the agent had none."""
    if spec.worktree is None or not spec.cwd or not spec.repo:
        return None
    path = spec.cwd
    if not Path(path).is_dir():
        _git(spec.repo, "worktree", "prune", check=False)  # removed by hand: tidy up
        return Removal(path, removed=True)
    status = _git(path, "status", "--porcelain", check=False)
    if status.returncode != 0:
        return Removal(path, removed=False, reason=f"git status failed: {status.stderr.strip()}")
    reason = keep_reason(status.stdout)
    if reason is not None:
        return Removal(path, removed=False, reason=reason)
    done = _git(spec.repo, "worktree", "remove", path, check=False)
    if done.returncode != 0:
        return Removal(path, removed=False, reason=f"git refused: {done.stderr.strip()}")
    return Removal(path, removed=True)


def forget_response(
    agent_id: str, forgotten: bool, purged: bool, removal: Removal | None
) -> ForgetResponse:
    """The ``daemon.forget`` answer, with what happened to the agent's worktree (the
    daemon's answer, or the one made without a daemon)."""
    if removal is None:
        return ForgetResponse(agent_id=agent_id, forgotten=forgotten, purged=purged)
    return ForgetResponse(
        agent_id=agent_id,
        forgotten=forgotten,
        purged=purged,
        worktree=removal.path,
        worktree_removed=removal.removed,
        worktree_kept_reason=removal.reason,
    )
