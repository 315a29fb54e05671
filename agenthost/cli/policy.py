"""``agenthost policy ...`` (the approval policy) and ``agenthost config ...`` (the
home's config.toml)."""

from __future__ import annotations

import click


@click.group()
def policy() -> None:
    """The approval policy of config.toml: what is allowed or denied without asking."""


@click.group()
def config() -> None:
    """The home's configuration file, <home>/config.toml."""
