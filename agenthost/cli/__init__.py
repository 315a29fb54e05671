"""The ``agenthost`` command line: a thin shell over the library.

Each command's module is imported only when that command runs (``LazyGroup``), and
commands import what they need inside their body, so ``agenthost serve`` loads neither
the client nor the terminal UI, and ``agenthost list`` does not load the host. Start-up
time of ``serve`` is a measured figure (docs/performance.md).
"""

from __future__ import annotations

import gc
import importlib

import click

from agenthost._version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("agenthost.cli.serve", "serve"),
    "demo": ("agenthost.cli.serve", "demo"),
    "attach": ("agenthost.cli.attach", "attach"),
    "list": ("agenthost.cli.verbs", "list_"),
    "status": ("agenthost.cli.verbs", "status"),
    "ping": ("agenthost.cli.verbs", "ping"),
    "history": ("agenthost.cli.verbs", "history"),
    "send": ("agenthost.cli.verbs", "send"),
    "interrupt": ("agenthost.cli.verbs", "interrupt"),
    "pending": ("agenthost.cli.verbs", "pending"),
    "respond": ("agenthost.cli.verbs", "respond"),
    "budget": ("agenthost.cli.budget", "budget"),
    "resume": ("agenthost.cli.budget", "resume"),
    "stop": ("agenthost.cli.verbs", "stop"),
    "export": ("agenthost.cli.journal_cmds", "export"),
    "gc": ("agenthost.cli.journal_cmds", "gc"),
    "wait": ("agenthost.cli.wait", "wait"),
    "daemon": ("agenthost.cli.daemon", "daemon"),
    "run": ("agenthost.cli.daemon", "run"),
    "forget": ("agenthost.cli.daemon", "forget"),
    "schema": ("agenthost.cli.schema", "schema"),
    "acp": ("agenthost.cli.acp", "acp"),
    "bridge": ("agenthost.cli.bridge", "bridge"),
    "web": ("agenthost.cli.web", "web"),
    "policy": ("agenthost.cli.policy", "policy"),
    "notify": ("agenthost.cli.notify", "notify"),
    "config": ("agenthost.cli.policy", "config"),
}
"""Command name -> (module, attribute), in the order ``--help`` lists them."""

ENABLES_GC_ITSELF = frozenset({"serve"})
"""Commands that turn the cyclic garbage collector back on themselves, once they have
imported everything (``serve``: after ``gc.freeze()`` in ``run_host``)."""


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is used
    (or when ``--help`` lists them all)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

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


def main() -> None:
    """Console-script entry point."""
    # Importing pydantic and our models allocates many objects that live as long as
    # the process; collecting while they are created is wasted work (measured: ~10 %
    # of serve's start-up CPU). The collector is back on once the command's modules
    # are imported (serve: once the host has started).
    gc.disable()
    try:
        cli(prog_name="agenthost")
    finally:
        gc.enable()
