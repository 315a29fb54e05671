"""Take the screenshots of docs/web.md: the page on a few demo agents.

Run by hand from the checkout (it needs /usr/bin/chromium and Playwright)::

    .venv/bin/python tests/web/screenshots.py [OUTDIR]

It starts demo hosts and a gateway in a temporary home, gives the agents something to
show (a finished turn, a permission question, a long turn, turns interrupted and
failed), then writes ``web-overview.png`` (desktop), ``web-agent.png`` (desktop),
``web-phone.png`` (a 390x844 phone) and ``web-turns.png`` (the ends of turns, and the
way back to newer entries, on a phone) into OUTDIR (default: docs/img). Everything it
started ends with it.
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # tests/web and tests, as under pytest

from playwright.sync_api import Page, expect  # noqa: E402

from browser import DESKTOP, PHONE, agenthost, chromium, log_in, new_page, open_agent  # noqa: E402
from hosttools import HostProc, kill_tree, start_host  # noqa: E402
from webtools import start_gateway  # noqa: E402


def settle(page: Page) -> None:
    """Wait until the page shows its last answer (no half-drawn screenshot)."""
    expect(page.locator("#conn")).to_be_hidden()


def turns(page: Page, home: Path, hosts: list[HostProc]) -> None:
    """On ``page``: an agent's interrupted, failed and good turns, read from above while
    it says more (the New messages button)."""
    hosts.append(start_host(home, "review-pr", "--project", "api", "--task", "Review PR 42"))
    page.goto(page.url.split("#")[0] + "#/agent/review-pr")
    send = page.locator("#input")
    send.fill("/sleep 600")
    send.press("Enter")
    expect(page.locator("#agent-state")).to_have_text("running")
    page.locator("#interrupt").click()
    expect(page.locator(".entry.result")).to_have_count(1)
    for text, count in [("/error", 2), ("Is the retry loop bounded?", 3)]:
        send.fill(text)
        send.press("Enter")
        expect(page.locator(".entry.result")).to_have_count(count)
    page.mouse.move(195, 300)
    page.mouse.wheel(0, -150)  # reading above: what comes next waits below
    expect(page.locator("#jump")).to_be_hidden()
    agenthost(home, "send", "review-pr", "And the timeout?")
    expect(page.locator("#jump")).to_be_visible()
    expect(page.locator(".entry.result")).to_have_count(4)
    settle(page)


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="ah-shots-", dir="/tmp"))
    hosts: list[HostProc] = []
    gateway = None
    try:
        for agent_id, project, task in [
            ("login-form", "shop", "Fix the login form validation"),
            ("docs-tour", "shop", "Write the getting-started tour"),
            ("flaky-tests", "api", "Find the flaky test in CI"),
        ]:
            args = ["--project", project, "--task", task]
            hosts.append(start_host(home, agent_id, *args))
        agenthost(home, "send", "docs-tour", "Summarise the three install steps")
        agenthost(home, "wait", "docs-tour", "--state", "idle")
        agenthost(home, "send", "flaky-tests", "/sleep 600")
        agenthost(home, "send", "login-form", "Check that the email field rejects spaces")
        agenthost(home, "wait", "login-form", "--state", "idle")
        agenthost(home, "send", "login-form", "/ask")
        agenthost(home, "wait", "login-form", "--state", "waiting")

        gateway = start_gateway(home)
        assert gateway.token
        with chromium() as browser:
            page = new_page(browser, gateway, DESKTOP)
            log_in(page, gateway.token)
            expect(page.locator(".agent")).to_have_count(3)
            expect(page.locator(".agent.needs-you")).to_have_count(1)
            settle(page)
            page.screenshot(path=str(outdir / "web-overview.png"))

            open_agent(page, "login-form")
            expect(page.locator(".entry.permission button.allow")).to_be_visible()
            settle(page)
            page.screenshot(path=str(outdir / "web-agent.png"))
            page.context.close()

            phone = new_page(browser, gateway, PHONE)
            log_in(phone, gateway.token)
            open_agent(phone, "login-form")
            expect(phone.locator(".entry.permission button.allow")).to_be_visible()
            settle(phone)
            phone.screenshot(path=str(outdir / "web-phone.png"))
            turns(phone, home, hosts)
            phone.screenshot(path=str(outdir / "web-turns.png"))
            phone.context.close()
    finally:
        if gateway is not None:
            gateway.stop(signal.SIGTERM)
        for host in hosts:
            kill_tree(host.proc)
        shutil.rmtree(home, ignore_errors=True)
    for name in ["web-overview.png", "web-agent.png", "web-phone.png", "web-turns.png"]:
        print(outdir / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "docs" / "img")
