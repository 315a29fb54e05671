"""``POST /api/agents``: an agent spawned through the daemon, as ``agenthost run`` does,
the daemon started when none runs. The gateway runs under the tests' subreaper, so
the daemon it starts (and the hosts) end with the test."""

from __future__ import annotations

from pathlib import Path

import httpx

from daemontools import DaemonWorld
from webtools import gateway_of


def test_spawn_starts_the_daemon_and_the_agent_answers(world: DaemonWorld, tmp_path: Path) -> None:
    with gateway_of(world) as (url, token, _log):
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as api:
            spec = {"agent_id": "sp1", "cwd": str(tmp_path), "project": "web",
                    "task": "spawned over HTTP", "restart": "on-failure"}  # fmt: skip
            answer = api.post("/api/agents", json=spec)
            assert answer.status_code == 201, answer.text
            body = answer.json()
            assert body["ok"] is True and body["agent_id"] == "sp1"
            assert body["daemon_started"] > 0 and body["host_pid"] > 0
            status = api.get("/api/agents/sp1").json()
            assert status["agent"]["project"] == "web" and status["agent"]["task"]
            listed = {i["key"]: i for i in api.get("/api/agents").json()}
            assert listed["sp1"]["daemon"]["agent_id"] == "sp1"
            again = api.post("/api/agents", json={"agent_id": "sp1"})  # it runs already
            assert again.status_code == 409, again.text
            second = api.post("/api/agents", json={"agent_id": "sp2", "agent": "demo"})
            assert second.status_code == 201 and "daemon_started" not in second.json()
