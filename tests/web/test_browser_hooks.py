"""The overview's "Hooks" section (Chromium, a real gateway): hidden without hooks,
each hook's target and events once one is added (GET /api/hooks, polled), an unusable
one said so."""

from __future__ import annotations

import subprocess
from pathlib import Path

from browser import log_in
from hosttools import DEADLINE, PY
from webtools import Gateway

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass


def hook_add(home: Path, *args: str) -> None:
    done = subprocess.run(
        [PY, "-m", "agenthost", "hook", "add", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr


def test_the_hooks_section_shows_each_hook_and_hides_without_any(
    page: Page, gateway: Gateway
) -> None:
    log_in(page, str(gateway.token))
    expect(page.locator("#hooks-section")).to_be_hidden()
    hook_add(gateway.home, "pr", "--agent-id", "reviewer", "--event", "pull_request.opened",
             "Review {pull_request.html_url}")  # fmt: skip
    hook_add(gateway.home, "nightly", "--agent-id", "night", "--new", "--agent", "demo",
             "Build {ref}")  # fmt: skip
    hook_add(gateway.home, "fresh", "--agent-id", "f", "--new", "Look {a}")
    (gateway.home / "webhooks" / "nightly.toml").chmod(0o666)
    page.reload()  # (the section asks every 15 s; a reload asks now)
    expect(page.locator("#hooks-section")).to_be_visible()
    pr = page.locator('.hook[data-name="pr"]')
    expect(pr).to_contain_text("→ reviewer (pull_request.opened)")
    expect(page.locator('.hook[data-name="fresh"]')).to_contain_text("→ a new demo agent each")
    nightly = page.locator('.hook[data-name="nightly"]')
    expect(nightly).to_contain_text("unusable")
    expect(nightly).to_contain_text("writable by others")
