"""How the page says a turn ended, in the words the terminal and docs/agents.md use
(`turn done`, `turn interrupted`, `turn failed: <the error text>`), live and from the
history; and what an agent page says before any message (Chromium, real demo hosts)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from test_browser_garbage import MARKUP, chat, event, fulfil, sse

from browser import agenthost, log_in, open_agent, start_and_open
from webtools import Gateway

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

HostFactory = Callable[..., object]

ERROR_TEXT = "API Error: 500 demo failure"
"""What the demo agent's /error turn fails with (agenthost/agents/demo_agent.py)."""


def send(page: Page, text: str) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")


def turn_lines(page: Page) -> list[str]:
    """The text of every turn-end line shown, in order."""
    return [t.strip() for t in page.locator("#log .entry.result").all_inner_texts()]


def expect_turn_endings(page: Page) -> None:
    """The three turns of :func:`three_turns`, each ended once, in its words."""
    expect(page.locator("#log .entry.result")).to_have_count(3)
    lines = turn_lines(page)
    assert [line.split("\n")[0] for line in lines] == [
        "turn interrupted",
        f"turn failed: {ERROR_TEXT}",
        "turn done",
    ], lines
    log = page.locator("#log").inner_text()
    assert log.count(ERROR_TEXT) == 1, log  # the error text once
    assert "(success)" not in log and "error_during_execution" not in log, log
    assert "interrupted" not in log.replace("turn interrupted", ""), log
    assert log.count("turn interrupted") == 1, log
    assert "failed" not in page.locator("#log .entry.result.interrupted").inner_text()


def three_turns(page: Page) -> None:
    """An interrupted turn, a failed one, a good one."""
    send(page, "/sleep 600")
    expect(page.locator("#agent-state")).to_have_text("running")
    page.locator("#interrupt").click()
    expect(page.locator("#agent-state")).to_have_text("idle")
    expect(page.locator("#log .entry.result")).to_have_count(1)
    send(page, "/error")
    expect(page.locator("#log .entry.result")).to_have_count(2)
    send(page, "all good")
    expect(page.locator("#log .entry.result")).to_have_count(3)


def test_turn_endings_are_said_once_in_the_shared_words(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    three_turns(page)
    expect_turn_endings(page)
    expect(page.locator("#log .entry.result.interrupted")).to_have_count(1)
    expect(page.locator("#log .entry.result.failed")).to_have_count(1)
    # the same from the stream's replay
    page.reload()
    expect(page.locator("#agent-state")).to_have_text("idle")
    expect_turn_endings(page)


def test_turn_endings_from_the_history_say_the_same(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    three_turns(page)
    send(page, "/flood 300")  # ~600 events: the turns above are out of the stream's tail
    expect(page.locator(".entry.role-assistant .text").last).to_have_text("flood 300/300")
    page.reload()
    expect(page.locator(".entry.role-assistant .text").last).to_have_text("flood 300/300")
    expect(page.locator("#log .entry.result")).to_have_count(1)
    page.locator("#earlier").click()
    expect(page.locator("#earlier")).to_be_hidden()
    # the history has the interrupted and the failed turn's entries, not the results
    lines = turn_lines(page)
    assert [line.split("\n")[0] for line in lines] == [
        "turn interrupted",
        f"turn failed: {ERROR_TEXT}",
        "turn done",  # the flood's (in the stream's tail)
    ], lines
    assert page.locator("#log").inner_text().count(ERROR_TEXT) == 1


def test_an_empty_agent_page_says_how_to_start(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    empty = page.locator("#no-messages")
    expect(empty).to_be_visible()
    expect(empty).to_have_text(re.compile(r"^No messages yet: write to the agent below"))
    expect(page.locator("#earlier")).to_be_hidden()
    send(page, "hello")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("That is 1 word")
    expect(empty).to_be_hidden()
    page.reload()
    expect(page.locator(".entry.role-assistant").last).to_contain_text("That is 1 word")
    expect(empty).to_be_hidden()


def test_earlier_messages_are_offered_only_when_there_are_some(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "hello")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("That is 1 word")
    # all of the agent's history is on the page: nothing earlier to offer
    expect(page.locator("#earlier")).to_be_hidden()
    page.reload()
    expect(page.locator(".entry.role-assistant").last).to_contain_text("That is 1 word")
    expect(page.locator("#earlier")).to_be_hidden()
    # (when the stream's tail leaves some out, it is offered: test_browser.py
    # test_earlier_messages_come_from_the_history)


def test_an_empty_page_for_a_read_only_token_says_it_cannot_send(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("a1")
    log_in(page, gateway.add_token("viewer", "read"))
    open_agent(page, "a1")
    expect(page.locator("#no-messages")).to_have_text(
        re.compile(r"^No messages yet\. This token may only read")
    )


def test_a_message_from_elsewhere_ends_the_empty_page(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    start_and_open(page, gateway, host_factory)
    expect(page.locator("#no-messages")).to_be_visible()
    agenthost(home, "send", "a1", "from the terminal")
    expect(page.locator(".entry.role-user").last).to_contain_text("from the terminal")
    expect(page.locator("#no-messages")).to_be_hidden()


def test_garbage_turn_endings_show_what_makes_sense_once(page: Page, gateway: Gateway) -> None:
    log_in(page, str(gateway.token))
    body = sse(
        chat(1, role="user", content="one"),
        event(2, "result", result={"is_error": "maybe", "interrupted": "yes", "subtype": 5}),
        chat(3, role="user", content="two"),
        event(4, "error", error=MARKUP),
        chat(5, role="assistant", is_error=True, content=MARKUP),
        event(6, "result", result={"is_error": True, "subtype": "success"}),
        chat(7, role="user", content="three"),
        event(8, "result", result={"is_error": True, "terminal_reason": ["aborted"]}),
        chat(9, role="user", content="four"),
        event(10, "result", result={"is_error": True, "terminal_reason": "aborted_tools"}),
        chat(11, role="user", content="five"),
        chat(12, role="assistant", interrupted="true", content="a string is not a mark"),
        chat(13, role="assistant", is_error=True, content={"an": "object"}),
        event(14, "error", error="a host error, not the turn's"),
        event(15, "result", result={"is_error": True}),
    )
    agent = "**/api/agents/odd"
    page.route(f"{agent}/events*", fulfil(lambda _route: body, "text/event-stream"))
    page.route(agent, fulfil(json.dumps({"agent": {"id": "odd", "state": "idle"}})))
    page.route(f"{agent}/pending", fulfil(json.dumps({"requests": []})))
    page.goto(gateway.url + "#/agent/odd")
    expect(page.locator('#log [data-offset="13"]')).to_be_attached()
    assert turn_lines(page) == [
        "turn done",  # not a boolean is not an error, nor an interrupt
        f"turn failed: {MARKUP}",  # as text, once: the error event made way for it
        "turn failed: the agent did not say why",  # a result alone
        "turn interrupted",  # Claude Code's aborted_* terminal reasons
        'turn failed: {"an":"object"}',  # the turn's own line: its result adds none
    ]
    expect(page.locator(".entry.error-event")).to_have_count(1)  # the host's own error
    expect(page.locator('[data-offset="12"].msg')).to_contain_text("a string is not a mark")
    assert page.locator("#log").inner_text().count(MARKUP) == 1
    assert page.locator("#log img, #log script").count() == 0
    assert page.evaluate("window.__pwned === undefined")
