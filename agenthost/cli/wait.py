"""``agenthost wait``: block a script until an agent reaches a state."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from agenthost.cli.common import (
    Exit,
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
    remote_option,
)
from agenthost.cli.params import FloatRange
from agenthost.protocol import AgentState
from agenthost.remote import Remote
from agenthost.textsafe import escape

STATES = [s.value for s in AgentState if s is not AgentState.STARTING]


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option(
    "--state",
    "states",
    type=click.Choice(STATES),
    multiple=True,
    required=True,
    help="The state to wait for (repeat for any of several).",
)
@click.option(
    "--timeout",
    type=FloatRange(min=0),
    default=None,
    help="Give up after this many seconds (default: wait as long as it takes).",
)
@remote_option
@home_option
@json_option
@handle_errors
def wait(
    agent_id: str,
    states: tuple[str, ...],
    timeout: float | None,
    home: Path | None,
    remote: Remote | None,
    as_json: bool,
) -> None:
    """Wait until the agent is in one of the given states.

    \b
    Exit status: 0 the state was reached (now or already); 10 the agent ended in
    another state (it cannot reach it any more); 8 the timeout passed; 3 no host.
    """
    import uvloop

    remember_agent_id(agent_id)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        state, code = runner.run(wait_for_state(agent_id, home, set(states), timeout, remote))
    if as_json:
        print_json({"ok": code is Exit.OK, "agent_id": agent_id, "state": state})
    else:
        click.echo(f"{agent_id}: {escape(state)}")
    sys.exit(int(code))


async def wait_for_state(
    agent_id: str,
    home: Path | None,
    states: set[str],
    timeout: float | None,
    remote: Remote | None = None,
) -> tuple[str, Exit]:
    """Follow the agent's state events until one of ``states``, a final state, or the
    timeout; return the state and the exit status."""
    from agenthost.client import AsyncClient
    from agenthost.errors import RequestTimeout

    final = {AgentState.DONE.value, AgentState.ERROR.value}
    async with AsyncClient(agent_id, home=home, remote=remote) as client:
        # attach first, then read the state: no change can slip in between
        sub = await client.attach(10**18)
        state = (await client.status()).agent.state
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while state not in states:
            if state in final:
                return state, Exit.AGENT_FAILED
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return state, Exit.TIMEOUT
            try:
                event = await sub.client.recv_event(left)
            except RequestTimeout:
                return state, Exit.TIMEOUT
            if event.type == "state" and event.state:
                state = event.state
        return state, Exit.OK
