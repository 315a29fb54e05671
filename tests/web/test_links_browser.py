"""Approval links and the page's answers in a real browser (Chromium through
Playwright) against a real gateway and real demo hosts: a link's page opened and its
button tapped (the form's POST carries the page's own Origin), "Allow for session" in
the conversation, and the decision lines the history records.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agenthost.attention.keys import link_key
from agenthost.attention.links import new_link, sign

from browser import new_page, start_and_open
from hosttools import HostProc, wait_for
from webtools import Gateway

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

HostFactory = Callable[..., HostProc]


def pending(gateway: Gateway, agent_id: str = "a1") -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = (
        gateway.client().get(f"/api/agents/{agent_id}/pending").json()["requests"]
    )
    return requests


def ask(gateway: Gateway, agent_id: str = "a1") -> dict[str, Any]:
    api = gateway.client()
    assert api.post(f"/api/agents/{agent_id}/send", json={"input": "/ask"}).status_code == 200
    (request,) = wait_for(lambda: pending(gateway, agent_id), what="a request")
    return request


def link_url(gateway: Gateway, home: Path, request: dict[str, Any], decision: str) -> str:
    link = new_link(
        "a1",
        request["request_id"],
        request["created_at"],
        decision,
        now=time.time(),
        ttl=600,  # type: ignore[arg-type]
    )
    return f"{gateway.url}l/{sign(link, link_key(home))}"


def permission_entries(gateway: Gateway) -> list[dict[str, Any]]:
    entries = gateway.client().get("/api/agents/a1/history").json()["entries"]
    return [e for e in entries if e["role"] == "permission"]


def test_a_links_page_tapped_answers_the_request(
    browser: Browser, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    url = link_url(gateway, home, request, "allow")
    errors: list[str] = []
    phone = new_page(browser, gateway, errors=errors)  # no login: the link is enough
    try:
        phone.goto(url)
        expect(phone.locator("h1")).to_contain_text("Allow")
        expect(phone.locator("code")).to_have_text("touch demo-was-here")
        expect(phone.locator("#decision")).to_have_text("allow")
        assert pending(gateway) == [request]  # opening the page decided nothing
        phone.locator("button.allow").click()
        expect(phone.locator("#outcome")).to_have_text("Allowed")
        wait_for(lambda: permission_entries(gateway), what="the decision")
        (entry,) = permission_entries(gateway)
        assert entry["content"] == "allowed by link" and entry["decision"]["actor"] == "link"
        phone.goto(url)  # again: used
        expect(phone.locator("#why")).to_have_attribute("data-why", "used")
        phone.go_back()
        phone.reload()  # the browser posts the form again: refused, says why
        expect(phone.locator("#why")).to_have_attribute("data-why", re.compile("used"))
        assert not errors, errors
    finally:
        phone.context.close()
    assert len(permission_entries(gateway)) == 1


def test_the_pairs_other_link_says_who_answered(
    browser: Browser, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    request = ask(gateway)
    allow, deny = (link_url(gateway, home, request, d) for d in ("allow", "deny"))
    phone = new_page(browser, gateway)
    try:
        phone.goto(deny)
        phone.locator("button.deny").click()
        expect(phone.locator("#outcome")).to_have_text("Denied")
        phone.goto(allow)
        expect(phone.locator("#why")).to_have_attribute("data-why", "answered")
        expect(phone.locator("#why")).to_contain_text("denied by link")
    finally:
        phone.context.close()


def test_allow_for_session_and_the_decision_lines(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    start_and_open(page, gateway, host_factory)
    # a link followed elsewhere while the page is open: its line comes with the events
    page.locator("#input").fill("/ask")
    page.locator("#input").press("Enter")
    expect(page.locator(".entry.permission:not(.answered)")).to_have_count(1)
    (request,) = pending(gateway)
    answer = gateway.client(None).post(link_url(gateway, home, request, "deny"))
    assert answer.status_code == 200, answer.text
    expect(page.locator(".entry.permission").last.locator(".outcome")).to_have_text("denied")
    line = page.locator(".entry.decision-line").last
    expect(line).to_have_text(re.compile(r"^Bash: denied by link"))
    expect(line).to_have_class(re.compile(r"\bdecision-deny\b"))
    assert line.get_attribute("data-actor") == "link"
    expect(page.locator("#agent-state")).to_have_text("idle")
    # then "Allow for session" in the page
    page.locator("#input").fill("/ask")
    page.locator("#input").press("Enter")
    card = page.locator(".entry.permission").last
    expect(card.locator("button")).to_have_text(["Allow", "Allow for session", "Deny"])
    card.locator("button.allow-session").click()
    expect(card.locator(".outcome")).to_have_text("allowed")
    line = page.locator(".entry.decision-line").last
    expect(line).to_have_text(
        re.compile(r"^Bash: allowed by web:admin \(and for the rest of the session\)")
    )
    assert line.get_attribute("data-actor") == "web:admin"
    expect(page.locator(".entry.decision-line")).to_have_count(2)
    last = permission_entries(gateway)[-1]
    assert last["decision"]["remember"] == "session"
    assert last["decision"]["actor"] == "web:admin"
    expect(page.locator(".entry.tool-result").last).to_contain_text("(demo) ran:")
