"""Take the screenshots of docs/terminal.md: vim as a terminal agent on the page.

Run by hand from the checkout (it needs /usr/bin/chromium, Playwright and vim)::

    .venv/bin/python tests/web/terminal_shots.py [OUTDIR]

It starts a terminal agent (vim on a small file) in a temporary home, types an edit
into it through the host, starts a gateway, and writes ``terminal-page.png`` (desktop)
and ``terminal-phone.png`` (a 390x844 phone: the screen as text and the keys) into
OUTDIR (default: docs/img). Everything it started ends with it.
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # tests/web and tests, as under pytest

from playwright.sync_api import expect  # noqa: E402

from browser import DESKTOP, PHONE, chromium, log_in, new_page  # noqa: E402
from hosttools import HostProc, kill_tree, start_host, wait_for  # noqa: E402
from webtools import start_gateway  # noqa: E402

NOTES = """\
# Release checklist

- [x] tag the release
- [ ] update the changelog
- [ ] announce it
"""


def screen(host: HostProc) -> list[str]:
    with host.raw() as conn:
        lines: list[str] = conn.request("host.screen")["payload"]["lines"]
    return lines


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="ah-shots-", dir="/tmp"))
    (home / "notes.md").write_text(NOTES)
    vim = ["vim", "-u", "DEFAULTS", "-i", "NONE", "-n", "+syntax on", str(home / "notes.md")]
    hosts: list[HostProc] = []
    gateway = None
    try:
        host = start_host(home, "notes", "--agent", "pty", "--size", "100x28", command=vim)
        hosts.append(host)
        wait_for(lambda: "# Release checklist" in screen(host), what="vim's screen")
        with host.raw() as conn:
            conn.request("host.input", {"data": "Go- [ ] thank the contributors\x1b"})
        wait_for(lambda: "-- INSERT --" not in screen(host), what="the edit")
        gateway = start_gateway(home)
        assert gateway.token
        with chromium() as browser:
            for name, viewport in (("terminal-page.png", DESKTOP), ("terminal-phone.png", PHONE)):
                page = new_page(browser, gateway, viewport)
                log_in(page, gateway.token)
                page.locator('.agent[data-key="notes"] a').click()
                if viewport is PHONE:  # the screen as text, the keys below
                    expect(page.locator("#screen-text")).to_contain_text("thank the")
                else:
                    expect(page.locator("#terminal[data-ready]")).to_be_attached()
                    page.wait_for_function(
                        "() => document.getElementById('terminal')"
                        ".terminalView.applied().length > 0"
                    )
                page.wait_for_timeout(300)  # the renderer's last paint: a picture only
                page.screenshot(path=str(outdir / name))
                page.context.close()
                print(outdir / name)
    finally:
        if gateway is not None:
            gateway.stop(signal.SIGTERM)
        for host in hosts:
            kill_tree(host.proc)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "docs" / "img")
