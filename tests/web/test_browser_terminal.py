"""A terminal agent (``--agent pty``) on the page, in Debian's Chromium: xterm.js
painted from the host's screen and then live, its buffer (read from the page) equal to
``host.screen``'s lines; keys typed on the page reach the program (byte for byte: the
tty agent logs what it reads); the browser's size becomes the terminal's; a gateway
killed and started again loses and repeats no event; a read-only token cannot type;
what a hostile program writes does nothing to the page; a phone shows the screen as
text with an input line and the keys a TUI needs.

Every page here is checked: no script error, and no Content-Security-Policy violation
(a ``securitypolicyviolation`` listener, installed before the page's scripts run, and
the console's refusals), so xterm.js is shown to need nothing the policy forbids.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_web_terminal import TTY_AGENT, start_tty, typed

from browser import DESKTOP, PHONE, WAIT_MS, log_in, start_again
from hosttools import PY, HostProc, wait_for
from webtools import Gateway, GatewayFactory

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # the browser fixture skips the tests (fails them in CI)
    pass

WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample || ""}`);
});
"""


class Checked:
    """A logged-in page whose errors and CSP violations fail the test at its end."""

    def __init__(self, browser: Browser, gateway: Gateway, viewport: dict[str, int]) -> None:
        self.context = browser.new_context(viewport=viewport, base_url=gateway.url)
        self.context.set_default_timeout(WAIT_MS)
        self.context.add_init_script(WATCH_CSP)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"console: {m.text}")
                if m.type == "error" and "Content Security Policy" in m.text
                else None
            ),
        )
        self.page.on("dialog", lambda d: self.errors.append(f"dialog: {d.message}"))
        self.page.goto(gateway.url)

    def check(self) -> None:
        violations = self.page.evaluate("() => window.__violations")
        assert violations == [], violations
        assert not self.errors, self.errors


@pytest.fixture
def pages(browser: Browser, gateway: Gateway) -> Iterator[Callable[..., Page]]:
    """``pages(viewport=DESKTOP, token=admin)``: a checked page, logged in."""
    made: list[Checked] = []

    def make(viewport: dict[str, int] = DESKTOP, token: str | None = None) -> Page:
        checked = Checked(browser, gateway, viewport)
        made.append(checked)
        log_in(checked.page, token or gateway.token or "")
        return checked.page

    yield make
    try:
        for checked in made:
            checked.check()
    finally:
        for checked in made:
            checked.context.close()


def open_terminal(page: Page, key: str = "t1") -> None:
    """Open the agent's page and wait for xterm.js to be painted from the screen."""
    page.locator(f'.agent[data-key="{key}"] a').click()
    expect(page.locator("#terminal[data-ready]")).to_be_attached()
    page.wait_for_function(
        "() => document.getElementById('terminal').terminalView.applied().length > 0"
    )


def xterm(page: Page, what: str = "lines") -> Any:
    """What xterm.js holds (``lines``, ``size``, ``cursor``, ``applied``), once every
    write given to it is parsed."""
    return page.evaluate(
        """async (what) => {
            const view = document.getElementById("terminal").terminalView;
            await view.pending();
            return view[what]();
        }""",
        what,
    )


def host_screen(gateway: Gateway, key: str = "t1") -> dict[str, Any]:
    screen: dict[str, Any] = gateway.client().get(f"/api/agents/{key}/screen").json()
    return screen


def same_screen(page: Page, gateway: Gateway, key: str = "t1") -> bool:
    """Whether xterm.js shows what the host's emulator holds (the lines, the size)."""
    screen = host_screen(gateway, key)
    size = xterm(page, "size")
    return bool(
        xterm(page) == screen["lines"]
        and (size["cols"], size["rows"]) == (screen["cols"], screen["rows"])
    )


def wait_same(page: Page, gateway: Gateway, key: str = "t1") -> None:
    try:
        wait_for(lambda: same_screen(page, gateway, key))
    except AssertionError:
        raise AssertionError(
            f"xterm.js {xterm(page)} != host {host_screen(gateway, key)['lines']}"
        ) from None


def test_the_page_shows_the_hosts_screen_and_types_into_it(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    page = pages()
    open_terminal(page)
    # this browser's size became the terminal's (the fit addon, then the latest policy)
    wait_for(lambda: host_screen(gateway)["cols"] > 80)
    wait_for(lambda: host_screen(gateway)["lines"][1] == f"size: {cols_rows(gateway)}")
    wait_same(page, gateway)
    page.locator("#terminal").click()
    page.keyboard.type("hi é")
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Control+c")
    wait_for(lambda: typed(log) == "hi é\r\x1b[A\x03".encode())
    wait_same(page, gateway)
    assert any(line.startswith("got: ") and line.endswith("<03>") for line in xterm(page))


def cols_rows(gateway: Gateway) -> str:
    size = gateway.client().get("/api/agents/t1").json()["agent"]["terminal"]
    return f"{size['cols']}x{size['rows']}"


def test_a_resize_of_the_window_and_of_another_client(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    start_tty(host_factory, tmp_path / "typed")
    page = pages()
    open_terminal(page)
    wait_for(lambda: host_screen(gateway)["cols"] > 80)
    wide = host_screen(gateway)["cols"]
    page.set_viewport_size({"width": 900, "height": 600})
    wait_for(lambda: 0 < host_screen(gateway)["cols"] < wide)
    wait_for(lambda: host_screen(gateway)["lines"][1] == f"size: {cols_rows(gateway)}")
    wait_same(page, gateway)
    # another client takes the terminal to its size: the page follows (terminal_size).
    # (Not narrower than the first screen's 80 columns: its dump writes lines' trailing
    # blanks as spaces, which xterm.js reflows on a narrower terminal and the host's
    # emulator does not.)
    other = gateway.client().post("/api/agents/t1/resize", json={"cols": 84, "rows": 12})
    assert other.json() == {"cols": 84, "rows": 12}
    wait_for(lambda: xterm(page, "size") == {"cols": 84, "rows": 12})
    wait_same(page, gateway)
    # typing on the page takes it back to the page's size
    page.locator("#terminal").click()
    page.keyboard.type("x")
    wait_for(lambda: typed(tmp_path / "typed") == b"x")
    wait_for(lambda: host_screen(gateway)["cols"] != 84)
    wait_same(page, gateway)


def test_a_gateway_killed_and_started_again_loses_and_repeats_nothing(
    pages: Callable[..., Page],
    gateway: Gateway,
    gateway_factory: GatewayFactory,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    log = tmp_path / "typed"
    host = start_tty(host_factory, log)
    page = pages()
    open_terminal(page)
    wait_same(page, gateway)
    gateway.stop(signal.SIGKILL)
    expect(page.locator("#conn")).to_have_text("reconnecting…")
    # the program paints while nobody watches: ten lines through the host directly
    with host.raw() as conn:
        for n in range(10):
            assert conn.request("host.input", {"data": f"k{n}"})["success"]
    wait_for(lambda: typed(log) == b"".join(f"k{n}".encode() for n in range(10)))
    again = start_again(gateway, gateway_factory)
    again.token = gateway.token  # the home's admin token (printed by the first start only)
    expect(page.locator("#conn")).to_be_hidden()
    wait_same(page, again)
    # each offset once, in order, after the screen it started from
    applied = xterm(page, "applied")
    assert isinstance(applied[0], str) and applied[0].startswith("screen ")
    offsets = applied[1:]
    assert all(isinstance(o, int) for o in offsets), applied
    assert offsets == sorted(set(offsets)), applied
    assert offsets[0] == int(applied[0].split()[1]) + 1
    assert offsets == list(range(offsets[0], offsets[-1] + 1)), applied


def test_a_read_only_token_watches_and_cannot_type(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    viewer = gateway.add_token("viewer", "read")
    page = pages(token=viewer)
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    open_terminal(page)
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#signal")).to_be_hidden()
    wait_same(page, gateway)
    page.locator("#terminal").click()
    page.keyboard.type("nope")
    page.keyboard.press("Enter")
    # the admin types after it, through the API: only the admin's key arrives
    gateway.client().post("/api/agents/t1/input", json={"data": "A"})
    wait_for(lambda: typed(log) == b"A")
    wait_same(page, gateway)
    assert not [url for url in posted if "/api/agents/" in url], posted
    assert host_screen(gateway)["cols"] == 80  # a watcher never resizes


def test_hostile_bytes_do_nothing_to_the_page(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    log = tmp_path / "typed"
    host_factory(
        "t1",
        "--agent",
        "pty",
        command=[PY, TTY_AGENT, "--hostile"],
        env={"TTY_AGENT_LOG": str(log)},
    )
    page = pages()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.evaluate("() => navigator.clipboard.writeText('what the person copied')")
    popups: list[str] = []
    page.context.on("page", lambda p: popups.append(p.url))
    open_terminal(page)
    page.locator("#terminal").click()
    page.keyboard.type("h")  # the program writes its hostile bytes, live
    wait_for(lambda: any("hostile done" in line for line in xterm(page)))
    # the title is text; nothing ran, nothing was made of markup
    expect(page.locator("#term-title")).to_have_text("</title><script>alert(2)</script>")
    assert page.title() == "agenthost"
    assert (
        page.evaluate(
            "() => document.querySelectorAll("
            "'img, iframe, object, embed, script:not([src])').length"
        )
        == 0
    )
    assert page.locator("#term-title *").count() == 0
    # the link to javascript: opens nothing
    link = page.locator(".xterm-rows span", has_text="click me").first
    expect(link).to_be_visible()  # painted at the renderer's next frame (late under load)
    # where it is in the viewport (the renderer may replace the span at any frame, and
    # Playwright's bounding_box then answers None: the page's own rect does not race)
    box = link.evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; }"
    )
    x, y = box[0] + box[2] / 2, box[1] + box[3] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    # no clipboard write (OSC 52), and no answer to any query was typed into the program:
    # the next key the program reads is the one typed now (into the terminal, focused
    # again: the click on the link may have left the focus on the page)
    page.locator("#terminal").click()
    page.keyboard.type("z")
    wait_for(lambda: typed(log).endswith(b"z"))
    assert typed(log) == b"hz"
    assert page.evaluate("() => navigator.clipboard.readText()") == "what the person copied"
    assert popups == []
    assert page.url.startswith(gateway.url)
    wait_same(page, gateway)


def test_vim_in_the_page_is_the_hosts_screen(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    vim = shutil.which("vim")
    if vim is None:
        pytest.skip("vim is not installed")
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(f"line {n}: {'é' * (n % 3)} 漢字 tab\there\n" for n in range(40)))
    host_factory(
        "t1",
        "--agent",
        "pty",
        command=[vim, "-u", "NONE", "-i", "NONE", "-N", "-n", str(notes)],
    )
    page = pages()
    open_terminal(page)
    wait_for(lambda: host_screen(gateway)["lines"][0].startswith("line 0"))
    wait_same(page, gateway)
    page.locator("#terminal").click()
    page.keyboard.type("Gohello from the page")
    page.keyboard.press("Escape")
    page.keyboard.type(":w\n")
    wait_for(lambda: notes.read_text().endswith("hello from the page\n"))
    wait_same(page, gateway)


def test_a_phone_shows_the_screen_as_text_and_its_keys_type(
    pages: Callable[..., Page],
    gateway: Gateway,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    page = pages(PHONE)
    page.locator('.agent[data-key="t1"] a').click()
    text = page.locator("#screen-text")

    def shown() -> bool:
        return bool(text.text_content() == "\n".join(host_screen(gateway)["lines"]))

    wait_for(shown)
    assert "tty agent ready" in (text.text_content() or "")
    page.locator("#term-input").fill("ls -l")
    page.locator("#term-input").press("Enter")
    for key in ("esc", "tab", "left", "up", "down", "right", "ctrl-c"):
        page.locator(f"#key-{key}").click()
    page.locator("#key-enter").click()
    wait_for(lambda: typed(log).endswith(b"\r"))
    assert typed(log) == b"ls -l\r\x1b\t\x1b[D\x1b[A\x1b[B\x1b[C\x03\r"
    wait_for(shown)
    assert "<03>" in (text.text_content() or "")
    # the phone never resized the terminal: it only shows it
    assert host_screen(gateway)["cols"] == 80


def test_the_policy_watch_sees_a_violation(
    browser: Browser, gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    """The check every page here ends with is not empty by construction: an inline
    script is refused and seen; xterm.js's page shows none."""
    start_tty(host_factory, tmp_path / "typed")
    checked = Checked(browser, gateway, DESKTOP)
    try:
        log_in(checked.page, gateway.token or "")
        open_terminal(checked.page)
        assert checked.page.evaluate("() => window.__violations") == []
        checked.page.evaluate(
            """() => {
                const s = document.createElement("script");
                s.textContent = "window.__ran = 1";
                document.body.appendChild(s);
            }"""
        )
        wait_for(lambda: checked.page.evaluate("() => window.__violations.length") == 1)
        assert checked.page.evaluate("() => window.__violations[0]").startswith("script-src")
        assert checked.page.evaluate("() => window.__ran") is None
    finally:
        checked.context.close()


def test_events_the_host_no_longer_keeps_are_repainted_from_its_screen(
    pages: Callable[..., Page],
    gateway: Gateway,
    gateway_factory: GatewayFactory,
    host_factory: Callable[..., HostProc],
    tmp_path: Path,
) -> None:
    """A ring of 4 events and no journal: what the program painted while the page was
    away is gone from the stream (a ``truncated`` event), so the page paints the host's
    screen again and goes on after it."""
    log = tmp_path / "typed"
    host = start_tty(host_factory, log, "t1", "--ring-size", "4", "--no-journal")
    page = pages()
    open_terminal(page)
    wait_same(page, gateway)
    gateway.stop(signal.SIGKILL)
    with host.raw() as conn:
        for n in range(10):  # one at a time: each its own line, its own event
            assert conn.request("host.input", {"data": f"k{n}"})["success"]
            wait_for(lambda n=n: typed(log).endswith(f"k{n}".encode()))
    again = start_again(gateway, gateway_factory)
    again.token = gateway.token
    wait_same(page, again)
    applied = xterm(page, "applied")
    screens = [i for i, a in enumerate(applied) if isinstance(a, str)]
    assert len(screens) == 2, applied
    second = int(applied[screens[1]].split()[1])
    after = applied[screens[1] + 1 :]
    assert after == list(range(second + 1, second + 1 + len(after))), applied
