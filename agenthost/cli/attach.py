"""``agenthost attach``: follow an agent's stream in the terminal, and talk to it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agenthost.cli.common import Exit, handle_errors, home_option, json_option, use_color

if TYPE_CHECKING:
    from agenthost.cli.render import EventRenderer
    from agenthost.client import AsyncClient
    from agenthost.protocol import StreamEvent

STRUCTURED_BACKENDS = frozenset({"demo", "claude", "codex"})


@click.command()
@click.argument("agent_id")
@click.option(
    "--offset", type=click.IntRange(min=0), default=None, help="Replay after this offset."
)
@click.option("--last", type=click.IntRange(min=0), default=None, help="Replay the last N events.")
@click.option("--no-follow", is_flag=True, help="Exit once the replay reached the head.")
@click.option("--read-only", is_flag=True, help="Watch only: typed lines are not sent.")
@click.option("--raw", is_flag=True, help="Also show the agent's raw stdout lines.")
@home_option
@json_option
@handle_errors
def attach(
    agent_id: str,
    offset: int | None,
    last: int | None,
    no_follow: bool,
    read_only: bool,
    raw: bool,
    home: Path | None,
    as_json: bool,
) -> None:
    """Follow an agent's events: the replay of what is retained, then live.

    On a terminal, each line you type is sent to the agent (unless --read-only).
    Ctrl-C detaches; the agent keeps running. --json prints one event per line.
    """
    from agenthost.cli.common import remember_agent_id
    from agenthost.paths import resolve_home

    remember_agent_id(agent_id)
    code = attach_loop(
        agent_id,
        home=resolve_home(home),
        offset=offset,
        last=last,
        follow=not no_follow,
        as_json=as_json,
        read_only=read_only,
        raw=raw,
    )
    sys.exit(int(code))


def attach_loop(
    agent_id: str,
    *,
    home: Path,
    offset: int | None,
    follow: bool,
    as_json: bool,
    read_only: bool,
    last: int | None = None,
    raw: bool = False,
) -> Exit:
    """Run an attach session until the stream ends or the user detaches."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        try:
            return runner.run(
                _attach(agent_id, home, offset, last, follow, as_json, read_only, raw)
            )
        except KeyboardInterrupt:
            if not as_json:
                click.echo("\ndetached; the agent keeps running", err=True)
            return Exit.OK


async def _attach(
    agent_id: str,
    home: Path,
    offset: int | None,
    last: int | None,
    follow: bool,
    as_json: bool,
    read_only: bool,
    raw: bool,
) -> Exit:
    from agenthost.cli.render import EventRenderer, Style
    from agenthost.client import AsyncClient

    client = AsyncClient(agent_id, home=home)
    await client.connect()
    try:
        status = await client.status()
        start = offset or 0
        if last is not None:
            head = (await client.history(1)).offset
            start = max(0, head - last)
        sub = await client.attach(start)
        head = sub.response.stream_offset
        style = Style(use_color())
        renderer = EventRenderer(
            style, structured=(status.agent.backend in STRUCTURED_BACKENDS), raw=raw
        )
        interactive = follow and not read_only and not as_json and sys.stdin.isatty()
        if not as_json:
            replay = max(0, head - client.last_offset)
            note = " (oldest events were evicted)" if sub.response.truncated else ""
            a = status.agent
            click.echo(
                style.dim(
                    f"── {a.id} · {a.backend} · {a.state}"
                    + (f" · task {a.task}" if a.task else "")
                    + (f" · project {a.project}" if a.project else "")
                    + f" · replaying {replay} event{'' if replay == 1 else 's'}{note}"
                    + (" · type to send, Ctrl-C to detach" if interactive else "")
                ),
                err=True,
            )
        if not follow and client.last_offset >= head:
            return Exit.OK
        if interactive:
            _read_input(client)
        async for event in sub:
            _print(event, renderer, as_json)
            if not follow and event.offset >= head:
                return Exit.OK
        if not as_json:
            click.echo(style.dim("── the host closed the connection"), err=True)
        return Exit.OK
    finally:
        await client.close()


def _print(event: StreamEvent, renderer: EventRenderer, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(event.model_dump(mode="json", exclude_none=True)) + "\n")
        sys.stdout.flush()
        return
    text = renderer.render(event)
    if text is not None:
        click.echo(text)


def _read_input(client: AsyncClient) -> None:
    """Send each line typed on the terminal (canonical mode delivers whole lines)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[object]] = set()

    def on_line() -> None:
        line = sys.stdin.readline()
        if not line:
            loop.remove_reader(sys.stdin.fileno())
            return
        text = line.rstrip("\n")
        if text.strip():
            task = loop.create_task(_send(client, text))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    loop.add_reader(sys.stdin.fileno(), on_line)


async def _send(client: AsyncClient, text: str) -> None:
    from agenthost.errors import AgentHostError

    with contextlib.suppress(asyncio.CancelledError):
        try:
            await client.send(text)
        except AgentHostError as exc:
            click.echo(f"agenthost: cannot send: {exc}", err=True)
