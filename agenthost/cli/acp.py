"""``agenthost acp``: a hosted agent, served to an ACP editor on stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agenthost.cli.common import complete_agent_ids, handle_errors, home_option, remote_option
from agenthost.log import LEVELS
from agenthost.remote import Remote


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS),
    default="warning",
    show_default=True,
    help="Log verbosity (logs go to stderr).",
)
@remote_option
@home_option
@handle_errors
def acp(agent_id: str, log_level: str, home: Path | None, remote: Remote | None) -> None:
    """Speak ACP (the Agent Client Protocol) on stdin/stdout, as the agent AGENT_ID.

    \b
    Configure an editor (Zed, Neovim...) to run `agenthost acp ID` as an agent:
    it attaches to the long-lived agent ID, whatever its kind, as one ACP
    session. session/load replays the conversation, then updates stream live;
    prompts, cancels and permission answers go to the agent's host. It exits
    when the editor closes stdin; the agent keeps running. See docs/acp.md.
    With --remote, the agent runs on that machine (reached over ssh).
    """
    from agenthost.acp.editor import run
    from agenthost.log import configure_logging
    from agenthost.paths import validate_agent_id

    validate_agent_id(agent_id)
    configure_logging(log_level)
    sys.exit(run(agent_id, home, remote))
