"""Take the screenshots of docs/tour.md: the tour's agent asking, its notice's Approve
link, and the answer, on a phone.

Run by hand from the checkout (it needs /usr/bin/chromium and Playwright)::

    .venv/bin/python tests/web/tour_shots.py [OUTDIR]

It does what the tour does, in a temporary home: a daemon, ``agenthost run`` of the
demo agent ``fix-login``, a first message, a token ``phone``, ``agenthost web``, a
config.toml with an ntfy channel and the gateway's address, then ``/ask``. An HTTP
server on 127.0.0.1 (tests/notifysink.py) takes ntfy.sh's place and receives the
notice; its Approve button's link is opened as the phone would. It writes, at a
390x844 phone's size, into OUTDIR (default: docs/img): ``tour-overview.png`` (the agent
waits for you), ``tour-agent.png`` (its question), ``tour-link.png`` (the notice's
Approve link) and ``tour-approved.png`` (after the tap). Everything it started ends
with it.
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # tests/web and tests, as under pytest

from notifysink import ntfy_actions, sink  # noqa: E402
from playwright.sync_api import expect  # noqa: E402
from screenshots import settle  # noqa: E402

from browser import PHONE, chromium, log_in, new_page, open_agent  # noqa: E402
from daemontools import daemon_world  # noqa: E402
from webtools import start_gateway  # noqa: E402

AGENT = "fix-login"
SHOTS = ["tour-overview.png", "tour-agent.png", "tour-link.png", "tour-approved.png"]


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="ah-tour-", dir="/tmp"))
    gateway = None
    try:
        with daemon_world(home) as world, sink() as ntfy:

            def agenthost(*args: str) -> str:
                done = world.cli(*args)
                assert done.returncode == 0, f"agenthost {' '.join(args)}: {done.stderr}"
                return done.stdout

            world.start_daemon()
            agenthost("run", "--agent-id", AGENT, "--restart", "on-failure")
            agenthost("send", AGENT, "Check that the email field rejects spaces")
            agenthost("wait", AGENT, "--state", "idle")
            token = agenthost("web", "token", "add", "phone", "--scope", "respond").strip()
            gateway = start_gateway(home)
            (home / "config.toml").write_text(
                '[notify]\ndelay = "1s"\n\n'
                f'[notify.channels.phone]\ntype = "ntfy"\nurl = "{ntfy.url}/fix-login-7f3a"\n\n'
                f'[web]\npublic_url = "{gateway.url.rstrip("/")}"\n'
            )
            agenthost("send", AGENT, "/ask")
            (push,) = ntfy.wait(1, "/fix-login-7f3a")
            approve = ntfy_actions(push.headers["Actions"])["Approve"]

            with chromium() as browser:
                phone = new_page(browser, gateway, PHONE)
                log_in(phone, token)
                expect(phone.locator(".agent.needs-you")).to_have_count(1)
                settle(phone)
                phone.screenshot(path=str(outdir / "tour-overview.png"))
                open_agent(phone, AGENT)
                expect(phone.locator(".entry.permission button.allow")).to_be_visible()
                settle(phone)
                phone.screenshot(path=str(outdir / "tour-agent.png"))
                phone.context.close()

                link = new_page(browser, gateway, PHONE)  # no login: the link is enough
                link.goto(approve)
                expect(link.locator("button.allow")).to_be_visible()
                link.screenshot(path=str(outdir / "tour-link.png"))
                link.locator("button.allow").click()
                expect(link.locator("#outcome")).to_have_text("Allowed")
                link.screenshot(path=str(outdir / "tour-approved.png"))
                link.context.close()
            agenthost("wait", AGENT, "--state", "idle")
            print(agenthost("history", AGENT, "--limit", "3"), end="")
    finally:
        if gateway is not None:
            gateway.stop(signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)
    for name in SHOTS:
        print(outdir / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "docs" / "img")
