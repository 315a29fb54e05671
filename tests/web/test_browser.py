"""The page in a real browser (Chromium through Playwright) against a real gateway
(``agenthost web``) and real demo hosts: log in, watch agents appear, talk to one,
answer its permission requests, survive the gateway's death, fit on a phone.

Every wait is a condition with a deadline (Playwright's ``expect``), never a sleep.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from browser import (
    DESKTOP,
    PHONE,
    agenthost,
    log_in,
    new_page,
    open_agent,
    shown_offsets,
    start_again,
    start_and_open,
)
from hosttools import HostProc, kill_tree, lines_agent
from webtools import Gateway

try:
    from playwright.sync_api import Browser, Locator, Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

HostFactory = Callable[..., object]
GatewayFactory = Callable[..., Gateway]


def agent_card(page: Page, key: str) -> Locator:
    return page.locator(f'.agent[data-key="{key}"]')


def send(page: Page, text: str) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")


def assert_unique_increasing(page: Page) -> list[int]:
    values = shown_offsets(page)
    assert values == sorted(set(values)), f"offsets repeated or out of order: {values}"
    return values


# ---- logging in ------------------------------------------------------------------------


def test_wrong_token_is_refused_then_the_right_one_logs_in(page: Page, gateway: Gateway) -> None:
    expect(page.locator("#login")).to_be_visible()
    page.locator("#token").fill("not-a-token")
    page.locator("#login button[type=submit]").click()
    expect(page.locator("#login-error")).to_have_text("That token is not valid.")
    expect(page.locator("#agents")).to_have_count(0)

    log_in(page, gateway.token)
    expect(page.locator("#whoami")).to_have_text("admin")
    # the session is the cookie: the token is nowhere the page keeps things
    stored = page.evaluate("JSON.stringify([localStorage, sessionStorage])")
    assert gateway.token not in stored
    assert gateway.token not in page.url
    cookies = page.context.cookies()
    session = [c for c in cookies if c["name"] == "agenthost_session"]
    assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict"

    page.reload()  # the cookie logs the page in again
    expect(page.locator("#agents")).to_be_attached()
    expect(page.locator("#login")).to_have_count(0)

    page.locator("#logout").click()
    expect(page.locator("#login")).to_be_visible()
    page.reload()  # the cookie is gone with the logout
    expect(page.locator("#login")).to_be_visible()


def test_garbage_tokens_are_refused_with_an_error(page: Page) -> None:
    for token in ["", " ", "x" * 5000, '"}{', "<script>alert(1)</script>", "admin\n"]:
        page.locator("#token").fill(token)
        page.locator("#login button[type=submit]").click()
        if token == "":
            # the form itself asks for a token: nothing reaches the gateway
            expect(page.locator("#token:invalid")).to_have_count(1)
            continue
        expect(page.locator("#login-error")).not_to_be_empty()
        expect(page.locator("#agents")).to_have_count(0)
        page.locator("#login-error").evaluate("e => e.textContent = ''")


# ---- the overview -----------------------------------------------------------------------


def test_agents_appear_without_a_reload(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("first")
    log_in(page, gateway.token)
    expect(agent_card(page, "first")).to_be_visible()
    expect(agent_card(page, "first").locator(".badge")).to_have_text("idle")
    page.evaluate("window.__sameDocument = true")

    host_factory("second")
    expect(agent_card(page, "second")).to_be_visible()
    assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"

    # a question makes the agent need its user, on the overview too
    agenthost(home, "send", "second", "/ask")
    expect(agent_card(page, "second")).to_have_class(re.compile(r"\bneeds-you\b"))
    expect(agent_card(page, "second").locator(".needs")).to_be_visible()
    expect(agent_card(page, "first")).not_to_have_class(re.compile(r"\bneeds-you\b"))
    # the last activity: each agent's newest event (test_browser_overview.py)
    expect(agent_card(page, "second").locator(".last")).to_have_text("active just now")
    expect(agent_card(page, "first").locator(".last")).to_have_text("active just now")
    # those who need their user come first
    expect(page.locator(".agent").first).to_have_attribute("data-key", "second")


# ---- one agent ------------------------------------------------------------------------


def test_a_message_gets_its_answer_with_the_tool_call(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    assert page.url.endswith("#/agent/a1")
    send(page, "hello there")
    expect(page.locator(".entry.role-user").last).to_contain_text("hello there")
    expect(page.locator(".entry.role-assistant").last).to_contain_text(
        'You said "hello there". That is 2 words.'
    )
    expect(page.locator(".entry.tool-call").last).to_contain_text("wc -w")
    expect(page.locator(".entry.tool-result").last.locator("pre")).to_have_text("2")
    # right under its call, the result is drawn as its second half
    expect(page.locator(".entry.tool-call + .entry.tool-result.joined")).to_have_count(1)
    expect(page.locator("#input")).to_have_value("")
    expect(page.locator("#agent-state")).to_have_text("idle")
    assert_unique_increasing(page)

    page.go_back()  # hash routes: Back is the overview
    expect(agent_card(page, "a1")).to_be_visible()


def test_agent_text_is_shown_as_text_never_as_markup(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>&amp; \u202e'
    send(page, hostile)
    expect(page.locator(".entry.role-user .text").last).to_have_text(hostile)
    expect(page.locator(".entry.role-assistant").last).to_contain_text("You said")
    assert page.locator("#log img, #log script").count() == 0
    assert page.evaluate("window.__pwned === undefined")


def test_allow_a_permission_request(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "/ask")
    card = page.locator(".entry.permission").last
    expect(card).to_contain_text("touch demo-was-here")
    expect(page.locator("#agent-state")).to_have_text("waiting")
    card.locator("button.allow").click()
    expect(card).to_have_class(re.compile(r"\banswered\b"))
    expect(card.locator(".outcome")).to_have_text("allowed")
    expect(card.locator("button")).to_have_count(0)
    expect(page.locator(".entry.tool-result").last).to_contain_text(
        "(demo) ran: touch demo-was-here"
    )
    # the question stands between the call and its result: the result stands alone
    expect(page.locator(".entry.tool-result").last).not_to_have_class(re.compile("joined"))
    expect(page.locator(".entry.role-assistant").last).to_have_text(
        re.compile("Done: permission granted, command run.")
    )
    expect(page.locator("#agent-state")).to_have_text("idle")


def test_deny_a_permission_request(page: Page, gateway: Gateway, host_factory: HostFactory) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "/ask")
    card = page.locator(".entry.permission").last
    card.locator("button.deny").click()
    expect(card.locator(".outcome")).to_have_text("denied")
    expect(page.locator(".entry.tool-result.failed").last).to_contain_text("Permission denied")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("I did not run it")


def test_a_request_answered_elsewhere_is_marked_and_a_reload_shows_pending_ones(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    log_in(page, gateway.token)
    agenthost(home, "send", "a1", "/ask")
    open_agent(page, "a1")
    card = page.locator(".permission:not(.answered)")
    expect(card).to_have_count(1)
    request_id = card.get_attribute("data-request-id")
    assert request_id
    agenthost(home, "respond", "a1", request_id, "deny")
    expect(page.locator(f'.permission[data-request-id="{request_id}"] .outcome')).to_have_text(
        "denied"
    )
    expect(page.locator(".permission:not(.answered)")).to_have_count(0)


def test_the_page_comes_back_after_the_gateway_dies(
    page: Page,
    gateway: Gateway,
    gateway_factory: GatewayFactory,
    host_factory: HostFactory,
    home: Path,
) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "before the loss")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("before the loss")
    before = assert_unique_increasing(page)

    gateway.stop(signal.SIGKILL)
    expect(page.locator("#conn")).to_be_visible()
    expect(page.locator("#conn")).to_contain_text("reconnecting")
    agenthost(home, "send", "a1", "sent while away one")
    agenthost(home, "send", "a1", "sent while away two")
    start_again(gateway, gateway_factory)  # same port, same home: the cookie is still good

    expect(page.locator("#conn")).to_be_hidden(timeout=30000)
    expect(page.locator(".entry.role-assistant").last).to_contain_text(
        "sent while away two", timeout=30000
    )
    for text in ["before the loss", "sent while away one", "sent while away two"]:
        expect(page.locator(".entry.role-user", has_text=text)).to_have_count(1)
    after = assert_unique_increasing(page)
    assert after[: len(before)] == before
    # the chat entries shown are exactly the host's own, each once
    history = json.loads(agenthost(home, "history", "a1", "--json"))
    kept = [entry["offset"] for entry in history["entries"]]
    chat = page.locator("#log .msg, #log .tool-call, #log .tool-result")
    assert chat.evaluate_all("ns => ns.map(n => Number(n.dataset.offset))") == kept

    # and the page still talks through the new gateway
    send(page, "after the return")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("after the return")
    assert_unique_increasing(page)


def test_an_unknown_agent_says_so(page: Page, gateway: Gateway) -> None:
    log_in(page, gateway.token)
    page.goto(gateway.url + "#/agent/" + "no-such-agent")
    expect(page.locator("#agent-error")).to_contain_text("No agent")
    page.goto(gateway.url + "#/agent/%2e%2e%2f%2e%2e%2fetc")
    expect(page.locator("#agent-error")).to_contain_text("No agent")


def test_a_read_token_cannot_act_and_a_revoked_one_goes_back_to_login(
    browser: Browser, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    token = gateway.add_token("viewer", "read")
    page = new_page(browser, gateway)
    try:
        log_in(page, token)
        open_agent(page, "a1")
        expect(page.locator("#send")).to_be_disabled()
        expect(page.locator("#interrupt")).to_be_disabled()
        expect(page.locator("#stop")).to_be_disabled()
        agenthost(home, "send", "a1", "/ask")
        expect(page.locator(".permission button.allow")).to_be_disabled()

        gateway.cli("token", "revoke", "viewer")
        # the next request meets the revoked token: going back to the overview (by the
        # address, as Back does: the ended stream may have shown the login already,
        # and the link with it)
        page.evaluate("location.hash = '#/'")
        expect(page.locator("#login")).to_be_visible()
    finally:
        page.context.close()


def test_stop_asks_first(page: Page, gateway: Gateway, host_factory: HostFactory) -> None:
    start_and_open(page, gateway, host_factory)
    page.locator("#stop").click()
    expect(page.locator("#stop-confirm")).to_be_visible()
    page.locator("#stop-no").click()
    expect(page.locator("#stop-confirm")).to_be_hidden()
    expect(page.locator("#agent-state")).to_have_text("idle")
    page.locator("#stop").click()
    page.locator("#stop-yes").click()
    expect(page.locator("#agent-state")).to_have_text("done", timeout=30000)
    expect(page.locator(".entry.ended")).to_have_count(1)


# ---- a phone ---------------------------------------------------------------------------


SMALL_PHONE = {"width": 320, "height": 568}


@pytest.mark.parametrize(
    "viewport", [PHONE, SMALL_PHONE, DESKTOP], ids=["phone", "small-phone", "desktop"]
)
def test_nothing_scrolls_sideways(
    browser: Browser,
    gateway: Gateway,
    host_factory: HostFactory,
    viewport: dict[str, int],
) -> None:
    host_factory("an-agent-with-a-rather-long-name-that-goes-on-and-on")
    host_factory("a1")
    page = new_page(browser, gateway, viewport)
    try:
        width = viewport["width"]
        scroll_width = "document.scrollingElement.scrollWidth"
        assert page.evaluate(scroll_width) <= width
        log_in(page, gateway.token)
        expect(page.locator(".agent")).to_have_count(2)
        assert page.evaluate(scroll_width) <= width
        open_agent(page, "a1")
        send(page, "x" * 400 + " " + "/path/" * 60)
        expect(page.locator(".entry.role-assistant").last).to_contain_text("That is 2 words")
        send(page, "/ask")
        expect(page.locator(".entry.permission button.allow")).to_be_visible()
        assert page.evaluate(scroll_width) <= width
        # the input and the answer buttons are on screen and big enough to tap
        for selector in ["#input", "#send", ".entry.permission button.allow"]:
            box = page.locator(selector).last.bounding_box()
            assert box is not None and box["height"] >= 40, selector
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, selector
    finally:
        page.context.close()


def test_interrupt_ends_a_long_turn(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "/sleep 600")
    expect(page.locator("#agent-state")).to_have_text("running")
    page.locator("#interrupt").click()
    expect(page.locator("#agent-state")).to_have_text("idle")
    expect(page.locator("#agent-error")).to_be_empty()


def test_a_plain_program_shows_its_output(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    code = (
        "import sys\n"
        "print('<b>started</b>', file=sys.stderr, flush=True)\n"
        "for line in sys.stdin:\n"
        "    print('echo:', line.strip(), flush=True)\n"
    )
    host_factory("plain", "--agent", "lines", command=lines_agent(code))
    log_in(page, gateway.token)
    open_agent(page, "plain")
    expect(page.locator(".entry.output.stream-stderr")).to_have_text("<b>started</b>")
    send(page, "ping")
    expect(page.locator(".entry.output.stream-stdout").last).to_have_text("echo: ping")
    assert page.locator("#log b").count() == 0
    assert_unique_increasing(page)


def test_the_overview_comes_back_with_what_changed_meanwhile(
    page: Page,
    gateway: Gateway,
    gateway_factory: GatewayFactory,
    host_factory: HostFactory,
    home: Path,
) -> None:
    host_factory("early")
    log_in(page, gateway.token)
    expect(agent_card(page, "early")).to_be_visible()
    gateway.stop(signal.SIGKILL)
    expect(page.locator("#conn")).to_be_visible()
    host_factory("late")
    agenthost(home, "send", "early", "/ask")
    start_again(gateway, gateway_factory)
    expect(page.locator("#conn")).to_be_hidden()
    expect(agent_card(page, "late")).to_be_visible()
    expect(agent_card(page, "early")).to_have_class(re.compile(r"\bneeds-you\b"))
    expect(page.locator(".agent")).to_have_count(2)


def test_a_flood_is_shown_whole_and_once_up_to_the_last_entries(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    count = 1500  # more entries than the page keeps on screen (1000)
    start_and_open(page, gateway, host_factory)
    send(page, f"/flood {count}")
    expect(page.locator(".entry.role-assistant").last).to_have_text(
        re.compile(f"flood {count}/{count}"), timeout=60000
    )
    expect(page.locator("#trimmed")).to_be_visible()
    assert_unique_increasing(page)
    texts = page.locator(".entry.role-assistant .text").all_text_contents()
    numbers = [int(t.split()[1].split("/")[0]) for t in texts if t.startswith("flood ")]
    assert numbers == list(range(numbers[0], count + 1)), "a flood entry missing or repeated"
    assert page.locator("#log > li").count() <= 1000


def test_a_link_to_an_agent_opens_it_after_logging_in(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("a1")
    page.goto(gateway.url + "#/agent/a1")
    expect(page.locator("#login")).to_be_visible()
    page.locator("#token").fill(str(gateway.token))
    page.locator("#login button[type=submit]").click()
    expect(page.locator("#agent-state")).to_have_text("idle")
    assert page.url.endswith("#/agent/a1")


def test_a_refused_message_says_why_and_stays_in_the_box(
    page: Page, gateway: Gateway, host_factory: HostFactory
) -> None:
    start_and_open(page, gateway, host_factory)
    big = "y" * (300 * 1024)  # over the gateway's 256 KiB limit of a request body
    page.locator("#input").fill(big)
    page.locator("#send").click()
    expect(page.locator("#agent-error")).to_contain_text("Not sent")
    assert page.locator("#input").input_value() == big
    expect(page.locator(".entry.role-user")).to_have_count(0)


def test_the_conversation_goes_on_through_a_host_restart(
    page: Page, gateway: Gateway, host_factory: Callable[..., HostProc], home: Path
) -> None:
    host = start_and_open(page, gateway, host_factory)
    send(page, "before the crash")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("before the crash")
    kill_tree(host.proc)  # SIGKILL: the journal is all that is left
    host_factory("a1")  # the same agent again, on the same journal
    send(page, "after the crash")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("after the crash")
    for text in ["before the crash", "after the crash"]:
        expect(page.locator(".entry.role-user", has_text=text)).to_have_count(1)
    assert_unique_increasing(page)
    expect(page.locator(".entry.gap")).to_have_count(0)
    history = json.loads(agenthost(home, "history", "a1", "--json"))
    chat = page.locator("#log .msg, #log .tool-call, #log .tool-result")
    shown = chat.evaluate_all("ns => ns.map(n => Number(n.dataset.offset))")
    assert shown == [entry["offset"] for entry in history["entries"]]


def test_who_needs_the_user_is_counted_in_the_top_bar_on_every_view(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    host_factory("a1")
    host_factory("a2")
    log_in(page, gateway.token)
    open_agent(page, "a1")
    expect(page.locator("#attention")).to_be_hidden()
    agenthost(home, "send", "a2", "/ask")
    expect(page.locator("#attention")).to_have_text("1 needs you")
    expect(page).to_have_title("(1) agenthost")
    page.locator("#attention").click()
    expect(agent_card(page, "a2")).to_have_class(re.compile(r"\bneeds-you\b"))
    open_agent(page, "a2")
    page.locator(".entry.permission button.deny").click()
    expect(page.locator("#attention")).to_be_hidden()
    expect(page).to_have_title("agenthost")


COUNT_STREAMS = """
const Original = window.EventSource;
window.__streams = { open: 0, most: 0 };
window.EventSource = class extends Original {
  constructor(...args) {
    super(...args);
    const s = window.__streams;
    s.open += 1;
    s.most = Math.max(s.most, s.open);
  }
  close() {
    if (this.readyState !== Original.CLOSED) window.__streams.open -= 1;
    super.close();
  }
};
"""


def test_the_page_holds_one_stream_at_a_time(
    browser: Browser, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    # A browser opens at most six connections to a server over HTTP/1.1, for all its
    # tabs together, and each open event stream holds one of them.
    host_factory("a1")
    host_factory("a2")
    page = new_page(browser, gateway)
    try:
        page.add_init_script(COUNT_STREAMS)
        page.reload()
        log_in(page, gateway.token)
        page.wait_for_function("window.__streams.open === 1")
        for key in ["a1", "a2"]:
            open_agent(page, key)
            expect(page.locator("#agent-state")).to_have_text("idle")
            page.wait_for_function("window.__streams.open === 1")
            page.go_back()
            expect(agent_card(page, key)).to_be_visible()
            page.wait_for_function("window.__streams.open === 1")
        # while an agent is open, the others' need of the user still reaches the top bar
        open_agent(page, "a1")
        agenthost(home, "send", "a2", "/ask")
        expect(page.locator("#attention")).to_have_text("1 needs you")
        assert page.evaluate("window.__streams.most") == 1
    finally:
        page.context.close()


def test_earlier_messages_come_from_the_history(
    page: Page, gateway: Gateway, host_factory: HostFactory, home: Path
) -> None:
    start_and_open(page, gateway, host_factory)
    send(page, "the very first words")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("the very first words")
    send(page, "/flood 300")  # ~600 events: more than the page asks for when it opens
    expect(page.locator(".entry.role-assistant").last).to_have_text(re.compile("flood 300/300"))
    page.reload()
    expect(page.locator(".entry.result")).to_have_count(1)  # the flood's end, not the first
    expect(page.locator(".entry.role-user", has_text="the very first words")).to_have_count(0)
    page.locator("#earlier").click()
    expect(page.locator(".entry.role-user", has_text="the very first words")).to_have_count(1)
    expect(page.locator("#earlier")).to_be_hidden()  # the history has nothing older
    # each entry once, in order, and exactly the history's chat entries
    assert_unique_increasing(page)
    history = json.loads(agenthost(home, "history", "a1", "--json"))
    chat = page.locator("#log .msg, #log .tool-call, #log .tool-result")
    shown = chat.evaluate_all("ns => ns.map(n => Number(n.dataset.offset))")
    assert shown == [entry["offset"] for entry in history["entries"]]
    # and the conversation goes on below
    send(page, "and now")
    expect(page.locator(".entry.role-assistant").last).to_contain_text("and now")
    assert_unique_increasing(page)
