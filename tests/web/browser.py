"""The page in a real browser: Playwright (Python) driving Debian's Chromium against
the gateway of tests/web/conftest.py, which a test can kill and start again on the same
port.

Nothing here sleeps: the page's readiness is Playwright's waits on what it shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from e2e.clis import unavailable

from hosttools import HostProc
from webtools import Gateway

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
"""The browser of the Debian packages (Playwright's own downloads are not used)."""
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
WAIT_MS = 15000
"""How long a test waits on the page for something to appear (milliseconds)."""


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium; skips the test (fails it in CI) without chromium or
    Playwright."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is not installed")
    try:
        from playwright.sync_api import Error, expect, sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed: {exc}")
        raise  # not reached
    expect.set_options(timeout=WAIT_MS)  # the same patience as the pages' own waits
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        except Error as exc:
            unavailable(f"{CHROMIUM} does not start: {exc}")
            raise  # not reached
        try:
            yield browser
        finally:
            browser.close()


def start_again(gateway: Gateway, gateway_factory: Callable[..., Gateway]) -> Gateway:
    """A new gateway on the port and home of ``gateway``, which was stopped (e.g.
    ``gateway.stop(signal.SIGKILL)``: a crash, nothing closed the page's streams)."""
    assert gateway.proc.poll() is not None, "the gateway still runs"
    return gateway_factory(listen=f"127.0.0.1:{urlsplit(gateway.url).port}")


def agenthost(home: Path, *args: str) -> str:
    """Run an ``agenthost`` command on ``home``; its stdout (fails on a non-zero exit)."""
    result = subprocess.run(
        [sys.executable, "-m", "agenthost", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"agenthost {' '.join(args)}: {result.stderr}"
    return result.stdout


def new_page(
    browser: Browser,
    gateway: Gateway,
    viewport: dict[str, int] = DESKTOP,
    errors: list[str] | None = None,
) -> Page:
    """A page of a fresh browser context (no cookie yet) on the gateway's root.
    ``errors`` collects what a test must not see: exceptions the page's scripts threw
    and Content-Security-Policy refusals."""
    context = browser.new_context(viewport=viewport, base_url=gateway.url)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    if errors is not None:
        page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        page.on(
            "console",
            lambda m: (
                errors.append(f"console: {m.text}")
                if m.type == "error" and "Content Security Policy" in m.text
                else None
            ),
        )
    page.goto(gateway.url)
    return page


@contextmanager
def checked_page(browser: Browser, gateway: Gateway) -> Iterator[Page]:
    """A :func:`new_page` that fails the test, at its end, if the page's scripts threw
    or the Content-Security-Policy refused something; its context closed after."""
    errors: list[str] = []
    page = new_page(browser, gateway, errors=errors)
    try:
        yield page
        assert not errors, f"the page threw or was refused something: {errors}"
    finally:
        page.context.close()


def log_in(page: Page, token: str) -> None:
    """Log in on the page's form and wait for the overview."""
    from playwright.sync_api import expect

    page.locator("#token").fill(token)
    page.locator("#login button[type=submit]").click()
    expect(page.locator("#agents")).to_be_attached()


def open_agent(page: Page, key: str) -> None:
    """Tap the agent in the overview and wait for its conversation."""
    from playwright.sync_api import expect

    page.locator(f'.agent[data-key="{key}"] a').click()
    expect(page.locator("#log")).to_be_attached()


def start_and_open(
    page: Page, gateway: Gateway, host_factory: Callable[..., HostProc], agent_id: str = "a1"
) -> HostProc:
    """Start a demo host, log in and open its conversation; return the host."""
    host = host_factory(agent_id)
    log_in(page, gateway.token)
    open_agent(page, agent_id)
    return host


def shown_offsets(page: Page) -> list[int]:
    """The stream offsets of the entries the conversation shows, in order."""
    values: list[Any] = page.locator("#log [data-offset]").evaluate_all(
        "nodes => nodes.map(n => Number(n.dataset.offset))"
    )
    return [int(v) for v in values]
