"""``agenthost tui ID [--back]``: a structured agent's own TUI on the same session.

Thin: the daemon does the switch (``daemon.switch``, :mod:`agenthost.daemon.switching`);
this command asks for it and then attaches to the terminal agent (``agenthost attach``
on a terminal agent is a raw pass-through; Ctrl-] detaches and leaves the TUI running).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
)
from agenthost.cli.params import FloatRange
from agenthost.paths import validate_agent_id


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option(
    "--back",
    is_flag=True,
    help="Return to the structured agent now (the TUI is stopped gracefully).",
)
@click.option(
    "--no-attach", is_flag=True, help="Switch only; attach later with agenthost attach ID."
)
@click.option(
    "--timeout",
    type=FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds the host being left has to stop before it is killed.",
)
@home_option
@json_option
@handle_errors
def tui(
    agent_id: str,
    back: bool,
    no_attach: bool,
    timeout: float,
    home: Path | None,
    as_json: bool,
) -> None:
    """Open the real TUI of a structured Claude Code or Codex agent, on its session.

    \b
    The daemon stops the structured agent (refused while a turn runs or a
    permission request waits: exit 6) and runs, under the same id and journal,
    `claude --resume SESSION` or `codex resume SESSION` in a terminal; then this
    command attaches to it (Ctrl-] detaches; the TUI keeps running). When the TUI
    ends (you quit it), the daemon starts the structured agent again on the
    newest session, so send, the page and the policy go on where you left it.
    --back returns to the structured agent without waiting for the TUI to end.

    \b
    Exit status: as attach's; 2 for an agent that has no TUI or no session yet,
    6 while it is busy, 3 when the daemon does not know the agent.
    """
    import uvloop

    from agenthost.daemon.client import DaemonClient
    from agenthost.daemon.protocol import SwitchResponse
    from agenthost.daemon.tuispec import check_kind, check_switchable
    from agenthost.errors import Busy, HostNotFound
    from agenthost.paths import resolve_home

    remember_agent_id(agent_id)
    validate_agent_id(agent_id)
    root = resolve_home(home)
    to = "structured" if back else "tui"

    async def ask() -> SwitchResponse:
        async with DaemonClient(root, autostart=True, request_timeout=timeout + 120) as client:
            known = {a.agent_id: a for a in await client.list()}.get(agent_id)
            if known is None:
                raise HostNotFound(
                    f"the daemon knows no agent {agent_id!r}",
                    hint="agenthost list shows the agents; start one with agenthost run "
                    "--agent claude|codex",
                )
            if not back and not known.tui:  # the daemon checks again; here for the hints
                check_switchable(check_kind(known.spec), known.session_id)
            try:
                return await client.switch(agent_id, to, timeout=timeout)
            except Busy as exc:
                raise Busy(
                    exc.message,
                    hint=f"wait until it is idle (agenthost wait {agent_id} idle), answer "
                    f"its request (agenthost pending {agent_id}), or interrupt it "
                    f"(agenthost interrupt {agent_id})",
                ) from None

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(ask())
    if as_json:
        print_json({"ok": True, **result.model_dump(mode="json", exclude_none=True)})
        return
    session = f" on session {result.session_id}" if result.session_id else ""
    if back:
        if result.switched:
            click.echo(f"{agent_id} runs as a structured agent again{session}")
        else:
            click.echo(f"{agent_id} runs as a structured agent already (not in its TUI)")
        return
    if result.switched:
        click.echo(f"{agent_id} runs its TUI{session} (agenthost tui {agent_id} --back returns)")
    if no_attach or not (sys.stdin.isatty() and sys.stdout.isatty()):
        if not result.switched:
            click.echo(f"{agent_id} runs its TUI already{session}")
        click.echo(f"attach to it: agenthost attach {agent_id}")
        return
    from agenthost.cli.attach import attach_loop

    code = attach_loop(
        agent_id, home=root, offset=None, follow=True, as_json=False, read_only=False
    )
    sys.exit(int(code))
