"""``agenthost fork`` with a real daemon, real git and a stand-in for the ``claude`` CLI
(tests/fixtures/fake_claude.py: the demo agent speaking stream-json): refusals with
their reasons and exit statuses, garbage arguments, the parent's spec carried over
(its environment's values too, which ``daemon.list`` hides), ``--at`` read from the
parent's journal, a fork of a host started with ``serve``, and a fork's worktree
branched from its parent's branch."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemontools import DaemonWorld, agent_status, daemon_world, use_fake_claude
from hosttools import RawConn, wait_for


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        use_fake_claude(started)
        started.start_daemon("--scan-interval", "0")
        yield started


def sock(world: DaemonWorld, agent_id: str) -> Path:
    return world.home / "hosts" / f"{agent_id}.sock"


def spawn(world: DaemonWorld, agent_id: str, agent: str = "claude", **spec: Any) -> None:
    payload = {
        "agent_id": agent_id,
        "agent": agent,
        "cwd": str(world.home),
        "command": ["--model", "m1"] if agent == "claude" else ["--pace", "0"],
        "env": {"SECRET_TOKEN": "s3"},
        **spec,
    }
    world.request("daemon.spawn", payload)
    wait_for(lambda: agent_status(world, agent_id).get("state") == "idle", what="idle")


def turn(world: DaemonWorld, agent_id: str, message: str) -> dict[str, Any]:
    with RawConn(sock(world, agent_id), timeout=30) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        return conn.read_until(lambda f: f.get("type") == "result")


def fork(world: DaemonWorld, *args: str) -> tuple[int, dict[str, Any]]:
    done = world.cli("fork", *args, "--json", "--home", str(world.home), timeout=60)
    body: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, body


def test_a_demo_agent_is_refused_with_the_reason(world: DaemonWorld) -> None:
    spawn(world, "d1", "demo")
    code, body = fork(world, "d1", "d2")
    assert code == 2
    assert body["ok"] is False and body["reason"] == "usage"
    assert "cannot be forked: the demo agent keeps no session" in body["error"]
    assert "d2" not in world.agents()
    plain = world.cli("fork", "d1", "d2", "--home", str(world.home))
    assert plain.returncode == 2 and "cannot be forked" in plain.stderr


def test_an_agent_with_no_session_yet_is_refused(world: DaemonWorld) -> None:
    spawn(world, "c0")
    code, body = fork(world, "c0", "c1")
    assert code == 2 and "no session yet" in body["error"]


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("p", "f", "--at", "abc"), 2, "'abc' is not a valid integer"),
        (("p", "f", "--at", "-1"), 2, "offsets start at 1"),
        (("p", "f", "--at", "0"), 2, "offsets start at 1"),
        (("p", "f", "--at", str(10**12)), 2, "beyond the agent's journal"),
        (("p", "f", "--at", "1"), 2, "no assistant message at or before"),
        (("nobody", "f"), 3, "no agent 'nobody'"),
        (("p", "p"), 2, "another id"),
        (("p", "../x"), 2, "agent id"),
        (("p", "p2"), 6, "exists already"),
        (("p", "f", "--worktree", "x"), 2, "runs in no worktree"),
        (("p", "f", "--worktree", "bad..name"), 2, "not a usable branch name"),
    ],
)
def test_garbage_is_refused(
    world: DaemonWorld, args: tuple[str, ...], code: int, said: str
) -> None:
    spawn(world, "p")
    turn(world, "p", "hello")
    if "p2" in args:
        spawn(world, "p2")
    done = world.cli("fork", *args, "--home", str(world.home))
    assert done.returncode == code, done
    assert said in done.stdout + done.stderr
    assert "f" not in world.agents()


def test_a_fork_carries_the_parents_spec_and_its_point(world: DaemonWorld) -> None:
    spawn(world, "p", budget_usd=3.5, restart={"policy": "on-failure", "backoff": 0.1})
    first = turn(world, "p", "hello")
    session = first["result"]["session_id"]
    turn(world, "p", "again")
    code, body = fork(world, "p", "f", "--at", str(first["offset"]))
    assert code == 0, body
    with RawConn(sock(world, "p")) as conn:
        conn.request("host.attach", {"offset": 0})
        events = conn.events(first["offset"])
    answers = [json.loads(e["data"]) for e in events if e["type"] == "output"]
    uuids = [a["uuid"] for a in answers if a.get("type") == "assistant"]
    assert body["fork"]["point"] == uuids[-1]  # the first turn's last answer
    wait_for(lambda: agent_status(world, "f").get("state") == "idle", what="the fork idle")
    command = agent_status(world, "f")["command"]
    i = command.index("--resume")
    assert command[i : i + 5] == [
        "--resume",
        session,
        "--fork-session",
        "--resume-session-at",
        uuids[-1],
    ]
    spec = json.loads(world.registry("SELECT spec FROM agents WHERE agent_id = 'f'")[0][0])
    assert spec["env"] == {"SECRET_TOKEN": "s3"}  # the value, not the redacted one
    assert spec["budget_usd"] == 3.5 and spec["restart"]["policy"] == "on-failure"
    assert world.agents()["f"]["forked_from"] == "p"
    listed = json.loads(world.cli("list", "--json", "--home", str(world.home)).stdout)
    assert {i["agent_id"]: i.get("daemon", {}).get("forked_from") for i in listed}["f"] == "p"
    status = json.loads(world.cli("status", "f", "--json", "--home", str(world.home)).stdout)
    assert status["agent"]["forked_from"] == "p"


def test_a_fork_asking_for_more_than_its_parent_is_refused(world: DaemonWorld) -> None:
    spawn(world, "p", budget_usd=1.0)
    session = turn(world, "p", "hello")["result"]["session_id"]
    more = {
        "agent_id": "f",
        "agent": "claude",
        "cwd": str(world.home),
        "env": {"SECRET_TOKEN": "<redacted>"},
        "budget_usd": 100.0,
        "fork": {"from_agent": "p", "session_id": session},
    }
    with world.conn() as conn:
        answer = conn.request("daemon.spawn", more)
    assert answer["success"] is False
    assert "at most its parent's budget_usd" in answer["error"]
    assert "f" not in world.agents()


def test_a_host_started_with_serve_is_forked_from_what_it_reports(world: DaemonWorld) -> None:
    status, out = world.cli_bg(
        "serve",
        "--agent-id",
        "s1",
        "--agent",
        "claude",
        "--cwd",
        str(world.home),
        "--home",
        str(world.home),
        "--detach",
        "--",
        "--model",
        "m1",
    )
    assert status == 0, out
    wait_for(lambda: agent_status(world, "s1").get("state") == "idle", what="idle")
    session = turn(world, "s1", "hello")["result"]["session_id"]
    code, body = fork(world, "s1", "sf")
    assert code == 0, body
    wait_for(lambda: agent_status(world, "sf").get("state") == "idle", what="the fork idle")
    info = agent_status(world, "sf")
    assert info["worktree"] == str(world.home) and info["forked_from"] == "s1"
    assert session in info["command"] and "--fork-session" in info["command"]
    with RawConn(sock(world, "s1")) as conn:
        conn.request("host.stop", {"force": True})


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_forks_worktree_branches_from_its_parents_branch(world: DaemonWorld) -> None:
    repo = world.home / "repo"
    repo.mkdir()
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.invalid"),
        ("config", "user.name", "t"),
        ("commit", "-q", "--allow-empty", "-m", "first"),
    ):
        git(repo, *args)
    spawn(world, "p", worktree="", repo=str(repo))
    parent_tree = world.home / "worktrees" / "p"
    (parent_tree / "work.txt").write_text("the parent's work\n")
    git(parent_tree, "add", "work.txt")
    git(parent_tree, "commit", "-q", "-m", "parent's commit")
    head = git(parent_tree, "rev-parse", "HEAD").strip()
    assert head != git(repo, "rev-parse", "main").strip()
    turn(world, "p", "hello")
    code, body = fork(world, "p", "f")
    assert code == 0, body
    tree = world.home / "worktrees" / "f"
    assert git(tree, "branch", "--show-current").strip() == "agenthost/f"
    assert git(tree, "rev-parse", "HEAD").strip() == head  # from the parent's branch
    assert (tree / "work.txt").read_text() == "the parent's work\n"
    assert world.agents()["f"]["branch"] == "agenthost/f"
    code, body = fork(world, "p", "g", "--worktree", "try/two")
    assert code == 0, body
    assert git(world.home / "worktrees" / "g", "branch", "--show-current").strip() == "try/two"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout
