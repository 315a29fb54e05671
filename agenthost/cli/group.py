"""The ``agenthost`` click group: each command's module is imported only when that
command is used (:data:`agenthost.cli.COMMANDS`)."""

from __future__ import annotations

import gc
import importlib

import click

from agenthost._version import __version__
from agenthost.cli import COMMANDS, ENABLES_GC_ITSELF, SUMMARIES


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is used
    (or when ``--help`` lists them all)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries (:data:`SUMMARIES`), without importing them."""
        rows = []
        for name in self.list_commands(ctx):
            summary = SUMMARIES.get(name)
            if summary is None:  # a command without one: click's cut of its help
                command = self.get_command(ctx, name)
                summary = command.get_short_help_str() if command is not None else ""
            rows.append((name, summary))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, plus a did-you-mean for a mistyped command (from the names only:
        nothing is imported for it)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            import difflib  # only for a mistyped command

            name = args[0] if args else ""
            close = difflib.get_close_matches(name, COMMANDS, n=3, cutoff=0.6)
            if not close or name in COMMANDS:
                raise
            guess = " or ".join(repr(c) for c in close)
            raise click.UsageError(f"{exc.message} Did you mean {guess}?", ctx) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a coding error
            raise TypeError(f"{module}.{attribute} is not a click command")
        command.short_help = command.short_help or SUMMARIES.get(cmd_name)
        if cmd_name not in ENABLES_GC_ITSELF:
            gc.enable()
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agenthost")
def cli() -> None:
    """agenthost keeps coding agents alive and reachable.

    One host process per agent owns the agent, numbers its output as events and serves
    them on a Unix socket; attach, send, stop from any terminal or script.
    """
