"""``agenthost --help`` reads well: a whole one-line summary for every command and
subcommand (click cut long first sentences with "..."), and ``--agent``'s help names
every agent kind of the adapters' registry (issue 28: ``acp`` was left out)."""

from __future__ import annotations

import subprocess

import click
import pytest

from agenthost.agents import AGENT_KINDS
from agenthost.cli import cli

from hosttools import PY


def groups(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    ctx = click.Context(group)
    found = [path]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += groups(command, (*path, name))
    return found


def listed(*path: str) -> dict[str, str]:
    """The Commands section of ``agenthost PATH --help`` in 80 columns: name -> summary."""
    out = subprocess.run(
        [PY, "-m", "agenthost", *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    section = out.partition("\nCommands:\n")[2].splitlines()
    rows: dict[str, str] = {}
    for line in section:
        if not line.startswith("  "):
            break
        assert not line.startswith("   "), f"a summary wrapped to a second line: {line!r}"
        name, _, summary = line.strip().partition(" ")
        rows[name] = summary.strip()
    return rows


@pytest.mark.parametrize("path", groups(cli), ids=lambda p: " ".join(p) or "agenthost")
def test_every_command_has_a_whole_one_line_summary(path: tuple[str, ...]) -> None:
    group = cli
    for name in path:
        found = group.get_command(click.Context(group), name)
        assert isinstance(found, click.Group)
        group = found
    rows = listed(*path)
    assert list(rows) == group.list_commands(click.Context(group))
    for name, summary in rows.items():
        assert summary and not summary.endswith("..."), (name, summary)
        assert summary[0].isupper() and summary.endswith("."), (name, summary)


@pytest.mark.parametrize("command", ["run", "serve"])
def test_agent_help_names_every_kind_of_the_registry(command: str) -> None:
    found = cli.get_command(click.Context(cli), command)
    assert found is not None
    (option,) = [p for p in found.params if p.name == "kind"]
    assert isinstance(option, click.Option) and option.help is not None
    for kind in AGENT_KINDS:
        assert f"{kind} (" in option.help, kind
