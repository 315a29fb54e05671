"""The daemon's limits with real daemons, hosts and agents: --max-agents refuses or
queues (the queue survives a daemon restart), --idle-stop stops an idle agent and a
later run of its id carries on its journal, and memory/CPU limits are refused where
this machine cannot enforce them, before anything starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.cli.common import Exit

from daemontools import DaemonWorld, daemon_world
from hosttools import PY, wait_for

# a `lines` agent that echoes its input and runs until stopped
ECHO = [PY, "-u", "-c", "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"]


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


def status_of(world: DaemonWorld, agent_id: str) -> str:
    return str(world.agents()[agent_id]["status"])


def test_max_agents_refuses_a_spawn_beyond_it_with_a_clear_error(world: DaemonWorld) -> None:
    world.start_daemon("--max-agents", "1")
    assert world.ping()["limits"] == {"max_agents": 1, "queue": False, "idle_stop": None}
    world.spawn("a1", ECHO)
    refused = world.call("daemon.spawn", {"agent_id": "a2", "agent": "lines", "command": ECHO})
    assert (refused["success"], refused["code"]) == (False, "limit_reached")
    assert refused["error"] == "the daemon runs 1 agent, its limit (--max-agents 1)"
    cli = world.cli("run", "--agent-id", "a3", "--agent", "lines", "--", *ECHO)
    assert cli.returncode == Exit.BUSY, cli
    assert "its limit (--max-agents 1)" in cli.stderr and "--queue" in cli.stderr
    assert set(world.agents()) == {"a1"}  # nothing recorded, nothing started
    assert set(world.host_pids()) == {"a1"}
    # a stopped agent frees its place
    world.request("daemon.stop", {"agent_id": "a1"})
    world.spawn("a2", ECHO)
    assert status_of(world, "a2") == "running"


def test_queue_starts_a_queued_agent_when_a_place_frees_even_after_a_restart(
    world: DaemonWorld,
) -> None:
    daemon = world.start_daemon("--max-agents", "1", "--queue")
    world.spawn("a1", ECHO)
    queued = world.spawn("a2", ECHO)
    assert queued["queued"] is True and queued["host_pid"] == 0
    cli = world.cli("run", "--agent-id", "a3", "--agent", "lines", "--json", "--", *ECHO)
    assert cli.returncode == 0, cli
    assert json.loads(cli.stdout)["queued"] is True
    agents = world.agents()
    assert [agents[a]["status"] for a in ("a1", "a2", "a3")] == ["running", "queued", "queued"]
    assert agents["a2"]["queued_at"] <= agents["a3"]["queued_at"]
    assert set(world.host_pids()) == {"a1"}
    listed = world.cli("list")
    assert "queued" in listed.stdout, listed

    # the queue is in the registry: a new daemon keeps it
    daemon.signal(9)
    daemon.wait_exit()
    world.start_daemon("--max-agents", "1", "--queue")
    assert status_of(world, "a2") == "queued"

    world.request("daemon.stop", {"agent_id": "a1"})
    wait_for(lambda: status_of(world, "a2") == "running", what="a2 started, first in line")
    assert status_of(world, "a3") == "queued"  # still one place only
    # stopping a queued agent takes it out of the queue
    world.request("daemon.stop", {"agent_id": "a3"})
    assert status_of(world, "a3") == "stopped"
    world.request("daemon.stop", {"agent_id": "a2"})
    assert status_of(world, "a3") == "stopped"  # never started
    assert set(world.host_pids()) == set()


def test_stop_and_forget_take_a_queued_agent_out_of_the_queue(world: DaemonWorld) -> None:
    # docs/daemon.md said `stop` does it; `stop` exited 3 (no host is running) and
    # `forget` 6 (stop it first): no command dequeued it
    world.start_daemon("--max-agents", "1", "--queue")
    world.spawn("a1", ECHO)
    for agent_id in ("q1", "q2", "q3"):
        assert world.spawn(agent_id, ECHO)["queued"] is True
    stopped = world.cli("stop", "q1")
    assert stopped.returncode == 0, stopped
    assert stopped.stdout == "took q1 out of the daemon's queue: it never started\n"
    assert status_of(world, "q1") == "stopped"
    as_json = json.loads(world.cli("stop", "q3", "--json").stdout)
    assert (as_json["agent_id"], as_json["previous_status"]) == ("q3", "queued")
    forgot = world.cli("forget", "q2")
    assert forgot.returncode == 0, forgot
    assert forgot.stdout == "forgot q2 (it was queued: it never started)\n"
    assert "q2" not in world.agents()
    # a place frees: nothing of the queue is left to start
    world.request("daemon.stop", {"agent_id": "a1"})
    assert {a: r["status"] for a, r in world.agents().items()} == {
        "a1": "stopped",
        "q1": "stopped",
        "q3": "stopped",
    }
    assert not world.host_pids()
    # and what the hints say of a queued agent (a verb that needs its host)
    assert world.spawn("a4", ECHO)["queued"] is False
    assert world.spawn("q4", ECHO)["queued"] is True
    sent = world.cli("send", "q4", "hello")
    assert sent.returncode == Exit.NO_HOST, sent
    assert "'q4' is queued: the daemon starts it when a place frees" in sent.stderr
    assert "`agenthost stop q4` takes it out of the queue" in sent.stderr


def test_idle_stop_stops_an_idle_agent_and_run_carries_on_its_journal(
    world: DaemonWorld,
) -> None:
    # A demo agent is idle from its start: under --idle-stop 1s a `send` after `run` races
    # the stop (a loaded machine loses it). So the agent gets its message under a daemon
    # without the limit, and the daemon that has it adopts the agent already running.
    first = world.start_daemon()
    ran = world.cli("run", "--agent-id", "d1", "--agent", "demo", "--env", "AGENTHOST_DEMO_PACE=0")
    assert ran.returncode == 0, ran
    assert world.cli("send", "d1", "hello").returncode == 0
    first.signal(9)
    first.wait_exit()
    limited = world.start_daemon("--idle-stop", "1s")
    assert world.ping()["limits"]["idle_stop"] == 1.0
    # the demo agent goes idle after its turn: a second later the daemon stops it
    wait_for(lambda: status_of(world, "d1") == "stopped", what="the idle agent stopped")
    agent = world.agents()["d1"]
    assert agent["stop_reason"] == "idle"
    offset = agent["last_offset"]
    assert "idle for 1s (--idle-stop)" in limited.log()
    # its journal is kept: export still reads it, and run of the same id goes on (under a
    # daemon without the limit again, or the new run could be idle-stopped in its turn)
    exported = world.cli("export", "d1")
    assert exported.returncode == 0 and "hello" in exported.stdout, exported
    limited.signal(9)
    limited.wait_exit()
    world.start_daemon()
    again = world.cli("run", "--agent-id", "d1", "--agent", "demo")
    assert again.returncode == 0, again
    wait_for(lambda: world.agents()["d1"]["last_offset"] > offset, what="the stream going on")
    assert world.agents()["d1"].get("stop_reason") is None


def test_a_busy_agent_is_not_idle_stopped(world: DaemonWorld) -> None:
    world.start_daemon("--idle-stop", "1s")
    world.spawn("w1", ECHO)  # a lines agent is `running` until it ends: never idle
    assert world.cli("send", "w1", "x").returncode == 0
    # a demo agent is idle from its start (no `send` to it: one could arrive after its
    # stop on a loaded machine); once it is stopped, w1 has been running longer than that
    ran = world.cli("run", "--agent-id", "d2", "--agent", "demo", "--env", "AGENTHOST_DEMO_PACE=0")
    assert ran.returncode == 0
    wait_for(lambda: status_of(world, "d2") == "stopped", what="the idle demo agent stopped")
    assert world.agents()["d2"]["stop_reason"] == "idle"
    assert status_of(world, "w1") == "running"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--memory-max", "1G"], "memory limits need each host in a systemd scope"),
        (["--cpu-max", "1.5"], "cpu limits need each host in a systemd scope"),
    ],
)
def test_resource_limits_are_refused_where_they_cannot_be_enforced(
    world: DaemonWorld, args: list[str], says: str
) -> None:
    world.start_daemon()
    result = world.cli("run", "--agent-id", "m1", "--agent", "lines", *args, "--", *ECHO)
    # the daemon refuses the spec (invalid_payload): the machine, not the command line
    assert result.returncode == Exit.PROTOCOL, result
    assert says in result.stderr
    assert "offers the controllers" in result.stderr or "no cgroup v2" in result.stderr
    assert "m1" not in world.agents() and not world.host_pids()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--memory-max", "lots"),
        ("--memory-max", "512"),
        ("--memory-max", "-1G"),
        ("--cpu-max", "0"),
        ("--cpu-max", "nan"),
        ("--cpu-max", "two"),
    ],
)
def test_garbage_resource_limits_are_usage_errors(
    world: DaemonWorld, option: str, value: str
) -> None:
    result = world.cli("run", "--agent-id", "g1", option, value)
    assert result.returncode == Exit.USAGE and option in result.stderr, result


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--max-agents", "0"),
        ("--max-agents", "x"),
        ("--idle-stop", "0"),
        ("--idle-stop", "5 parsecs"),
    ],
)
def test_garbage_daemon_limits_are_usage_errors(
    world: DaemonWorld, option: str, value: str
) -> None:
    result = world.cli("daemon", option, value)
    assert result.returncode == Exit.USAGE and option in result.stderr, result


def test_queue_without_max_agents_is_a_usage_error(world: DaemonWorld) -> None:
    # it was accepted silently: without a limit nothing is ever queued
    result = world.cli("daemon", "--queue")
    assert result.returncode == Exit.USAGE, result
    assert "--queue needs --max-agents N" in result.stderr
    assert not (world.home / "daemon.lock").exists()
