"""The whole one-tap path, every piece real: a demo agent under a real daemon asks
permission; the daemon's ntfy notice reaches an HTTP sink on 127.0.0.1 with Approve and
Deny actions; the Approve action's POST (what the ntfy app sends when the button is
tapped: no token, no cookie, no Origin) reaches a real gateway, which answers the
agent's real request. The other button then says who answered first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from notifysink import Sink, ntfy_actions, sink

from agenthost.paths import socket_path

from daemontools import DaemonWorld
from hosttools import DEADLINE, RawConn, wait_for
from webtools import Gateway, start_gateway


@pytest.fixture
def server() -> Iterator[Sink]:
    with sink() as started:
        yield started


@pytest.fixture
def gateway(home: Path) -> Iterator[Gateway]:
    gw = start_gateway(home)
    try:
        yield gw
    finally:
        gw.stop()


def permission_entries(world: DaemonWorld, agent_id: str) -> list[str]:
    with RawConn(socket_path(world.home, agent_id)) as conn:
        entries = conn.request("host.history", {"limit": 0})["payload"]["entries"]
    return [e["content"] for e in entries if e["role"] == "permission"]


def test_tapping_approve_in_the_notice_answers_the_agent(
    world: DaemonWorld, server: Sink, gateway: Gateway
) -> None:
    (world.home / "config.toml").write_text(
        f'[web]\npublic_url = "{gateway.url.rstrip("/")}"\n'
        '[notify]\ndelay = "1s"\n'
        f'[notify.channels.phone]\ntype = "ntfy"\nurl = "{server.url}/agents"\n'
    )
    world.start_daemon("--scan-interval", "0")
    world.request("daemon.spawn", {"agent_id": "tap", "agent": "demo"})
    wait_for(lambda: world.agents()["tap"]["state"] == "idle", what="tap idle")
    with RawConn(socket_path(world.home, "tap")) as conn:
        assert conn.request("host.send", {"input": "/ask"})["success"]

    (push,) = server.wait(1, "/agents")
    assert push.headers["Title"] == "tap asks to use Bash: touch demo-was-here"
    buttons = ntfy_actions(push.headers["Actions"])
    assert set(buttons) == {"Approve", "Deny"}
    assert all(url.startswith(f"{gateway.url}l/") for url in buttons.values())

    tapped = httpx.post(buttons["Approve"], timeout=DEADLINE)  # as the ntfy app does
    assert tapped.status_code == 200, tapped.text
    assert tapped.json()["decision"] == "allow" and tapped.json()["tool_name"] == "Bash"
    wait_for(lambda: world.agents()["tap"]["state"] == "idle", what="the tool ran")
    assert permission_entries(world, "tap") == ["allowed by link"]

    late = httpx.post(buttons["Deny"], timeout=DEADLINE)
    assert late.status_code == 409
    assert late.json()["code"] == "answered" and late.json()["actor"] == "link"
    again = httpx.post(buttons["Approve"], timeout=DEADLINE)
    assert again.status_code == 409 and again.json()["code"] == "used"
    assert permission_entries(world, "tap") == ["allowed by link"]  # nothing more decided
    assert len(server.of("/agents")) == 1  # one notice for the one episode
