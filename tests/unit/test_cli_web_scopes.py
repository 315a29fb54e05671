"""The scopes the CLI offers are the gateway's (agenthost.web.access)."""

from __future__ import annotations

from agenthost.cli import web as cli_web
from agenthost.web.access import SCOPES


def test_the_cli_offers_every_scope() -> None:
    assert cli_web.SCOPES == SCOPES
