"""Approval links followed through a real gateway (``agenthost web``) against the real
pending request of a real demo host (``/ask``): the POST of a phone's notice action,
single use, the pair's other link, expiry, forgery, a GET that decides nothing, an agent
that stopped, foreign origins, and a log that never shows a link.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthost.attention.keys import link_key
from agenthost.attention.links import new_link, sign

from hosttools import HostProc, wait_for
from webtools import Gateway

HostFactory = Callable[..., HostProc]
JSON = {"Accept": "application/json"}


def ask(gateway: Gateway, agent_id: str = "a1") -> dict[str, Any]:
    """Make the demo agent ask (``/ask``); its pending request."""
    api = gateway.client()
    assert api.post(f"/api/agents/{agent_id}/send", json={"input": "/ask"}).status_code == 200
    requests = wait_for(
        lambda: api.get(f"/api/agents/{agent_id}/pending").json()["requests"], what="a request"
    )
    (request,) = requests
    return dict(request)


def token(
    home: Path,
    request: dict[str, Any],
    decision: str,
    *,
    agent_id: str = "a1",
    now: float | None = None,
    ttl: float = 600,
    key: bytes | None = None,
) -> str:
    link = new_link(
        agent_id,
        request["request_id"],
        request["created_at"],
        decision,  # type: ignore[arg-type]
        now=time.time() if now is None else now,
        ttl=ttl,
    )
    return sign(link, key if key is not None else link_key(home))


def follow(gateway: Gateway, tok: str, **headers: str) -> httpx.Response:
    """A POST as ntfy's http action sends it: no credentials, no Origin, no body."""
    return gateway.client(None).post(f"l/{tok}", headers=headers)


def permission_entries(gateway: Gateway, agent_id: str = "a1") -> list[dict[str, Any]]:
    history = gateway.client().get(f"/api/agents/{agent_id}/history").json()["entries"]
    return [e for e in history if e["role"] == "permission"]


def tool_results(gateway: Gateway, agent_id: str = "a1") -> list[str]:
    history = gateway.client().get(f"/api/agents/{agent_id}/history").json()["entries"]
    return [e["tool_result"] for e in history if e.get("tool_result") is not None]


def is_pending(gateway: Gateway, request: dict[str, Any], agent_id: str = "a1") -> bool:
    requests = gateway.client().get(f"/api/agents/{agent_id}/pending").json()["requests"]
    return any(r["request_id"] == request["request_id"] for r in requests)


def test_an_allow_link_answers_the_request_once_and_the_tool_runs(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    answer = follow(gateway, tok)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True and body["decision"] == "allow"
    assert body["request_id"] == request["request_id"] and body["tool_name"] == "Bash"
    assert body["tool_input"] == "touch demo-was-here"
    assert answer.headers["cache-control"] == "no-store"
    wait_for(lambda: "(demo) ran: touch demo-was-here" in tool_results(gateway), what="the tool")
    (entry,) = permission_entries(gateway)
    assert entry["content"] == "allowed by link"
    assert entry["decision"]["actor"] == "link" and entry["decision"]["behavior"] == "allow"
    # a replay: refused as used, and says so (a page too)
    again = follow(gateway, tok)
    assert again.status_code == 409 and again.json()["code"] == "used"
    page = gateway.client(None).get(f"l/{tok}")
    assert page.status_code == 409 and "used already" in page.text
    # re-padded or re-cased, it is the same link or no link: never a second use
    body, mac = tok.split(".")
    for variant in (f"{body}.{mac}=", f"{body}.{mac}==", f"{body}.{mac.swapcase()}"):
        assert follow(gateway, variant).json()["code"] in ("used", "forged", "malformed")
    assert len(permission_entries(gateway)) == 1


def test_a_deny_link_then_the_pairs_allow_link_says_answered(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    allow, deny = token(home, request, "allow"), token(home, request, "deny")
    denied = follow(gateway, deny, accept="text/html")
    assert denied.status_code == 200 and "denied" in denied.text
    assert denied.headers["content-type"].startswith("text/html")
    wait_for(lambda: any("Permission denied" in r for r in tool_results(gateway)), what="deny")
    for _ in range(2):  # not used by being refused: it says why each time
        late = follow(gateway, allow)
        assert late.status_code == 409, late.text
        body = late.json()
        assert body["code"] == "answered" and "denied by link" in body["error"]
        assert body["actor"] == "link" and body["behavior"] == "deny"
    page = gateway.client(None).get(f"l/{allow}")
    assert page.status_code == 409 and "denied by link" in page.text
    assert [e["content"] for e in permission_entries(gateway)] == ["denied by link"]


def test_a_request_answered_in_the_page_first_makes_the_link_say_by_whom(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    gateway.add_token("phone", "respond")
    answered = gateway.client(gateway.add_token("tablet", "respond")).post(
        "/api/agents/a1/respond", json={"request_id": request["request_id"], "decision": "deny"}
    )
    assert answered.status_code == 200, answered.text
    late = follow(gateway, tok)
    assert late.status_code == 409 and late.json()["code"] == "answered"
    assert "denied by web:tablet" in late.json()["error"]


def test_expired_and_forged_links_are_refused_and_decide_nothing(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    expired = token(home, request, "allow", now=time.time() - 7200, ttl=60)
    for answer in (follow(gateway, expired), gateway.client(None).get(f"l/{expired}")):
        assert answer.status_code == 410 and "expired" in answer.text
    assert follow(gateway, expired).json()["code"] == "expired"
    other_key = token(home, request, "allow", key=b"k" * 32)
    refused = follow(gateway, other_key)
    assert refused.status_code == 403 and refused.json()["code"] == "forged"
    # the decision flipped by re-encoding the JSON part, the signature kept
    body, mac = token(home, request, "deny").split(".")
    fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    fields["d"] = "allow"
    flipped = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    refused = follow(gateway, f"{flipped}.{mac}")
    assert refused.status_code == 403 and refused.json()["code"] == "forged"
    # a link of another agent's request: its body with this one's signature
    other = token(home, request, "allow", agent_id="a2").split(".")[0]
    assert follow(gateway, f"{other}.{mac}").json()["code"] == "forged"
    assert is_pending(gateway, request) and permission_entries(gateway) == []


def test_a_get_shows_the_request_and_decides_nothing(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "deny")
    browser = gateway.client(None)
    for _ in range(3):  # a preview, a prefetch, the person
        page = browser.get(f"l/{tok}")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "touch demo-was-here" in page.text and "a1" in page.text
        assert "<form method='post'>" in page.text and "class='deny'" in page.text
        assert page.headers["referrer-policy"] == "same-origin"
        assert "default-src 'self'" in page.headers["content-security-policy"]
    assert browser.head(f"l/{tok}").status_code == 200
    as_json = browser.get(f"l/{tok}", headers=JSON).json()
    assert as_json["pending"] is True and as_json["decision"] == "deny"
    assert is_pending(gateway, request) and permission_entries(gateway) == []


def test_a_link_to_a_stopped_or_unknown_agent_is_gone(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host = host_factory("a1")
    request = ask(gateway)
    nobody = token(home, request, "allow", agent_id="nobody")
    assert follow(gateway, nobody).status_code == 404
    assert follow(gateway, nobody).json()["code"] == "gone"
    tok = token(home, request, "allow")
    assert gateway.client().post("/api/agents/a1/stop", json={}).status_code == 200
    host.proc.wait(30)
    gone = follow(gateway, tok)
    assert gone.status_code == 404 and gone.json()["code"] == "gone"
    page = gateway.client(None).get(f"l/{tok}")
    assert page.status_code == 404 and "not running" in page.text


def test_a_link_of_an_agent_restarted_since_is_gone(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    """docs/web.md: the request died with its agent (the host cancels it), and a new
    host for the same agent (a restart) does not bring it back."""
    host = host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    with host.client() as client:
        os.kill(client.status().agent.pid, signal.SIGKILL)
        wait_for(lambda: client.status().agent.state == "error", what="the agent's death")
    assert gateway.client().post("/api/agents/a1/stop", json={}).status_code == 200
    host.proc.wait(30)
    host_factory("a1")  # the restart: the same agent, its stream goes on
    gone = follow(gateway, tok)
    assert gone.status_code == 404 and gone.json()["code"] == "gone", gone.text
    assert "withdrawn (cancelled by host: the agent exited)" in gone.json()["error"]
    assert [e["content"] for e in permission_entries(gateway)] == [
        "cancelled by host: the agent exited"
    ]
    # the restarted demo asks again under the same request id, and is answered: the old
    # link still speaks of its own request (cancelled), not of the new one's answer
    again = ask(gateway)
    assert again["request_id"] == request["request_id"]
    answer = {"request_id": again["request_id"], "decision": "allow"}
    assert gateway.client().post("/api/agents/a1/respond", json=answer).status_code == 200
    wait_for(lambda: len(permission_entries(gateway)) == 2, what="the new answer recorded")
    still = follow(gateway, tok)
    assert still.status_code == 404 and still.json()["code"] == "gone", still.text
    assert "withdrawn (cancelled by host: the agent exited)" in still.json()["error"]


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1:1"])
def test_a_foreign_origin_is_refused(
    gateway: Gateway, host_factory: HostFactory, home: Path, origin: str
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    refused = follow(gateway, tok, origin=origin)
    assert refused.status_code == 403 and refused.json()["code"] == "bad_origin"
    assert is_pending(gateway, request)
    mine = follow(gateway, tok, origin=gateway.origin)
    assert mine.status_code == 200, mine.text


def test_links_never_reach_the_log_and_survive_a_restart_as_used(
    gateway: Gateway,
    gateway_factory: Callable[..., Gateway],
    host_factory: HostFactory,
    home: Path,
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    forged = token(home, request, "allow", key=b"x" * 32)
    expired = token(home, request, "deny", now=time.time() - 7200, ttl=1)
    assert follow(gateway, forged).status_code == 403
    assert follow(gateway, expired).status_code == 410
    assert gateway.client(None).get(f"l/{tok}").status_code == 200
    assert follow(gateway, tok).status_code == 200
    elsewhere = gateway.client(None)
    for path in (f"//l/{tok}", f"/api/agents/{tok}", f"/static/{tok}"):
        assert elsewhere.get(gateway.origin + path).status_code in (401, 404)
    gateway.stop()
    log = gateway.log()
    assert "/l/..." in log
    for secret in (tok, forged, expired):
        for part in secret.split("."):
            assert part not in log
    again = gateway_factory()
    assert follow(again, tok).json()["code"] == "used"
    for secret in (tok,):
        assert secret.split(".")[1] not in again.log()


def test_the_configs_public_url_is_an_origin_of_the_gateway(
    gateway_factory: Callable[..., Gateway], home: Path
) -> None:
    (home / "config.toml").write_text('[web]\npublic_url = "https://phone.example:8443/"\n')
    gateway = gateway_factory()
    request = {"request_id": "r1", "created_at": "2026-01-01T00:00:00Z"}
    tok = token(home, request, "allow", agent_id="nobody")
    # the link page's form, posted through the proxy: our origin, and nothing to answer
    through = follow(gateway, tok, origin="https://phone.example:8443")
    assert through.status_code == 404 and through.json()["code"] == "gone"
    other = follow(gateway, tok, origin="https://phone.example:8444")
    assert other.status_code == 403 and other.json()["code"] == "bad_origin"


def test_an_unusable_config_does_not_stop_the_gateway_and_is_logged(
    gateway_factory: Callable[..., Gateway], home: Path
) -> None:
    (home / "config.toml").write_text('[web]\npublic_url = "ftp://nope"\n')
    gateway = gateway_factory()
    assert gateway.client().get("/api/me").status_code == 200
    assert "web.config_unusable" in gateway.log() and "public_url" in gateway.log()


def test_racing_posts_of_one_link_decide_once(
    gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    tok = token(home, request, "allow")
    start = threading.Barrier(6)
    codes: list[int] = []

    def post() -> None:
        with httpx.Client(timeout=30) as c:
            start.wait()
            codes.append(c.post(f"{gateway.url}l/{tok}").status_code)

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] + [409] * 5
    wait_for(lambda: "(demo) ran: touch demo-was-here" in tool_results(gateway), what="the tool")
    assert [e["content"] for e in permission_entries(gateway)] == ["allowed by link"]
