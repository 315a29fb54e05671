"""The CLI imports a command's module only when that command is used."""

from __future__ import annotations

import subprocess
import sys

import click

from agenthost.cli import COMMANDS, cli


def test_every_command_resolves_under_its_name() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == list(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None


def test_serve_loads_neither_the_client_nor_the_terminal_ui() -> None:
    code = (
        "import sys, click\n"
        "from agenthost.cli import cli\n"
        "cli.get_command(click.Context(cli), 'serve')\n"
        "bad = [m for m in ('agenthost.client', 'agenthost.cli.attach', 'agenthost.daemon',"
        " 'prompt_toolkit', 'wcwidth') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""
