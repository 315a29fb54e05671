"""Hostile approval links against the gateway's application in this process (httpx's
ASGI transport, a client address of our choosing): garbage tokens are refused with
their reason and count toward the address's limit; the ledger of used links holds
under racing threads and across instances; the respond API checks ``remember``.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

import httpx
import pytest

from agenthost.attention.keys import link_key
from agenthost.attention.links import new_link, sign
from agenthost.errors import ConfigError
from agenthost.web import access
from agenthost.web.agents import Agents
from agenthost.web.app import make_app
from agenthost.web.gateway import Gateway
from agenthost.web.linkledger import LinkLedger, ledger_path
from agenthost.web.tokens import TokenStore, load_secret


def make_gateway(home: Path) -> tuple[Gateway, str]:
    store = TokenStore(home)
    token = store.add("admin", ["admin"])
    gw = Gateway(
        agents=Agents(home), store=store, secret=load_secret(home), link_key=link_key(home)
    )
    return gw, token


def client(gw: Gateway, address: str = "198.51.100.7") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=make_app(gw), client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


def good(home: Path, agent_id: str = "a1", decision: str = "allow") -> str:
    link = new_link(agent_id, "req_1", "2026-01-01T00:00:00Z", decision, now=time.time(), ttl=60)  # type: ignore[arg-type]
    return sign(link, link_key(home))


def garbage(home: Path) -> list[str]:
    tok = good(home)
    body, mac = tok.split(".")
    return [
        "x",
        "%2e",  # a "." a client would not normalise away
        "%2e%2e",
        "a.b.c",
        tok + ".",
        "." + tok,
        "A" * 5000,  # over the longest token
        f"{body}.{'A' * 3000}",
        f"{body}é.{mac}",  # non-ASCII
        f"{body}.{mac[:-2]}ü",
        "日本.語",
        f"{body}==.{mac}",  # padding on the signed part changes what was signed
        f"{body}.{mac[::-1]}",
        f"{body[::-1]}.{mac}",
        f"{body}.",
        f".{mac}",
        f"{body}.{base64.urlsafe_b64encode(b'0' * 32).decode()}",
        "%00",
        "..%2f..%2fetc%2fpasswd",
    ]


@pytest.mark.asyncio
async def test_garbage_links_are_refused_with_their_reason(home: Path) -> None:
    gw, _ = make_gateway(home)
    async with client(gw, "127.0.0.1") as c:  # loopback: never limited
        for bad in garbage(home):
            for method in ("GET", "POST"):
                answer = await c.request(
                    method, f"/l/{bad}", headers={"accept": "application/json"}
                )
                assert answer.status_code == 403, (bad[:60], answer.text)
                assert answer.json()["code"] in ("malformed", "forged"), bad[:60]
                assert answer.headers["cache-control"] == "no-store"
            page = await c.get(f"/l/{bad}")
            assert page.status_code == 403 and "<h1>" in page.text
            assert "<script" not in page.text
        empty = await c.get("/l/")
        assert empty.status_code in (403, 404)


@pytest.mark.asyncio
async def test_bad_links_count_toward_the_addresss_limit(home: Path) -> None:
    gw, token = make_gateway(home)
    async with client(gw) as guesser, client(gw, "198.51.100.8") as other:
        for i in range(gw.failures.limit):
            assert (await guesser.post(f"/l/guess{i}.x")).status_code == 403
        refused = await guesser.post(f"/l/{good(home)}")
        assert refused.status_code == 429 and refused.json()["code"] == "too_many_failures"
        assert (await guesser.get(f"/l/{good(home)}")).status_code == 429
        bearer = {"Authorization": f"Bearer {token}"}
        assert (await guesser.get("/api/me", headers=bearer)).status_code == 429
        # another address is not refused: its (good) link reaches the ledger and the host
        answer = await other.post(f"/l/{good(home, agent_id='nobody')}")
        assert answer.status_code == 404 and answer.json()["code"] == "gone"


@pytest.mark.asyncio
async def test_an_expired_link_does_not_count_as_a_guess(home: Path) -> None:
    gw, _ = make_gateway(home)
    link = new_link("a1", "r", "2026-01-01T00:00:00Z", "allow", now=time.time() - 7200, ttl=60)
    tok = sign(link, link_key(home))
    async with client(gw) as c:
        for _ in range(gw.failures.limit + 2):
            answer = await c.post(f"/l/{tok}")
            assert answer.status_code == 410 and answer.json()["code"] == "expired"


@pytest.mark.asyncio
async def test_a_gateway_without_a_link_key_honours_no_link(home: Path) -> None:
    gw, _ = make_gateway(home)
    gw.link_key = None
    async with client(gw, "127.0.0.1") as c:
        answer = await c.post(f"/l/{good(home)}")
        assert answer.status_code == 403 and answer.json()["code"] == "forged"


def test_the_ledger_lets_one_of_many_racing_claims_win(home: Path) -> None:
    ledgers = [LinkLedger(ledger_path(home)) for _ in range(8)]
    won: list[bool] = []
    start = threading.Barrier(len(ledgers))

    def claim(ledger: LinkLedger) -> None:
        start.wait()
        won.append(ledger.claim("n1", int(time.time()) + 60))

    threads = [threading.Thread(target=claim, args=(ledger,)) for ledger in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 7 + [True]
    again = LinkLedger(ledger_path(home))  # a new gateway on the same home
    assert again.used("n1") and not again.claim("n1", 0)
    again.release("n1")
    assert not again.used("n1") and again.claim("n1", 0)


def test_a_spoiled_ledger_is_an_error_that_names_it(home: Path) -> None:
    path = ledger_path(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match="links.db"):
        LinkLedger(path).claim("n", 0)


@pytest.mark.asyncio
async def test_a_spoiled_ledger_refuses_links_with_500(home: Path) -> None:
    gw, _ = make_gateway(home)
    path = ledger_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"garbage" * 1000)
    async with client(gw, "127.0.0.1") as c:
        answer = await c.post(f"/l/{good(home)}")
        assert answer.status_code == 500 and answer.json()["code"] == "link_ledger"


@pytest.mark.asyncio
async def test_the_respond_api_checks_remember(home: Path) -> None:
    gw, token = make_gateway(home)
    bearer = {"Authorization": f"Bearer {token}"}
    async with client(gw, "127.0.0.1") as c:
        for body, says in (
            ({"request_id": "r", "decision": "allow", "remember": "forever"}, "must be"),
            ({"request_id": "r", "decision": "deny", "remember": "session"}, "allow"),
            ({"request_id": "r", "decision": "allow", "remember": 1}, "string"),
        ):
            answer = await c.post("/api/agents/a1/respond", json=body, headers=bearer)
            assert answer.status_code == 400 and says in answer.json()["error"], answer.text


def test_redact_cuts_links_wherever_they_are() -> None:
    tok = "eyJ2IjoxLCJhIjoiYTEifQ.ArKQkblyCXjSPRZGwFp_k2rMZEXBSBwbxp943GFGFH0"
    for path in (f"/l/{tok}", f"//l/{tok}", f"/api/agents/{tok}", f"/static/{tok}/x"):
        assert tok.split(".")[1] not in access.redact(path)
        assert tok.split(".")[0] not in access.redact(path)
    assert access.redact("/api/agents/a1/history") == "/api/agents/a1/history"
    assert access.redact("/static/app.js") == "/static/app.js"
