"""``GET /api/automation`` against a real gateway and a real daemon: the schedules as
``schedule list --json`` gives them and the newest runs of every source; without a
daemon an empty answer that says so (and no daemon started); who may ask."""

from __future__ import annotations

import json
import signal
from typing import Any

from daemontools import DaemonWorld
from hosttools import wait_for
from webtools import Gateway

FAST = {"AGENTHOST_DEMO_PACE": "0"}


def finished(world: DaemonWorld, run_id: int) -> dict[str, Any]:
    """The run once it ended (its record, from the daemon)."""

    def ended() -> dict[str, Any] | None:
        for run in world.request("daemon.runs", {"limit": 1000})["runs"]:
            if run["run_id"] == run_id and run["result"] != "running":
                return dict(run)
        return None

    return wait_for(ended, what=f"run {run_id} ended")


def test_no_daemon_answers_empty_lists_and_starts_none(gateway: Gateway) -> None:
    api = gateway.client()
    for query in ("", "?limit=-1", "?x=%00%ff&&=", "?" + "a" * 4000):
        answer = api.get("/api/automation" + query)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"schedules": [], "runs": [], "daemon": False}
    assert not (gateway.home / "daemon.sock").exists()  # a read started no daemon
    assert not (gateway.home / "daemon.db").exists()
    assert not (gateway.home / "daemon.lock").exists()


def test_a_daemon_killed_leaves_its_socket_and_the_answer_says_none_runs(
    world: DaemonWorld, gateway: Gateway
) -> None:
    daemon = world.start_daemon()
    assert gateway.client().get("/api/automation").json()["daemon"] is True
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert world.socket_path.exists()  # nobody removed it
    answer = gateway.client().get("/api/automation")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"schedules": [], "runs": [], "daemon": False}


def test_who_may_ask(gateway: Gateway) -> None:
    # read is the smallest scope (every scope includes it): no token, or one not ours
    for token in (None, "aht_not-a-token"):
        answer = gateway.client(token).get("/api/automation")
        assert answer.status_code == 401, answer.text
    reader = gateway.add_token("viewer")  # read only
    assert gateway.client(reader).get("/api/automation").status_code == 200
    assert gateway.client().post("/api/automation").status_code == 405


def test_a_schedule_and_runs_of_every_source(world: DaemonWorld, gateway: Gateway) -> None:
    world.start_daemon()
    world.request("daemon.spawn", {"agent_id": "a1", "agent": "demo", "env": FAST})
    added = world.cli(
        "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris",
        "--agent-id", "a1", "update the dependencies",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    now = world.cli("schedule", "run-now", "nightly", "--json")
    assert now.returncode == 0, now.stderr
    scheduled = finished(world, json.loads(now.stdout)["run"]["run_id"])
    delivery = {"name": "review", "key": "d-1", "target": {"agent_id": "a1"}, "message": "hi"}
    hooked = finished(world, world.request("daemon.run", delivery)["run"]["run_id"])

    body = gateway.client(gateway.add_token("viewer")).get("/api/automation?junk=%ff").json()
    listed = json.loads(world.cli("schedule", "list", "--json").stdout)["schedules"]
    assert body["daemon"] is True
    assert body["schedules"] == listed
    (schedule,) = body["schedules"]
    assert schedule["spec"]["name"] == "nightly" and schedule["spec"]["tz"] == "Europe/Paris"
    assert schedule["last"]["result"] == "done" and schedule["next_at"]
    # newest first, both sources, as the daemon records them
    assert [(r["source"], r["name"], r["result"]) for r in body["runs"]] == [
        ("hook", "review", hooked["result"]),
        ("schedule", "nightly", "done"),
    ]
    assert body["runs"][1] == scheduled
    assert all(r["agent_id"] == "a1" for r in body["runs"])
