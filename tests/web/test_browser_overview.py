"""The overview's cards (Chromium, a real gateway and demo hosts): each agent's own last
activity (the time of its newest event, which its host reports), never the daemon's
refresh; and the values of the second line with their names."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sandboxtools import require_sandbox

from browser import agenthost, log_in
from hosttools import wait_for
from webtools import Gateway

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

HostFactory = Callable[..., object]

DESCRIBE = """async (item) => {
  const { describe } = await import("/static/overview.js");
  const row = describe(item);
  return { what: row.last.what, at: row.last.at };
}"""
"""overview.js describe() of a list item, as the page computes it."""


def ms(text: str) -> int:
    """Milliseconds of an RFC 3339 time (as the page's Date.parse gives them)."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def card(page: Page, key: str) -> Any:
    return page.locator(f'.agent[data-key="{key}"]')


def describe(page: Page, item: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(DESCRIBE, item)
    return result


def test_the_last_activity_is_the_agents_own_not_the_daemons_refresh(
    page: Page, gateway: Gateway
) -> None:
    log_in(page, str(gateway.token))
    started, acted, refreshed = (
        "2026-01-01T10:00:00Z",
        "2026-01-01T10:20:00Z",
        "2026-01-01T11:00:00Z",
    )
    daemon = {"agent_id": "a1", "status": "running", "updated_at": refreshed}
    item = {"agent_id": "a1", "agent": {"id": "a1", "state": "idle", "started_at": started}}
    with_event = {**item, "agent": {**item["agent"], "last_event_at": acted}, "daemon": daemon}
    assert describe(page, with_event) == {"what": "active", "at": ms(acted)}
    # a host that does not report it (older): when it started, whatever the daemon did
    assert describe(page, {**item, "daemon": daemon}) == {"what": "started", "at": ms(started)}
    # an agent that ended says so
    ended = {**with_event["agent"], "state": "done", "ended_at": "2026-01-01T10:20:00.5Z"}
    assert describe(page, {**with_event, "agent": ended})["what"] == "ended"
    # a daemon's record of an agent no host runs: its end, else nothing made up
    gone = {"agent_id": "a2", "daemon": {**daemon, "status": "lost"}}
    assert describe(page, gone)["what"] == ""
    stopped = {**gone, "daemon": {**daemon, "status": "stopped", "ended_at": acted}}
    assert describe(page, stopped) == {"what": "ended", "at": ms(acted)}
    # garbage in the times: nothing shown, nothing thrown
    for bad in [None, 7, "yesterday", "", {"x": 1}, ["2026-01-01T10:00:00Z"]]:
        odd = {**item, "agent": {**item["agent"], "started_at": bad, "last_event_at": bad}}
        assert describe(page, odd)["what"] in ("", "started")


def test_each_card_shows_its_agents_own_last_event(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    host_factory("a2")
    log_in(page, str(gateway.token))
    api = gateway.client()

    def agent(key: str) -> dict[str, Any]:
        status: dict[str, Any] = api.get(f"/api/agents/{key}").json()["agent"]
        return status

    def last_event(key: str) -> str:
        return str(agent(key)["last_event_at"])

    # a host's first events come within the millisecond of its start (the page shows
    # "started" then): each agent answers a message, a1 first, each turn ended
    for key in ("a1", "a2"):
        agenthost(home, "send", key, "hello")
        wait_for(lambda key=key: agent(key).get("turns") == 1, what=f"{key}'s answer")
    for key in ("a1", "a2"):
        last = card(page, key).locator(".last")
        expect(last).to_have_text("active just now")
        expect(last).to_have_attribute(
            "title",
            re.compile(re.escape(last_event(key)[:19])),  # the same second
        )
    a1, a2 = (ms(last_event(key)) for key in ("a1", "a2"))
    assert a2 > a1  # a2 said more, later: each card has its own


def test_the_second_line_names_its_values(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    require_sandbox()
    host_factory("a1", "--project", "shop", "--task", "fix the cart", "--sandbox", "none")
    host_factory("a2")
    log_in(page, str(gateway.token))
    line = card(page, "a1").locator(".line2")
    expect(line.locator(".task")).to_have_text("task fix the cart")
    expect(line.locator(".backend")).to_have_text("backend demo")
    expect(line.locator(".project")).to_have_text("project shop")
    expect(line.locator(".sandbox")).to_have_text("sandbox none")
    for kind in ("task", "backend", "project", "sandbox"):
        expect(line.locator(f".{kind} .key")).to_have_text(kind)
    # an unconfined agent's card says nothing of a sandbox
    expect(card(page, "a2").locator(".line2 .backend")).to_have_text("backend demo")
    expect(card(page, "a2").locator(".line2 .sandbox")).to_have_count(0)


def test_a_forks_card_says_what_it_was_forked_from(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("f1", "--forked-from", "parent-1")
    host_factory("a2")
    log_in(page, str(gateway.token))
    forked = card(page, "f1").locator(".line2 .forked")
    expect(forked).to_have_text("forked from parent-1")
    expect(forked.locator(".key")).to_have_text("forked from")
    expect(card(page, "a2").locator(".line2 .backend")).to_have_text("backend demo")
    expect(card(page, "a2").locator(".line2 .forked")).to_have_count(0)
    # from the daemon's record alone (a host that does not say it)
    row = page.evaluate(
        """async (item) => (await import("/static/overview.js")).describe(item).forkedFrom""",
        {"agent_id": "g", "daemon": {"status": "stopped", "forked_from": "parent-2"}},
    )
    assert row == {"id": "parent-2", "offset": None}
