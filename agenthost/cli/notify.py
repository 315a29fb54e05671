"""``agenthost notify ...``: the notices the daemon sends when an agent needs a person."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json


@click.group()
def notify() -> None:
    """Notifications: test the channels of config.toml, read what was sent."""


@notify.command("test", short_help="Send a test notice to each channel now.")
@click.option(
    "--channel", "only", default=None, metavar="NAME", help="Only this channel of config.toml."
)
@home_option
@json_option
@handle_errors
def test_command(only: str | None, home: Path | None, as_json: bool) -> None:
    """Send a test notice to each channel now (from here, not the daemon) and say how
    each went; the exit status is 1 if any failed."""
    import asyncio
    import time

    from agenthost.attention.channels import close_http, deliver
    from agenthost.attention.notices import sample_notice, with_links
    from agenthost.config import load_config
    from agenthost.errors import ConfigError
    from agenthost.paths import resolve_home

    config = load_config(resolve_home(home))
    channels = config.notify.channels
    if not channels:
        raise ConfigError(
            "config.toml has no notification channel",
            hint="add one under [notify.channels.NAME] (see docs/notify.md)",
        )
    if only is not None:
        if only not in channels:
            known = ", ".join(sorted(channels))
            raise ConfigError(f"no channel {only!r} in config.toml; channels: {known}")
        channels = {only: channels[only]}
    # no signing key is needed: a test notice has no request, so no approval links
    notice = with_links(
        sample_notice(time.time()), config.web.public_url, b"", now=time.time(), ttl=0
    )

    async def send_all() -> list[Any]:
        try:
            return await asyncio.gather(*(deliver(c, notice) for c in channels.values()))
        finally:
            await close_http()

    results = dict(zip(channels, asyncio.run(send_all()), strict=True))
    if as_json:
        print_json(
            {
                "ok": all(r.ok for r in results.values()),
                "channels": [
                    {"channel": name, "type": channels[name].type, "ok": r.ok, "why": r.why}
                    for name, r in results.items()
                ],
            }
        )
    else:
        for name, r in results.items():
            kind = channels[name].type
            click.echo(f"{name} ({kind}): sent" if r.ok else f"{name} ({kind}): failed: {r.why}")
    if not all(r.ok for r in results.values()):
        sys.exit(1)


@notify.command("log", short_help="The notices sent (or not), oldest first.")
@click.argument("agent_id", required=False)
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(1, 10_000), help="How many."
)
@home_option
@json_option
@handle_errors
def log_command(agent_id: str | None, limit: int, home: Path | None, as_json: bool) -> None:
    """The notices sent (or not) and how each delivery went, oldest first."""
    from agenthost.attention.ledger import Ledger, ledger_path
    from agenthost.paths import resolve_home
    from agenthost.timefmt import rfc3339

    resolved = resolve_home(home)
    entries = []
    if ledger_path(resolved).exists():
        ledger = Ledger(resolved, readonly=True)
        try:
            entries = ledger.entries(agent_id, limit)
        finally:
            ledger.close()
    if as_json:
        print_json({"notices": [e.to_json() | {"at": rfc3339(e.time)} for e in entries]})
        return
    if not entries:
        click.echo("no notices recorded" + (f" for {agent_id}" if agent_id else ""))
        return
    from agenthost.textsafe import escape

    for e in entries:
        how = e.status + (f" after {e.attempts} attempts" if e.attempts > 1 else "")
        why = f": {e.why}" if e.why and e.status != "sent" else ""
        # a notice's title quotes the agent (the command it asks to run)
        line = f"{e.agent}  {e.kind}  {e.channel}  {how}{why}  {e.title}"
        click.echo(f"{rfc3339(e.time)}  {escape(line)}")
