"""Schedules and runs against real daemons, hosts and demo agents: what a run sends and
records, a new agent per run, a replayed key, overlaps, and what survives ``kill -9``
(a run going, the schedules, a due time missed while no daemon ran)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from daemontools import DaemonWorld
from hosttools import wait_for

FAKETIME_LIBS = [
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/faketime/libfaketime.so.1"),
]
FAST = {"AGENTHOST_DEMO_PACE": "0"}


def spawn_demo(world: DaemonWorld, agent_id: str) -> None:
    world.request("daemon.spawn", {"agent_id": agent_id, "agent": "demo", "env": FAST})


def runs(world: DaemonWorld, **query: Any) -> list[dict[str, Any]]:
    return list(world.request("daemon.runs", query)["runs"])


def run_of(world: DaemonWorld, run_id: int) -> dict[str, Any]:
    return next(r for r in runs(world, limit=1000) if r["run_id"] == run_id)


def ended(world: DaemonWorld, run_id: int) -> dict[str, Any]:
    return wait_for(
        lambda: (r := run_of(world, run_id))["result"] != "running" and r,
        what=f"run {run_id} ended",
    )


def journal(world: DaemonWorld, agent_id: str) -> list[dict[str, Any]]:
    out = world.cli("export", agent_id, "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_a_run_sends_to_an_agent_records_it_in_its_journal_and_a_replay_is_ignored(
    world: DaemonWorld,
) -> None:
    world.start_daemon()
    spawn_demo(world, "a1")
    delivery = {
        "source": "hook",
        "name": "review",
        "key": "delivery-1",
        "target": {"agent_id": "a1"},
        "message": "please review pull request 7",
        "detail": {"event": "pull_request"},
    }
    first = world.request("daemon.run", delivery)
    assert not first["duplicate"] and first["run"]["result"] == "running"
    run_id = first["run"]["run_id"]
    done = ended(world, run_id)
    assert done["result"] == "done" and done["agent_id"] == "a1" and done["offset"] > 0
    again = world.request("daemon.run", delivery)
    assert again["duplicate"] and again["run"]["run_id"] == run_id
    entries = journal(world, "a1")
    users = [e for e in entries if e["role"] == "user"]
    assert [u["content"] for u in users] == ["please review pull request 7"]  # once
    assert any(e["role"] == "assistant" and e["offset"] > users[0]["offset"] for e in entries)
    record = next(e for e in entries if e["role"] == "governance")
    assert record["offset"] < users[0]["offset"] == done["offset"]
    governance = record["governance"]
    assert governance["action"] == "triggered" and governance["actor"] == "hook:review"
    assert governance["run_id"] == str(run_id) and governance["event"] == "pull_request"
    assert governance["delivery"] == "delivery-1"


def test_a_run_to_an_agent_that_does_not_run_fails_and_a_redelivery_runs_again(
    world: DaemonWorld,
) -> None:
    world.start_daemon()
    delivery = {"name": "h", "key": "d-1", "target": {"agent_id": "late"}, "message": "hi"}
    answer = world.request("daemon.run", delivery)
    failed = ended(world, answer["run"]["run_id"])
    assert failed["result"] == "failed" and "not running" in failed["reason"]
    spawn_demo(world, "late")
    again = world.request("daemon.run", delivery)  # GitHub's "Redeliver": same id
    assert not again["duplicate"] and again["run"]["run_id"] != failed["run_id"]
    assert ended(world, again["run"]["run_id"])["result"] == "done"
    assert world.request("daemon.run", delivery)["duplicate"]  # it reached the agent
    keys = {r["run_id"]: r["key"] for r in runs(world, name="h")}
    assert keys == {failed["run_id"]: f"d-1#{failed['run_id']}", again["run"]["run_id"]: "d-1"}


def test_a_new_agent_per_run_is_stopped_once_it_answered_and_keeps_its_journal(
    world: DaemonWorld,
) -> None:
    world.start_daemon()
    added = world.cli(
        "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris",
        "--new", "--agent-id", "deps", "--agent", "demo", "--env", "DEPLOY_TOKEN=s3cret",
        "--budget-usd", "3", "--json", "update the dependencies",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    info = json.loads(added.stdout)
    assert info["spec"]["target"]["new"]["env"] == {"DEPLOY_TOKEN": "<redacted>"}
    assert info["next_at"].endswith(("T02:00:00Z", "T01:00:00Z"))  # 03:00 in Paris
    now = world.cli("schedule", "run-now", "nightly", "--json")
    assert now.returncode == 0, now.stderr
    run = json.loads(now.stdout)["run"]
    agent_id = run["agent_id"]
    assert agent_id.startswith("deps-") and run["detail"]["new"] == "1"
    done = ended(world, run["run_id"])
    assert done["result"] == "done"
    wait_for(lambda: world.agents()[agent_id]["status"] == "stopped", what="its agent stopped")
    assert world.agents()[agent_id]["spec"]["budget_usd"] == 3
    entries = journal(world, agent_id)
    asked = next(e for e in entries if e.get("content") == "update the dependencies")
    # stopped once it had answered, not before
    assert any(e["role"] == "assistant" and e["offset"] > asked["offset"] for e in entries)
    listed = json.loads(world.cli("schedule", "list", "--json").stdout)["schedules"]
    assert [(s["spec"]["name"], s["last"]["result"], s["running"]) for s in listed] == [
        ("nightly", "done", False)
    ]


def test_a_schedule_never_overlaps_its_running_run(world: DaemonWorld) -> None:
    world.start_daemon()
    spawn_demo(world, "slow")
    add = world.cli(
        "schedule", "add", "s1", "--cron", "*/5 * * * *", "--agent-id", "slow", "/sleep 30"
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    first = world.cli("schedule", "run-now", "s1", "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run"]["run_id"]
    wait_for(lambda: run_of(world, run_id)["offset"] is not None, what="the message sent")
    second = world.cli("schedule", "run-now", "s1", "--json")
    assert second.returncode == 6  # busy
    assert "has a run going" in json.loads(second.stdout)["error"]
    world.cli("interrupt", "slow")
    assert ended(world, run_id)["result"] in ("done", "failed")
    third = world.cli("schedule", "run-now", "s1", "--json")
    assert third.returncode == 0, third.stderr  # the run ended: the next may start
    unknown = world.cli("schedule", "rm", "s2")
    assert unknown.returncode == 9 and "no schedule 's2'" in unknown.stderr


def test_schedules_and_a_run_going_survive_kill_9(world: DaemonWorld) -> None:
    daemon = world.start_daemon()
    spawn_demo(world, "k1")
    add = world.cli(
        "schedule", "add", "keep", "--cron", "0 3 * * *", "--agent-id", "k1", "/sleep 3"
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    before = world.registry("SELECT name, next_at, spec FROM schedules")
    run_id = json.loads(world.cli("schedule", "run-now", "keep", "--json").stdout)["run"]["run_id"]
    wait_for(lambda: run_of(world, run_id)["offset"] is not None, what="the message sent")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert world.registry("SELECT result FROM runs WHERE run_id = ?", run_id) == [("running",)]
    world.start_daemon()
    assert world.registry("SELECT name, next_at, spec FROM schedules") == before
    done = ended(world, run_id)  # taken up by the new daemon, ended by the agent's idle
    assert done["result"] == "done"
    assert [s["spec"]["name"] for s in world.request("daemon.schedule.list")["schedules"]] == [
        "keep"
    ]


@pytest.mark.parametrize("missed", ["run", "skip"])
def test_a_due_time_missed_while_no_daemon_ran_runs_once_or_is_skipped(
    world: DaemonWorld, missed: str
) -> None:
    """The daemon is killed before the schedule's next minute and started again with its
    wall clock ten minutes on (libfaketime): the due times it slept through are one
    missed run, started once under ``--missed run``, recorded as skipped under
    ``--missed skip``; either way the next due time is after the new now."""
    lib = next((p for p in FAKETIME_LIBS if p.exists()), None)
    if lib is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    daemon = world.start_daemon()
    spawn_demo(world, "m1")
    add = world.cli(
        "schedule", "add", "often", "--cron", "* * * * *", "--missed", missed,
        "--agent-id", "m1", "tick",
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert world.registry("SELECT count(*) FROM runs") == [(0,)]
    (next_at,) = world.registry("SELECT next_at FROM schedules")[0]
    world.env.update(
        {"LD_PRELOAD": str(lib), "FAKETIME": "+10m", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    )
    world.start_daemon()
    made = wait_for(lambda: runs(world, source="schedule"), what="the missed run recorded")
    assert len(made) == 1
    run = made[0]
    assert int(run["detail"]["missed"]) >= 9
    if missed == "skip":
        assert run["result"] == "skipped" and "--missed skip" in run["reason"]
        users = [e for e in journal(world, "m1") if e["role"] == "user"]
        assert users == []
    else:
        assert run["detail"]["reason"].endswith("run once (--missed run)")
        assert ended(world, run["run_id"])["result"] == "done"
        users = [e for e in journal(world, "m1") if e["role"] == "user"]
        assert [u["content"] for u in users] == ["tick"]
    (later,) = world.registry("SELECT next_at FROM schedules")[0]
    assert later >= next_at + 9 * 60


@pytest.mark.parametrize(
    ("mtype", "payload", "why"),
    [
        ("daemon.run", {"name": "h", "target": {}, "message": "m"}, "one of them"),
        ("daemon.run", {"name": "../h", "target": {"agent_id": "a"}, "message": "m"}, "name"),
        ("daemon.run", {"name": "h", "target": {"agent_id": "a"}, "message": ""}, "message"),
        ("daemon.run", {"name": "h", "target": {"agent_id": "a"}, "message": 7}, "message"),
        ("daemon.run", "garbage", "payload"),
        (
            "daemon.schedule.add",
            {"name": "s", "cron": "at dawn", "target": {"agent_id": "a"}, "message": "m"},
            "five fields",
        ),
        (
            "daemon.schedule.add",
            {
                "name": "s",
                "cron": "0 3 * * *",
                "tz": "Nowhere/Land",
                "target": {"agent_id": "a"},
                "message": "m",
            },
            "unknown time zone",
        ),  # fmt: skip
        ("daemon.schedule.rm", {"name": "absent"}, "no schedule"),
        ("daemon.schedule.run", {"name": "absent"}, "no schedule"),
        ("daemon.runs", {"limit": 0}, "limit"),
    ],
)
def test_garbage_requests_are_refused_with_the_reason(
    world: DaemonWorld, mtype: str, payload: Any, why: str
) -> None:
    world.start_daemon()
    answer = world.call(mtype, payload)
    assert answer["success"] is False
    assert why in answer["error"]
    assert world.ping()["agents"] == 0  # and the daemon serves on


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--cron", "0 3 * *", "--agent-id", "a", "m"], "five fields"),
        (["--cron", "0 3 * * *", "--tz", "Atlantis/Capital", "--agent-id", "a", "m"], "zone"),
        (["--cron", "0 3 * * *", "--agent-id", "a", "--cwd", "/", "m"], "goes with --new"),
        (["--cron", "0 3 * * *", "--agent-id", "a", "--budget-usd", "2", "m"], "goes with --new"),
        (["--cron", "0 3 * * *", "--agent-id", "../a", "m"], "agent"),
        (["--cron", "0 3 * * *", "--new", "--agent-id", "t", "--agent", "pty", "m"], "terminal"),
        (["--cron", "0 3 * * *", "--agent-id", "a", ""], "message"),
        (["--cron", "0 3 * * *", "--missed", "maybe", "--agent-id", "a", "m"], "missed"),
        (["--cron", "0 3 * * *", "m"], "--agent-id"),
    ],
)
def test_schedule_add_refuses_garbage_before_anything_starts(
    world: DaemonWorld, args: list[str], why: str
) -> None:
    out = world.cli("schedule", "add", "s", *args)
    assert out.returncode == 2, out.stderr
    assert why in out.stderr
    assert not world.socket_path.exists()  # no daemon was started for it
