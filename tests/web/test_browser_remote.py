"""The page with an agent on another machine: ``agenthost web --remote`` through a real
OpenSSH server on 127.0.0.1 (tests/sshtools.py; the "remote" machine is this
one with a home of its own). The overview names the machine; the agent's key
(``ID@HOST:PORT``) survives the hash route and the API paths; a message gets its
answer over ssh; a permission request is answered from the page."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from browser import checked_page, log_in, open_agent
from hosttools import HostProc, kill_tree, start_host
from sshtools import Sshd
from webtools import Gateway

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass


@pytest.fixture
def far_home() -> Iterator[Path]:
    """The remote machine's home, with a demo agent ``r1``."""
    path = Path(tempfile.mkdtemp(prefix="ah-far-", dir="/tmp"))
    host = start_host(path, "r1")
    try:
        yield path
    finally:
        kill_tree(host.proc)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def page(
    browser: Browser,
    sshd: Sshd,
    far_home: Path,
    gateway_factory: Callable[..., Gateway],
    host_factory: Callable[..., HostProc],
) -> Iterator[Page]:
    host_factory("l1")
    gateway = gateway_factory("--remote", sshd.remote, env=sshd.env(far_home))
    assert gateway.token
    with checked_page(browser, gateway) as p:
        log_in(p, gateway.token)
        yield p


def test_a_remote_agent_is_shown_with_its_machine_and_answers(page: Page, sshd: Sshd) -> None:
    key = f"r1@{sshd.remote}"
    remote = page.locator(f'.agent[data-key="{key}"]')
    expect(remote.locator(".machine")).to_have_text(f"@ {sshd.remote}")
    expect(remote.locator(".name")).to_have_text("r1")
    expect(page.locator('.agent[data-key="l1"] .machine')).to_have_count(0)

    open_agent(page, key)
    assert "#/agent/r1%40127.0.0.1%3A" in page.url
    expect(page.locator("#agent-state")).to_have_text("idle")
    page.locator("#input").fill("over the wire")
    page.locator("#input").press("Enter")
    expect(page.locator(".entry.role-assistant").last).to_contain_text(
        'You said "over the wire". That is 3 words.'
    )

    page.locator("#input").fill("/ask")
    page.locator("#input").press("Enter")
    card = page.locator(".entry.permission").last
    card.locator("button.allow").click()
    expect(card.locator(".outcome")).to_have_text("allowed")
    expect(page.locator(".entry.role-assistant").last).to_have_text(
        re.compile("Done: permission granted")
    )

    page.reload()  # the route holds the key: the same agent again
    expect(page.locator(".entry.role-user", has_text="over the wire")).to_have_count(1)
