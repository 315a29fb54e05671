"""``agenthost notify ...``: the notices the daemon sends when an agent needs a person."""

from __future__ import annotations

import click


@click.group()
def notify() -> None:
    """Notifications: test the channels of config.toml, read what was sent."""
