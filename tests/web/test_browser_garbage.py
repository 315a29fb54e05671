"""The page against answers the tests write (Playwright's routing replaces the
gateway's for one agent or for the overview): streams full of what no gateway should
send — bad JSON, wrong types, markup, repeated and old offsets, unknown event types,
broken gap notices — where the page shows what makes sense, as text, each offset once,
and never throws; a new stream (new epoch); an agent's own answer options.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from browser import log_in, shown_offsets
from webtools import Gateway

try:
    from playwright.sync_api import Page, Route, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

KEY = "odd@machine:22"
"""A remote-looking key: the page must URL-encode it in its API paths."""
ENCODED = "odd%40machine%3A22"
TS = "2026-11-23T10:00:00Z"


def sse(*events: Any) -> str:
    """An SSE body: each item an event, ``(id, data)`` or ``("truncated", data)``."""
    out = []
    for ident, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        lines = "".join(f"data: {line}\n" for line in text.split("\n"))
        if ident == "truncated":
            out.append(f"event: truncated\n{lines}\n")
        else:
            out.append(f"id: {ident}\n{lines}\n")
    return "".join(out)


def chat(offset: int, **entry: Any) -> tuple[int, dict[str, Any]]:
    return offset, {
        "kind": "event",
        "type": "chat_entry",
        "agent_id": "odd",
        "offset": offset,
        "timestamp": TS,
        "chat_entry": {"timestamp": TS, **entry},
    }


def event(offset: int, type_: str, **fields: Any) -> tuple[int, dict[str, Any]]:
    return offset, {"kind": "event", "type": type_, "offset": offset, "timestamp": TS, **fields}


MARKUP = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

FIRST = sse(
    chat(1, role="user", content="hello"),
    (2, "not json at all"),
    (3, "[1, 2, 3]"),
    (4, "null"),
    (5, json.dumps({"type": "chat_entry", "offset": "five", "chat_entry": {"role": "user"}})),
    chat(6, role="assistant", content=MARKUP),
    event(7, "chat_entry", chat_entry="a string, not an entry"),
    event(8, "no_such_type", data="ignored"),
    chat(9, role="tool", tool_name={"not": "a string"}, tool_input=["a", "list"]),
    chat(10, role="tool", tool_name="Bash", tool_result=12345, is_error="yes"),
    event(
        11,
        "permission_request",
        request={
            "request_id": "r<1>",
            "tool_name": MARKUP,
            "options": [None, 7, {"kind": "allow_once"}, {"id": "o1", "kind": "reject_always"}],
        },
    ),
    event(12, "permission_response", decision={"request_id": None, "behavior": 3}),
    event(13, "state", state={"an": "object"}),
    event(14, "error", error=None),
    event(15, "result", result="not an object"),
    ("truncated", "not json"),
    ("truncated", json.dumps({"after": "x", "before": None, "reason": "evicted"})),
    ("truncated", json.dumps({"epoch": "e", "after": 15, "before": 20, "reason": "evicted"})),
    chat(20, role="assistant", content="after the gap"),
    chat(3, role="assistant", content="an old offset again"),
    chat(20, role="assistant", content="the same offset again"),
)
"""The first connection: then the stream ends and the page comes back (after 20)."""

SECOND = sse(
    chat(19, role="assistant", content="replayed: already shown"),
    chat(20, role="assistant", content="replayed: already shown"),
    chat(21, role="user", content="the next one"),
)
"""Every later connection (the page reconnects whenever a stream ends): a replay of what
was shown, which must not show again, and one new event."""

PENDING = [None, "x", {"a": 1}, {"request_id": 5}, {"request_id": "r<1>", "tool_name": "T"}]
"""What the pending list says: garbage, and the request at offset 11 (shown already)."""

SHOWN = [1, 5, 6, 9, 10, 11, 14, 15, 20, 21]
"""The offsets that carry something to show: 5's offset is its SSE id (a user entry
without content); 7 is not an entry; 8 is of an unknown type; 12 and 13 say nothing."""


def fulfil(body: str | Callable[[Route], str], content_type: str = "application/json"):  # type: ignore[no-untyped-def]
    def handler(route: Route) -> None:
        text = body(route) if callable(body) else body
        route.fulfill(status=200, headers={"Content-Type": content_type}, body=text)

    return handler


def test_a_garbage_agent_stream_shows_what_makes_sense_once(page: Page, gateway: Gateway) -> None:
    assert gateway.token
    log_in(page, gateway.token)
    seen: list[str] = []

    def stream(route: Route) -> str:
        seen.append(route.request.url.rsplit("/", 1)[1])
        return FIRST if len(seen) == 1 else SECOND

    agent = f"**/api/agents/{ENCODED}"
    page.route(f"{agent}/events*", fulfil(stream, "text/event-stream"))
    page.route(agent, fulfil(json.dumps({"agent": {"id": ["no"], "state": 5}, "machine": 7})))
    page.route(f"{agent}/pending", fulfil(json.dumps({"requests": PENDING})))
    page.goto(gateway.url + f"#/agent/{ENCODED}")

    expect(page.locator('#log [data-offset="21"]')).to_contain_text("the next one")
    assert shown_offsets(page) == SHOWN
    assert seen[:2] == ["events?tail=500", "events?after=20"], "resumed after the last shown"
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("#log img, #log script").count() == 0
    expect(page.locator('[data-offset="6"] .text')).to_have_text(MARKUP)
    expect(page.locator("#log")).not_to_contain_text("already shown")
    expect(page.locator("#log")).not_to_contain_text("again")
    # the one good gap notice, and the request's own option plus nothing invented
    expect(page.locator(".entry.gap")).to_have_count(1)
    expect(page.locator(".entry.gap")).to_contain_text("16–19")
    card = page.locator('.permission[data-offset="11"]')
    expect(card.locator("button")).to_have_count(1)
    expect(card.locator("button.deny")).to_have_text("reject_always")
    expect(card).to_contain_text(MARKUP)
    expect(page.locator("#pending .permission")).to_have_count(0)


def test_a_garbage_overview_shows_the_sane_agents(page: Page, gateway: Gateway) -> None:
    assert gateway.token
    items = [
        None,
        "a string",
        [],
        {"key": "fine", "agent_id": "fine", "agent": {"state": "idle", "cost_usd": "lots"}},
        {"key": "odd", "agent_id": 12, "agent": "not an object", "daemon": ["x"]},
        {"key": "<b>bold</b>", "agent_id": "<b>bold</b>", "agent": {"state": MARKUP}},
        {"agent_id": "nokey", "reachable": False, "alive": True, "socket_path": "/x"},
        {
            "key": "w",
            "agent_id": "w",
            "machine": "m:22",
            "agent": {"state": "running", "pending_requests": 2, "started_at": "garbage"},
        },
    ]
    bodies = [
        sse(("truncated", "x")).replace("event: truncated", "event: agents"),
        'event: agents\ndata: {"not": "a list"}\n\n'
        + "event: agents\ndata: "
        + json.dumps(items)
        + "\n\n",
    ]
    calls: list[int] = []

    def overview(route: Route) -> str:
        calls.append(1)
        return bodies[min(len(calls), len(bodies)) - 1]

    page.route("**/api/events", fulfil(overview, "text/event-stream"))
    log_in(page, gateway.token)
    expect(page.locator(".agent")).to_have_count(5)
    keys = page.locator(".agent").evaluate_all("ns => ns.map(n => n.dataset.key)")
    assert keys[0] == "w", "who needs the user comes first"
    assert sorted(keys[1:]) == ["<b>bold</b>", "fine", "nokey", "odd"]
    expect(page.locator('.agent[data-key="odd"] .name')).to_have_text("12")
    expect(page.locator('.agent[data-key="w"] .needs')).to_have_text("needs you (2)")
    expect(page.locator('.agent[data-key="nokey"] .badge')).to_have_text("unreachable")
    expect(page.locator('.agent[data-key="<b>bold</b>"] .name')).to_have_text("<b>bold</b>")
    assert page.locator("#agents b, #agents img, #agents script").count() == 0


def test_a_new_stream_starts_the_offsets_again_with_a_notice(page: Page, gateway: Gateway) -> None:
    assert gateway.token
    log_in(page, gateway.token)
    new_epoch = {"epoch": "e2", "after": 0, "before": 1, "reason": "new_epoch"}
    body = sse(
        chat(1, role="user", content="old one"),
        chat(2, role="assistant", content="old two"),
        ("truncated", json.dumps(new_epoch)),
        chat(1, role="user", content="new one"),
        chat(2, role="assistant", content="new two"),
    )
    calls: list[str] = []

    def stream(route: Route) -> str:
        calls.append(route.request.url)
        return body if len(calls) == 1 else ""

    agent = "**/api/agents/fresh"
    page.route(f"{agent}/events*", fulfil(stream, "text/event-stream"))
    page.route(agent, fulfil(json.dumps({"agent": {"id": "fresh", "state": "idle"}})))
    page.route(f"{agent}/pending", fulfil(json.dumps({"requests": []})))
    page.goto(gateway.url + "#/agent/fresh")
    expect(page.locator(".entry.msg").last).to_contain_text("new two")
    assert shown_offsets(page) == [1, 2, 1, 2]
    expect(page.locator('.entry.gap[data-gap="new_epoch"]')).to_contain_text("new stream")
    expect(page.locator(".entry.msg")).to_have_text(
        [re.compile(t) for t in ["old one", "old two", "new one", "new two"]]
    )


def test_the_agents_own_options_are_the_answers(page: Page, gateway: Gateway) -> None:
    assert gateway.token
    log_in(page, gateway.token)
    options = [
        {"id": "once", "name": "Allow once", "kind": "allow_once"},
        {"id": "always", "name": "Always allow", "kind": "allow_always"},
        {"id": "no", "name": "Reject", "kind": "reject_once"},
    ]
    request = {"request_id": "q1", "tool_name": "Edit", "tool_input": "a.txt", "options": options}
    body = sse(event(1, "permission_request", request=request))
    answers: list[Any] = []

    def respond(route: Route) -> str:
        answers.append(route.request.post_data_json)
        return "{}"

    agent = "**/api/agents/acp1"
    page.route(f"{agent}/events*", fulfil(lambda _route: body, "text/event-stream"))
    page.route(agent, fulfil(json.dumps({"agent": {"id": "acp1", "state": "waiting"}})))
    page.route(f"{agent}/pending", fulfil(json.dumps({"requests": [request]})))
    page.route(f"{agent}/respond", fulfil(respond))
    page.goto(gateway.url + "#/agent/acp1")
    card = page.locator('.permission[data-request-id="q1"]')
    expect(card.locator("button")).to_have_text(["Allow once", "Always allow", "Reject"])
    card.locator("button", has_text="Always allow").click()
    expect(card.locator(".outcome")).to_have_text("answered…")
    assert answers == [{"request_id": "q1", "decision": "allow", "option_id": "always"}]
