"""What hides in agent text is shown on the page: a permission card's tool name and
command, a tool call, a decision line, and the rest of what the agent says (answers,
results, errors, output) show each invisible or text-reversing character (bidi
controls, ESC...) as a marker, ``⟨U+202E⟩``, in a span of class ``ctl``; the command to
approve is the whole one, not the host's summary. The user's own messages stay as
typed. The same holds on the page of an approval link.

Against a real host whose agent printed it all (tests/fixtures/hostile_agent.py), and
against a stream the test writes (Playwright's routing), in Chromium, under the page's
Content-Security-Policy (the ``page`` fixture fails a test the policy refused anything
in).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from test_browser_garbage import event, fulfil, sse

from agenthost.attention.keys import link_key
from agenthost.attention.links import new_link, sign

import hostiletext as hostile
from browser import log_in, open_agent
from hosttools import HostProc
from webtools import Gateway

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

RLO = "⟨U+202E⟩"
ESC = "⟨U+001B⟩"


def test_a_hostile_agents_card_shows_its_whole_command_and_what_hides_in_it(
    page: Page, gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    hostile.start_hostile_host(host_factory, tmp_path)
    assert gateway.token
    log_in(page, gateway.token)
    open_agent(page, "evil")
    card = page.locator(".entry.permission").last
    expect(card.locator("strong")).to_have_text("Bash")
    command = card.locator(".tool-input")
    # the command whole (the host's summary ends after 200 characters, with "…")
    expect(command).to_have_text(hostile.COMMAND.replace("\x1b", ESC))
    expect(command.locator(".ctl")).to_have_count(2)
    expect(command.locator(".ctl").first).to_be_visible()
    calls = page.locator(".entry.tool-call .label")
    expect(calls).to_have_text([f"Ba{RLO}sh{ESC}[8m", "Bash"])  # what hides, and where
    card.locator("button.allow").click()
    expect(page.locator(".entry.decision-line").last).to_contain_text("Bash: allowed by web")


def test_a_card_and_a_decision_line_show_bidi_controls_as_markers(
    page: Page, gateway: Gateway
) -> None:
    assert gateway.token
    log_in(page, gateway.token)
    request = {
        "request_id": "q1",
        "tool_name": "Ba\u202esh",
        "tool_input": "the host's summary",
        # reads "rm -rf ~ # exe.txt" reversed: what runs is rm -rf ~
        "input": {"command": "rm -rf ~ #\u202e\u2066txt.exe\u2069 \u200b\ud800 👩\u200d💻"},
    }
    decided = {
        "role": "permission",
        "tool_name": "Ba\u202esh",
        "content": "allowed by web:\u202eenohp",
        "decision": {"request_id": "q1", "behavior": "allow", "actor": "web:phone"},
        "timestamp": "2026-11-23T10:00:00Z",
    }
    said = {"timestamp": "2026-11-23T10:00:00Z"}
    body = sse(
        event(1, "permission_request", request=request),
        event(2, "chat_entry", chat_entry=decided),
        event(3, "chat_entry", chat_entry={**said, "role": "assistant", "content": "a\u202eb"}),
        event(4, "chat_entry", chat_entry={**said, "role": "tool", "tool_result": "c\x1bd"}),
        event(5, "error", error="e\u2067f"),
        event(6, "output", stream="stderr", data="g\x9bh"),
        event(7, "chat_entry", chat_entry={**said, "role": "user", "content": "mine\u202e"}),
    )
    agent = "**/api/agents/bidi"
    page.route(f"{agent}/events*", fulfil(lambda _route: body, "text/event-stream"))
    page.route(agent, fulfil(json.dumps({"agent": {"id": "bidi", "state": "waiting"}})))
    page.route(f"{agent}/pending", fulfil(json.dumps({"requests": [request]})))
    page.goto(gateway.url + "#/agent/bidi")
    card = page.locator('.permission[data-request-id="q1"]')
    expect(card.locator("strong")).to_have_text(f"Ba{RLO}sh")
    expect(card.locator(".tool-input")).to_have_text(
        f"rm -rf ~ #{RLO}⟨U+2066⟩txt.exe⟨U+2069⟩ ⟨U+200B⟩⟨U+D800⟩ 👩\u200d💻"  # ZWJ: kept
    )
    expect(card.locator(".ctl")).to_have_count(6)
    line = page.locator('.decision-line[data-offset="2"]')
    expect(line).to_have_text(re.compile(re.escape(f"Ba{RLO}sh: allowed by web:{RLO}enohp")))
    expect(line.locator(".ctl")).to_have_count(2)
    # the rest of what the agent says too; the user's own words as typed
    expect(page.locator('[data-offset="3"] .text')).to_have_text(f"a{RLO}b")
    expect(page.locator('[data-offset="4"] pre')).to_have_text(f"c{ESC}d")
    expect(page.locator('[data-offset="5"] .text')).to_have_text("e⟨U+2067⟩f")
    expect(page.locator('[data-offset="6"] pre')).to_have_text("g⟨U+009B⟩h")
    expect(page.locator('[data-offset="7"] .text')).to_have_text("mine\u202e")
    # nothing of the agent's text turns the page's own words around
    assert "\u202e" not in (card.text_content() or "") + (line.text_content() or "")


def test_an_approval_links_page_shows_the_whole_command_and_what_hides_in_it(
    page: Page, gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path, home: Path
) -> None:
    """The page a notice's Approve link opens, on a phone: what one tap approves."""
    hostile.start_hostile_host(host_factory, tmp_path)
    (request,) = gateway.client().get("/api/agents/evil/pending").json()["requests"]
    link = new_link(
        "evil", request["request_id"], request["created_at"], "allow", now=time.time(), ttl=600
    )
    page.goto(f"{gateway.url}l/{sign(link, link_key(home))}")
    expect(page.locator("h1 strong")).to_have_text("Bash")
    command = page.locator("dd code")
    expect(command).to_have_text(hostile.COMMAND.replace("\x1b", ESC))  # whole
    expect(command.locator(".ctl")).to_have_count(2)
    expect(command.locator(".ctl").first).to_be_visible()
    html = page.content()
    assert hostile.raw_controls(html) == [], "a control character reached the page raw"
