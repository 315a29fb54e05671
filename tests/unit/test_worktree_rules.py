"""Worktrees, the sans-IO part: branch names, where a worktree lives, when forget keeps
it, and the branch column of `agenthost list`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agenthost.cli.listing import table_rows
from agenthost.daemon.protocol import DaemonAgent, SpawnSpec
from agenthost.daemon.worktrees import branch_for, check_branch, keep_reason, worktree_path
from agenthost.errors import ConfigError


def test_the_default_branch_is_named_after_the_agent() -> None:
    assert branch_for("fix-42", "") == "agenthost/fix-42"
    assert branch_for("fix-42", "feature/x") == "feature/x"


@pytest.mark.parametrize("name", ["main", "feature/x-1", "agenthost/fix-42", "a.b", "v1.2/c_d"])
def test_good_branch_names(name: str) -> None:
    assert check_branch(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "..",
        "a..b",
        "a b",
        "-x",
        "a.lock",
        "a/b.lock/c",
        "x@{1}",
        "a\x00b",
        "a\tb",
        "tilde~1",
        "caret^",
        "colon:",
        "q?",
        "star*",
        "br[acket",
        "back\\slash",
        "/lead",
        "trail/",
        "trail.",
        "a//b",
        "a/.hidden",
        "@",
        "é" * 300,
    ],
)
def test_garbage_branch_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ConfigError, match="is not a usable branch name"):
        check_branch(name)


def test_worktrees_live_in_the_home() -> None:
    assert worktree_path(Path("/h"), "a1") == Path("/h/worktrees/a1")


def test_a_clean_worktree_is_removed_a_changed_one_kept() -> None:
    assert keep_reason("") is None
    assert keep_reason("\n  \n") is None
    assert keep_reason(" M src/x.py\n") == "it has uncommitted changes (1 file)"
    assert keep_reason("?? new.txt\nA  b\n") == "it has uncommitted changes (2 files)"


def _record(agent_id: str, worktree: str | None) -> DaemonAgent:
    now = datetime.now(UTC)
    spec = SpawnSpec(agent_id=agent_id, worktree=worktree, repo="/r" if worktree else None)
    branch = None if worktree is None else branch_for(agent_id, worktree)
    return DaemonAgent(
        agent_id=agent_id,
        status="stopped",
        branch=branch,
        created_at=now,
        updated_at=now,
        spec=spec,
    )


def test_list_shows_a_branch_column_only_when_an_agent_has_a_worktree() -> None:
    headers, rows = table_rows([], {"a": _record("a", None)})
    assert "branch" not in headers
    headers, rows = table_rows([], {"a": _record("a", None), "b": _record("b", "")})
    assert headers[-1] == "branch"
    assert [row[-1] for row in rows] == ["", "agenthost/b"]
