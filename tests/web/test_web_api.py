"""The gateway's HTTP API against real hosts: every endpoint, as docs/web.md shows it."""

from __future__ import annotations

from webtools import Gateway, HostFactory, sse_events, until

from hosttools import wait_for


def test_first_start_prints_an_admin_token_and_me_names_it(gateway: Gateway) -> None:
    assert gateway.token is not None and gateway.token.startswith("aht_")
    me = gateway.client().get("/api/me")
    assert me.status_code == 200
    assert me.json() == {"name": "admin", "scopes": ["read", "send", "respond", "admin"]}


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
