"""``agenthost export`` and ``agenthost gc``: journals, with or without a host."""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from agenthost.remote import Remote

from agenthost.cli.common import (
    complete_agent_ids,
    handle_errors,
    home_option,
    json_option,
    print_json,
    remember_agent_id,
    remote_option,
    run_there,
)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` -> seconds."""
    from agenthost.config import parse_duration as seconds

    try:
        return seconds(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("agent_id", shell_complete=complete_agent_ids)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "md", "events", "asciicast", "text"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one history entry per line; md: a readable transcript; events: every "
    "stream event as journaled; for terminal agents (--agent pty), asciicast: a "
    "recording asciinema plays, text: what the terminal showed, as plain text.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of stdout.",
)
@remote_option
@home_option
@handle_errors
def export(
    agent_id: str, fmt: str, output: Path | None, home: Path | None, remote: Remote | None
) -> None:
    """Write an agent's whole conversation, from its journal (no host needed). With
    --remote, from that machine's journal (`agenthost export` runs there, over ssh)."""
    from agenthost.errors import HostNotFound
    from agenthost.journal import JournalReader
    from agenthost.paths import journal_dir, resolve_home, validate_agent_id

    remember_agent_id(agent_id)
    if remote is not None:
        args = ["export", validate_agent_id(agent_id), "--format", fmt]
        run_there(remote, [*args, *(["--home", str(home)] if home else [])], output=output)
    reader = JournalReader(journal_dir(resolve_home(home), agent_id))
    if not reader.exists():
        raise HostNotFound(
            f"there is no journal for agent {agent_id!r}",
            hint="journals live in <home>/journal/<agent id>/ (`agenthost gc` may have removed it)",
        )
    out: IO[str] = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
    try:
        _export(reader, fmt, agent_id, out)
    finally:
        if output:
            out.close()


def _export(reader: Any, fmt: str, agent_id: str, out: IO[str]) -> None:
    # what the agent said is escaped in every format (it may be read with cat): the
    # JSON ones keep their data (agenthost.textsafe.escape_json), the transcript shows
    # controls as \x1b, \u202e
    from agenthost.textsafe import escape_json

    if fmt in ("asciicast", "text"):
        _export_terminal(reader, fmt, agent_id, out)
        return
    if fmt == "md":
        out.write(f"# Conversation of agent `{agent_id}`\n\n")
    for record in reader.iter_records():
        if fmt == "events":
            out.write(escape_json(record.decode("utf-8", "replace")))
            continue
        if b'"type":"chat_entry"' not in record[:80]:
            continue
        event = json.loads(record)
        entry = {**event["chat_entry"], "offset": event["offset"]}
        if fmt == "jsonl":
            out.write(escape_json(json.dumps(entry, ensure_ascii=False)) + "\n")
        else:
            out.write(markdown(entry))


def _terminal_events(reader: Any) -> Iterator[dict[str, Any]]:
    for record in reader.iter_records():
        if b'"type":"terminal' in record[:80]:
            event = json.loads(record)
            if isinstance(event, dict):
                yield event


def _export_terminal(reader: Any, fmt: str, agent_id: str, out: IO[str]) -> None:
    from agenthost.errors import ConfigError
    from agenthost.textsafe import LINES, escape, escape_json

    events = _terminal_events(reader)
    first = next(events, None)
    if first is None:
        raise ConfigError(
            f"agent {agent_id!r} has no terminal output in its journal",
            hint="asciicast and text are for terminal agents (--agent pty); try --format md",
        )
    if fmt == "asciicast":
        from agenthost.terminal.asciicast import to_asciicast

        # JSON keeps the escapes as \u001b; what a bidi control could hide is escaped
        for line in to_asciicast(itertools.chain([first], events), title=agent_id):
            out.write(escape_json(line))
        return
    from agenthost.terminal.replay import paint_all

    for line in paint_all(itertools.chain([first], events)):
        out.write(escape(line, LINES) + "\n")


def markdown(entry: dict[str, Any]) -> str:
    """One history entry (with its ``offset``) as ``export --format md`` writes it:
    what the agent said escaped, a failed turn in the words of docs/agents.md."""
    from agenthost.textsafe import LINES, escape

    def text(key: str, default: str = "", keep: str = LINES) -> str:
        value = entry.get(key, default)
        return escape(value if isinstance(value, str) else json.dumps(value), keep)

    when = text("timestamp")[:19].replace("T", " ")
    role = entry.get("role")
    if role == "user":
        return f"## User · {when}\n\n{text('content')}\n\n"
    if role == "assistant":
        failed = "turn failed: " if entry.get("is_error") is True else ""
        return f"**Assistant** · {when}\n\n{failed}{text('content')}\n\n"
    if role == "governance":  # a budget crossed, a pause, the sandbox it runs in
        return f"> **Governance** · {when}: {text('content', keep='')}\n\n"
    if role == "permission":
        what = f" `{text('tool_input', keep='')}`" if entry.get("tool_input") else ""
        tool = text("tool_name", "tool", "")
        return f"> **Permission** {tool}{what}: {text('content', keep='')}\n\n"
    if "tool_result" in entry:  # under its call: only a failure needs saying
        failed = "*the tool failed*\n" if entry.get("is_error") is True else ""
        fence = "~~~~"
        return f"{fence}text\n{text('tool_result')}\n{fence}\n{failed}\n"
    return f"- **{text('tool_name', 'tool', '')}** `{text('tool_input', keep='')}`\n\n"


@click.command()
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    help="Remove journals untouched for this long (90s, 15m, 12h, 7d).",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@home_option
@json_option
@handle_errors
def gc(older_than: str, dry_run: bool, home: Path | None, as_json: bool) -> None:
    """Remove the journals of agents that ended long ago (never a live host's)."""
    import shutil

    from agenthost.lockfile import is_lock_held
    from agenthost.paths import agent_id_from_socket, journals_dir, lock_path, resolve_home

    age = parse_duration(older_than)
    root = resolve_home(home)
    now = time.time()
    report: list[dict[str, Any]] = []
    base = journals_dir(root)
    for directory in sorted(base.iterdir()) if base.is_dir() else []:
        agent_id = agent_id_from_socket(directory.with_suffix(".sock"))
        # A symlink is not a journal a host made (hosts create real directories): never
        # follow it out of the home; rmtree() would also refuse it, and gc used to die
        # on that with a traceback, leaving the journals after it unprocessed.
        if agent_id is None or directory.is_symlink() or not directory.is_dir():
            continue
        newest = max((p.stat().st_mtime for p in directory.iterdir()), default=0.0)
        size = sum(p.stat().st_size for p in directory.iterdir())
        if is_lock_held(lock_path(root, agent_id)):
            action = "kept (host running)"
        elif now - newest < age:
            action = "kept (recent)"
        else:
            action = "would remove" if dry_run else "removed"
            if not dry_run:
                shutil.rmtree(directory)
        report.append(
            {"agent_id": agent_id, "action": action, "bytes": size, "idle_seconds": now - newest}
        )
    if as_json:
        print_json(report)
        return
    if not report:
        click.echo("no journals", err=True)
    for item in report:
        idle = item["idle_seconds"] / 86400
        click.echo(
            f"{item['agent_id']}: {item['action']} ({item['bytes']} bytes, idle {idle:.1f}d)"
        )
