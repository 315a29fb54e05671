"""The overview's "Automation" section in Chromium, against a real gateway and daemon: a
schedule and its finished run with their texts, the run's agent a link to it, a
hostile message shown as text; hidden while there is nothing to show, and garbage from
the gateway breaks nothing (the page fixture fails a test whose page threw)."""

from __future__ import annotations

import json
from typing import Any

from browser import log_in
from daemontools import DaemonWorld
from hosttools import wait_for
from webtools import Gateway

try:
    from playwright.sync_api import Page, Route, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

FAST = {"AGENTHOST_DEMO_PACE": "0"}
HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b> \u202etxt.exe'


def test_a_schedule_and_its_run_and_the_link_to_its_agent(
    page: Page, gateway: Gateway, world: DaemonWorld
) -> None:
    world.start_daemon()
    world.request("daemon.spawn", {"agent_id": "a1", "agent": "demo", "env": FAST})
    added = world.cli(
        "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris",
        "--agent-id", "a1", HOSTILE,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    now = world.cli("schedule", "run-now", "nightly", "--json")
    assert now.returncode == 0, now.stderr
    run_id = json.loads(now.stdout)["run"]["run_id"]
    wait_for(
        lambda: any(
            r["run_id"] == run_id and r["result"] == "done"
            for r in world.request("daemon.runs")["runs"]
        ),
        what="the run done",
    )
    log_in(page, str(gateway.token))
    section = page.locator("#automation")
    expect(section).to_be_visible()
    schedule = section.locator('.schedule[data-name="nightly"]')
    expect(schedule.locator(".name")).to_have_text("nightly")
    expect(schedule.locator(".cron")).to_have_text("0 3 * * * (Europe/Paris)")
    expect(schedule.locator(".target")).to_have_text("to a1")
    expect(schedule.locator(".last .badge")).to_have_text("done")
    expect(schedule.locator(".next .key")).to_have_text("next")
    # the message as text: its markup shown, its bidi control a visible marker
    message = schedule.locator(".message")
    expect(message).to_have_text(HOSTILE.replace("\u202e", "⟨U+202E⟩"))
    expect(section.locator("img, b")).to_have_count(0)
    run = section.locator(".run").first
    expect(run.locator(".name")).to_have_text("schedule:nightly")
    expect(run.locator(".badge")).to_have_text("done")
    expect(run.locator(".when")).to_have_count(1)
    run.locator(".run-agent").click()
    expect(page).to_have_url(gateway.url + "#/agent/a1")
    expect(page.locator("#log")).to_be_attached()
    assert page.title() != "1"


GARBAGE: list[Any] = [
    None,
    7,
    "text",
    [],
    {"schedules": "x", "runs": {"a": 1}},
    {
        "daemon": "yes",
        "schedules": [None, 3, {"spec": 5}, {"spec": {"name": 1, "target": {"new": 7}}}],
        "runs": [{}, {"source": {}, "name": [], "agent_id": 5, "started_at": "never"}],
    },
    {"schedules": [{"spec": {"name": "n", "cron": "x", "target": {"new": {"agent": 9}}}}]},
]


def test_hidden_with_nothing_to_show_and_garbage_breaks_nothing(
    page: Page, gateway: Gateway
) -> None:
    # no daemon: nothing to show, the section hidden (and the page asks again)
    with page.expect_response("**/api/automation") as first:
        log_in(page, str(gateway.token))
    assert first.value.json() == {"schedules": [], "runs": [], "daemon": False}
    expect(page.locator("#automation")).to_be_hidden()
    described = page.evaluate(
        """async (bodies) => {
          const { describeAutomation } = await import("/static/automation.js");
          return bodies.map((b) => describeAutomation(b));
        }""",
        GARBAGE,
    )
    assert described[:4] == [None, None, None, None]
    assert described[4] == {"daemon": True, "schedules": [], "runs": []}
    odd = described[5]
    assert [s["name"] for s in odd["schedules"]] == ["", ""]
    assert odd["runs"][1] == {"label": "", "agent": "", "result": "", "at": None, "reason": ""}
    assert described[6]["schedules"][0]["target"] == "new agent"

    # the gateway's answers replaced by garbage: each drawn as far as it makes sense
    answer: list[Any] = [None]

    def garbage(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(answer[0]))

    page.route("**/api/automation", garbage)
    for n, body in enumerate(GARBAGE):
        answer[0] = body
        with page.expect_response("**/api/automation"):
            page.evaluate("(n) => { location.hash = `#/${n}`; }", n)  # a new overview
        if n == 5:
            expect(page.locator("#automation .schedule")).to_have_count(2)
            expect(page.locator("#automation .run")).to_have_count(2)
    expect(page.locator("#automation .schedule")).to_have_count(1)
    expect(page.locator("#automation .schedule .cron")).to_have_text("x")
    expect(page.locator("#automation .run")).to_have_count(0)


def test_an_agent_forked_from_another_says_so(page: Page, gateway: Gateway) -> None:
    log_in(page, str(gateway.token))
    forks = page.evaluate(
        """async (items) => {
          const { describe } = await import("/static/overview.js");
          return items.map((item) => describe(item).forkedFrom);
        }""",
        [
            {"agent_id": "b", "agent": {"forked_from": "a1"}},
            {"agent_id": "b", "daemon": {"forked_from": {"from_agent": "a2", "from_offset": 7}}},
            {"agent_id": "b", "agent": {"forked_from": {"from_agent": 3}}},
            {"agent_id": "b", "agent": {"forked_from": ["a"]}, "daemon": None},
        ],
    )
    assert forks == [
        {"id": "a1", "offset": None},
        {"id": "a2", "offset": 7},
        {"id": "", "offset": None},
        {"id": "", "offset": None},
    ]
