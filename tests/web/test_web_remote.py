"""``agenthost web --remote``: the agents of another machine, through a real OpenSSH
server on 127.0.0.1 (tests/sshtools.py), next to the local ones. The "remote"
machine is this one with a home of its own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from daemontools import daemon_world
from hosttools import HostProc, kill_tree, start_host, wait_for
from sshtools import Sshd
from webtools import Gateway, GatewayFactory, HostFactory, offsets, sse_events, until


@pytest.fixture
def far_home() -> Iterator[Path]:
    """The remote machine's home."""
    path = Path(tempfile.mkdtemp(prefix="ah-far-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def far_host(far_home: Path) -> Iterator[HostProc]:
    """A demo agent ``r1`` on the remote machine."""
    host = start_host(far_home, "r1")
    try:
        yield host
    finally:
        kill_tree(host.proc)


@pytest.fixture
def remote_gateway(
    sshd: Sshd, far_home: Path, gateway_factory: GatewayFactory, host_factory: HostFactory
) -> Gateway:
    host_factory("l1")
    return gateway_factory("--remote", sshd.remote, env=sshd.env(far_home))


def path(key: str, rest: str = "") -> str:
    return f"/api/agents/{quote(key, safe='')}{rest}"


@pytest.mark.usefixtures("far_host")
def test_remote_agents_are_listed_and_answer(remote_gateway: Gateway, sshd: Sshd) -> None:
    api = remote_gateway.client()
    key = f"r1@{sshd.remote}"
    items = {i["key"]: i for i in api.get("/api/agents").json()}
    assert set(items) == {"l1", key}
    assert items["l1"]["machine"] is None and items[key]["machine"] == sshd.remote
    assert items[key]["agent"]["id"] == "r1"
    status = api.get(path(key))
    assert status.status_code == 200 and status.json()["agent"]["id"] == "r1"
    sent = api.post(path(key, "/send"), json={"input": "over ssh"})
    assert sent.status_code == 200, sent.text
    with api.stream("GET", path(key, "/events")) as response:
        assert response.status_code == 200
        events = until(sse_events(response), lambda e: '"type":"result"' in e.data)
    seen = offsets(events)
    assert seen == list(range(1, len(seen) + 1)) and sent.json()["offset"] in seen
    history = api.get(path(key, "/history"), params={"limit": 3})
    assert history.status_code == 200 and len(history.json()["entries"]) == 3


@pytest.mark.usefixtures("far_host")
def test_a_remote_permission_request_is_answered(remote_gateway: Gateway, sshd: Sshd) -> None:
    api = remote_gateway.client()
    key = f"r1@{sshd.remote}"
    assert api.post(path(key, "/send"), json={"input": "/ask"}).status_code == 200
    requests = wait_for(lambda: api.get(path(key, "/pending")).json()["requests"], what="ask")
    answer = api.post(
        path(key, "/respond"), json={"request_id": requests[0]["request_id"], "decision": "allow"}
    )
    assert answer.status_code == 200 and answer.json()["behavior"] == "allow"


@pytest.mark.usefixtures("far_host")
def test_unknown_remote_agents_and_machines_are_404(remote_gateway: Gateway, sshd: Sshd) -> None:
    api = remote_gateway.client()
    for key in (f"nope@{sshd.remote}", "r1@other.example", f"r1@{sshd.remote}x"):
        answer = api.get(path(key))
        assert answer.status_code == 404, (key, answer.text)
    spawn = api.post("/api/agents", json={"agent_id": f"x@{sshd.remote}"})
    assert spawn.status_code == 400


def test_an_unreachable_machine_lists_nothing_and_its_agents_are_502(
    gateway_factory: GatewayFactory, host_factory: HostFactory, sshd: Sshd, far_home: Path
) -> None:
    host_factory("l1")
    gw = gateway_factory("--remote", "127.0.0.1:1", env=sshd.env(far_home))
    api = gw.client()
    assert [i["key"] for i in api.get("/api/agents").json()] == ["l1"]
    answer = api.get(path("r1@127.0.0.1:1"))
    assert answer.status_code == 502 and answer.json()["code"] == "host_gone"
    assert "127.0.0.1:1" in answer.json()["error"]


def test_spawn_on_a_remote_machine_through_its_daemon(
    sshd: Sshd, far_home: Path, gateway_factory: GatewayFactory
) -> None:
    with daemon_world(far_home) as world:
        world.start_daemon()
        gw = gateway_factory("--remote", sshd.remote, env=sshd.env(far_home))
        api = gw.client()
        spec = {"agent_id": "far1", "machine": sshd.remote, "agent": "demo", "task": "over ssh"}
        answer = api.post("/api/agents", json=spec)
        assert answer.status_code == 201, answer.text
        body = answer.json()
        key = f"far1@{sshd.remote}"
        assert body["key"] == key and body["machine"] == sshd.remote
        assert body["socket_path"] == str(far_home / "hosts" / "far1.sock")
        status = api.get(path(key))
        assert status.status_code == 200 and status.json()["agent"]["task"] == "over ssh"
        unknown = api.post("/api/agents", json={**spec, "machine": "other.example"})
        assert unknown.status_code == 404
        stopped = api.post(path(key, "/stop"), json={"force": True})
        assert stopped.status_code == 200
