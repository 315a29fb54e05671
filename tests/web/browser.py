"""The page in a real browser: Playwright (Python) driving Debian's Chromium, and the
gateway as a process of its own (``python -m agenthost web``) that a test can kill and
start again on the same port.

Nothing here sleeps: the gateway's readiness is the line it prints once it accepts
connections; the page's are Playwright's waits on what it shows.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.clis import unavailable

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
START_DEADLINE = 30.0
"""Seconds a gateway gets to print its listening line."""
WAIT_MS = 15000
"""How long a test waits on the page for something to appear (milliseconds)."""

_LISTENING = re.compile(r"^listening on (https?)://([^/\s]+)/\s*$")
_TOKEN = re.compile(r"^token admin: (\S+)\s*$")


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium; skips the test (fails it in CI) without chromium or
    Playwright."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is not installed")
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed: {exc}")
        raise  # not reached
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


class Gateway:
    """``agenthost web`` on 127.0.0.1 for a home; :meth:`kill` and :meth:`start` again
    keep its port, as a restarted gateway would."""

    def __init__(self, home: Path, port: int = 0) -> None:
        self.home = home
        self.port = port
        self.token = ""
        """The admin token printed at the first start of the home."""
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.log = home / "web.log"

    def start(self) -> Gateway:
        """Start the gateway and wait until it prints that it listens."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        argv = [
            sys.executable,
            "-m",
            "agenthost",
            "web",
            "--home",
            str(self.home),
            "--listen",
            f"127.0.0.1:{self.port}",
        ]
        with open(self.log, "a") as err:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self.proc = proc
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=START_DEADLINE)
            except queue.Empty:
                self.kill()
                raise AssertionError(f"the gateway did not listen: {self.logs()}") from None
            if line is None:
                raise AssertionError(f"the gateway exited: {self.logs()}")
            self.output.append(line)
            if m := _TOKEN.match(line):
                self.token = m.group(1)
            if m := _LISTENING.match(line):
                self.url = f"{m.group(1)}://{m.group(2)}/"
                self.port = int(m.group(2).rsplit(":", 1)[1])
                return self

    def kill(self) -> None:
        """SIGKILL the gateway (a crash: nothing closes the page's streams cleanly)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def logs(self) -> str:
        err = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "stdout:\n" + "".join(self.output) + "\nstderr:\n" + err[-4000:]


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


def new_page(browser: Browser, gateway: Gateway, viewport: dict[str, int] = DESKTOP) -> Page:
    """A page of a fresh browser context (no cookie yet) on the gateway's root."""
    context = browser.new_context(viewport=viewport, base_url=gateway.url)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(gateway.url)
    return page


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


def shown_offsets(page: Page) -> list[int]:
    """The stream offsets of the entries the conversation shows, in order."""
    values: list[Any] = page.locator("#log [data-offset]").evaluate_all(
        "nodes => nodes.map(n => Number(n.dataset.offset))"
    )
    return [int(v) for v in values]
