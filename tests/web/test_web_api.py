"""The gateway's HTTP API against real hosts: every endpoint, as docs/web.md shows it."""

from __future__ import annotations

from datetime import datetime

from agenthost.web.app import STATIC

from hosttools import wait_for
from webtools import Gateway, GatewayFactory, HostFactory, sse_events, until


def test_first_start_prints_an_admin_token_and_me_names_it(gateway: Gateway) -> None:
    assert gateway.token is not None and gateway.token.startswith("aht_")
    me = gateway.client().get("/api/me")
    assert me.status_code == 200
    assert me.json() == {
        "name": "admin",
        "scopes": ["read", "send", "respond", "control", "admin"],
    }


def test_agents_lists_the_hosts_with_key_and_machine(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("w1")
    items = gateway.client().get("/api/agents").json()
    assert [(i["agent_id"], i["key"], i["machine"]) for i in items] == [("w1", "w1", None)]
    assert items[0]["agent"]["state"] in ("starting", "idle", "running")


def test_status_history_pending_and_send_of_a_demo_agent(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("w2")
    api = gateway.client()
    status = api.get("/api/agents/w2")
    assert status.status_code == 200 and status.json()["agent"]["id"] == "w2"
    sent = api.post("/api/agents/w2/send", json={"input": "hello there"})
    assert sent.status_code == 200, sent.text
    body = sent.json()
    assert body["ok"] is True and body["duplicate"] is False and body["offset"] >= 1
    host.wait_state("idle")

    def answered() -> list[dict[str, object]]:
        entries = api.get("/api/agents/w2/history", params={"limit": 50}).json()["entries"]
        return [e for e in entries if e["role"] == "assistant" and "2 words" in str(e)]

    wait_for(answered, what="the demo's answer in the history")
    limited = api.get("/api/agents/w2/history", params={"limit": 1}).json()
    assert len(limited["entries"]) == 1
    assert api.get("/api/agents/w2/pending").json() == {"requests": []}


def test_events_stream_ids_are_offsets(gateway: Gateway, host_factory: HostFactory) -> None:
    host_factory("w3")
    api = gateway.client()
    api.post("/api/agents/w3/send", json={"input": "hi"})
    with api.stream("GET", "/api/agents/w3/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = until(sse_events(response), lambda e: '"type":"result"' in e.data)
    ids = [int(e.id) for e in events if e.id is not None]
    assert ids == list(range(1, len(ids) + 1))
    assert all(e.json()["offset"] == int(e.id) for e in events if e.id)


def test_interrupt_a_turn_and_nothing_to_interrupt_when_idle(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("w4")
    api = gateway.client()
    idle = api.post("/api/agents/w4/interrupt")
    assert idle.status_code == 200 and idle.json()["sent"] is False
    api.post("/api/agents/w4/send", json={"input": "/sleep 60"})
    host.wait_state("running")
    sent = api.post("/api/agents/w4/interrupt")
    assert sent.status_code == 200 and sent.json()["sent"] is True, sent.text
    host.wait_state("idle")


def test_respond_allow_and_deny_with_a_message(gateway: Gateway, host_factory: HostFactory) -> None:
    host_factory("w5")
    api = gateway.client()
    for decision, message in (("allow", None), ("deny", "not today")):
        api.post("/api/agents/w5/send", json={"input": "/ask"})
        pending = wait_for(
            lambda: api.get("/api/agents/w5/pending").json()["requests"], what="a request"
        )
        body = {"request_id": pending[0]["request_id"], "decision": decision}
        if message:
            body["message"] = message
        answer = api.post("/api/agents/w5/respond", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"ok": True, "request_id": body["request_id"], "behavior": decision}
        wait_for(lambda: not api.get("/api/agents/w5/pending").json()["requests"], what="none")


def test_stop_answers_once_the_agent_exited(gateway: Gateway, host_factory: HostFactory) -> None:
    host = host_factory("w6", "--linger", "0")
    answer = gateway.client().post("/api/agents/w6/stop", json={"timeout": 5, "reason": "test"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["stopped"] is True and body["final_state"] == "done"
    host.wait_exit()


def test_the_page_and_its_files_are_served(gateway: Gateway) -> None:
    anonymous = gateway.client(None)
    page = anonymous.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    scripts = [p.name for p in STATIC.glob("*.js")]
    for name in scripts:
        asset = anonymous.get(f"/static/{name}")
        assert asset.status_code == 200 and "javascript" in asset.headers["content-type"]
    assert anonymous.get("/static/nope.js").status_code == 404


def test_allow_host_adds_a_name_the_browser_may_use(gateway_factory: GatewayFactory) -> None:
    gw = gateway_factory("--allow-host", "agents.example")
    api = gw.client()
    assert api.get("/api/me", headers={"Host": "agents.example"}).status_code == 200
    assert api.get("/api/me", headers={"Host": "other.example"}).status_code == 403


def test_an_agents_last_activity_is_the_time_of_its_newest_event(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host = host_factory("w6")
    api = gateway.client()
    api.post("/api/agents/w6/send", json={"input": "hi"})
    host.wait_state("idle")
    head = api.get("/api/agents/w6/history", params={"limit": 1}).json()["offset"]
    with api.stream("GET", "/api/agents/w6/events", params={"after": head - 1}) as response:
        newest = next(sse_events(response)).json()
    assert newest["offset"] == head
    status = api.get("/api/agents/w6").json()["agent"]
    listed = next(i for i in api.get("/api/agents").json() if i["key"] == "w6")["agent"]

    def when(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    assert when(status["last_event_at"]) == when(newest["timestamp"])
    assert listed["last_event_at"] == status["last_event_at"]
