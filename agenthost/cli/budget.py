"""``agenthost budget`` (read, raise, lower or clear an agent's budget) and ``agenthost
resume`` (resume an agent paused for a usage limit): the governance verbs (protocol
1.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
    remote_option,
)
from agenthost.cli.params import USD
from agenthost.remote import Remote
from agenthost.textsafe import escape


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option("--usd", type=USD, default=None, help="The USD limit, in dollars (0 to 1e9).")
@click.option(
    "--tokens", type=click.IntRange(min=0, max=10**15), default=None, help="The token limit."
)
@click.option(
    "--clear",
    type=click.Choice(["usd", "tokens"]),
    multiple=True,
    help="Remove this limit (repeatable).",
)
@remote_option
@home_option
@json_option
@handle_errors
def budget(
    agent_id: str,
    usd: float | None,
    tokens: int | None,
    clear: tuple[Literal["usd", "tokens"], ...],
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Show or change an agent's budget: agenthost budget ID [--usd X] [--tokens N]

    Without an option, shows the limits and what the agent spent. An agent over its
    budget was interrupted and refuses sends (`agenthost send` exits 12); raising or
    clearing the limit it reached lets them through again. The change is recorded in
    the agent's history.
    """
    from agenthost.client import Client

    if (usd is not None and "usd" in clear) or (tokens is not None and "tokens" in clear):
        raise click.UsageError("a limit cannot be both set and cleared")
    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.budget(usd=usd, tokens=tokens, clear=list(clear), actor="cli")
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    from agenthost.governance.budget import usd as dollars

    limit_usd = "none" if result.usd is None else dollars(result.usd)
    limit_tokens = "none" if result.tokens is None else str(result.tokens)
    click.echo(f"usd:    {limit_usd} (spent {dollars(result.spent_usd)})")
    click.echo(f"tokens: {limit_tokens} (used {result.spent_tokens})")
    if result.exceeded:
        click.echo(f"over budget: {escape(result.exceeded)}; sends are refused", err=True)


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@remote_option
@home_option
@json_option
@handle_errors
def resume(agent_id: str, home: Path | None, remote: Remote | None, as_json: bool) -> None:
    """Resume an agent paused for a usage limit now: agenthost resume ID

    A turn that failed on a usage limit that says when it resets pauses the agent
    (state paused); the host resumes it by itself at that time, telling it what was
    interrupted. This resumes it now. An agent that is not paused is left alone.
    """
    from agenthost.client import Client

    remember_agent_id(agent_id)
    with Client(agent_id, home=home, remote=remote) as client:
        result = client.resume()
    if as_json:
        print_json(result.model_dump(mode="json"))
    elif result.resumed:
        click.echo(f"resumed {agent_id}: it was told what was interrupted")
    else:
        state = escape(result.state)
        click.echo(f"{agent_id} is not paused (state {state}): nothing to resume", err=True)
