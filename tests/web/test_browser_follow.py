"""The conversation keeps following (Chromium against a real gateway and demo hosts):
while the person is at the bottom, and after they send, the newest entries stay in
sight whatever grows (a tool result that makes a card taller, the input box, a burst of
events, a card whose text grows); once they scrolled up to read, nothing moves them, and
a button takes them back.

Every wait is a condition with a deadline (Playwright's waits), never a sleep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from browser import DESKTOP, PHONE, agenthost, log_in, new_page, open_agent
from webtools import Gateway

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

HostFactory = Callable[..., object]

NEAR_BOTTOM = 32
"""follow.js NEAR_BOTTOM: how close to the bottom (pixels) counts as at the bottom."""
DISTANCE = """() => {
  const e = document.scrollingElement;
  return e.scrollHeight - e.scrollTop - e.clientHeight;
}"""
AT_BOTTOM = f"() => ({DISTANCE})() <= {NEAR_BOTTOM}"
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
PACED = {"AGENTHOST_DEMO_PACE": "0.2"}
"""A demo agent that takes its time: entries come one by one, as a real agent's."""


@pytest.fixture
def viewport() -> dict[str, int]:
    return DESKTOP


@pytest.fixture
def opened(
    browser: Browser, gateway: Gateway, host_factory: HostFactory, viewport: dict[str, int]
) -> Iterator[Page]:
    """The page of demo agent a1 (paced), logged in, in ``viewport``, with more entries
    than the screen holds, at the bottom."""
    host_factory("a1", env=PACED)
    page = new_page(browser, gateway, viewport)
    try:
        log_in(page, str(gateway.token))
        open_agent(page, "a1")
        send(page, "/flood 40")
        expect(page.locator(".entry.role-assistant .text").last).to_have_text("flood 40/40")
        at_bottom(page)
        assert page.evaluate("document.scrollingElement.scrollTop") > 0
        yield page
    finally:
        page.context.close()


def send(page: Page, text: str) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")


def at_bottom(page: Page) -> None:
    """Wait until the view is at the bottom (fails when it stays away)."""
    page.wait_for_function(AT_BOTTOM, timeout=5000)


def scroll_top(page: Page) -> int:
    return int(page.evaluate("Math.round(document.scrollingElement.scrollTop)"))


def long_output(lines: int = 11, words: int = 40) -> str:
    """A command whose (demo) output is as tall as a dozen long lines: under the fold
    of a tool result (12 lines), so the card grows by all of it."""
    return "\n".join(f"line {i} " + "word " * words for i in range(lines))


@VIEWPORTS
def test_a_tool_result_that_grows_its_card_stays_in_sight(
    opened: Page, viewport: dict[str, int]
) -> None:
    page = opened
    # a message of many lines makes the input box taller first: that growth is not
    # an entry either, and the view must stay with it
    send(page, "/tool " + long_output())
    result = page.locator(".entry.tool-result.joined").last
    expect(result).to_contain_text("line 10 word")
    box = result.bounding_box()
    assert box is not None and box["height"] > 160, box  # far more than the old 80 px
    expect(page.locator(".entry.result").last).to_contain_text("turn done")
    at_bottom(page)
    # and a turn after it, entry by entry, stays in sight too
    send(page, "hello again")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("hello again")
    at_bottom(page)
    expect(page.locator("#jump")).to_be_hidden()


@VIEWPORTS
def test_a_burst_of_events_stays_in_sight(opened: Page, viewport: dict[str, int]) -> None:
    page = opened
    send(page, "/flood 400")
    expect(page.locator(".entry.role-assistant .text").last).to_have_text(
        "flood 400/400", timeout=60000
    )
    at_bottom(page)
    expect(page.locator("#jump")).to_be_hidden()


def test_a_card_that_grows_without_a_new_entry_stays_in_sight(opened: Page) -> None:
    page = opened
    # whatever grows (a font, a fold opened, a card's text): no event says so
    page.locator(".entry.role-assistant .text").last.evaluate(
        "el => { el.textContent += '\\nmore'.repeat(40); }"
    )
    at_bottom(page)


def test_a_person_reading_above_is_not_moved_and_can_come_back(opened: Page, home: Path) -> None:
    page = opened
    box = page.locator("#log").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, 300)
    page.mouse.wheel(0, -600)  # the person scrolls up to read
    page.wait_for_function(f"() => ({DISTANCE})() > 300")
    page.wait_for_function(
        """() => new Promise(done => {  // two frames without a scroll: it settled
          let last = document.scrollingElement.scrollTop;
          requestAnimationFrame(() => requestAnimationFrame(() =>
            done(document.scrollingElement.scrollTop === last)));
        })"""
    )
    reading = scroll_top(page)
    # the agent says more (sent from elsewhere: the page itself did not send)
    agenthost(home, "send", "a1", "/tool " + long_output())
    expect(page.locator(".entry.tool-result").last).to_contain_text("line 10 word")
    expect(page.locator(".entry.result").last).to_contain_text("turn done")
    assert scroll_top(page) == reading, "the view moved under a person reading"
    jump = page.locator("#jump")
    expect(jump).to_be_visible()
    expect(jump).to_have_text(re.compile("New messages"))
    jump.click()
    at_bottom(page)
    expect(jump).to_be_hidden()
    # and follows again from there
    agenthost(home, "send", "a1", "following again")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("following again")
    at_bottom(page)


def test_sending_brings_the_view_to_the_bottom_and_keeps_it_there(opened: Page) -> None:
    page = opened
    page.evaluate("document.activeElement.blur()")  # keys go to the page, not the box
    page.keyboard.press("Home")  # the person reads the top (the keys a reader uses)
    page.wait_for_function("() => document.scrollingElement.scrollTop === 0")
    page.locator("#input").click()
    send(page, "/tool " + long_output())
    expect(page.locator(".entry.tool-result").last).to_contain_text("line 10 word")
    expect(page.locator(".entry.result").last).to_contain_text("turn done")
    at_bottom(page)
