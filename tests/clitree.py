"""The command line's tree, for tests that try every command: each command and group
subcommand with the words that name it, and dummy values for its required parameters
(so that ``agenthost WORDS ARGS`` runs as far as its options)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from agenthost.cli import COMMANDS, cli


def every_command() -> Iterator[tuple[click.Command, list[str]]]:
    """Each command of ``agenthost`` (group subcommands included) and its words."""
    ctx = click.Context(cli)

    def walk(command: click.Command, path: list[str]) -> Iterator[tuple[click.Command, list[str]]]:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, [*path, name])
        yield command, path

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        yield from walk(command, [name])


def required_args(command: click.Command) -> list[str]:
    """Dummy values for ``command``'s required parameters: an option's first choice or
    ``x1``, after the option's name; an argument's alone."""
    args: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        choices = getattr(param.type, "choices", None)
        value = str(next(iter(choices))) if choices else "x1"
        args += [param.opts[0], value] if isinstance(param, click.Option) else [value]
    return args
