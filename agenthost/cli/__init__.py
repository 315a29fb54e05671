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
    "tui": ("agenthost.cli.tui", "tui"),
    "schema": ("agenthost.cli.schema", "schema"),
    "acp": ("agenthost.cli.acp", "acp"),
    "bridge": ("agenthost.cli.bridge", "bridge"),
    "web": ("agenthost.cli.web", "web"),
    "policy": ("agenthost.cli.policy", "policy"),
    "notify": ("agenthost.cli.notify", "notify"),
    "config": ("agenthost.cli.policy", "config"),
    "sandbox": ("agenthost.cli.sandbox", "sandbox"),
}
"""Command name -> (module, attribute), in the order ``--help`` lists them."""

SUMMARIES: dict[str, str] = {
    "serve": "Run one agent's host, in the foreground or with --detach.",
    "demo": "Start the built-in demo agent and attach to it.",
    "attach": "Watch an agent live, and talk to it from a terminal.",
    "list": "List the agents, their state and their cost.",
    "status": "Show an agent's state and its host.",
    "ping": "Check that an agent's host answers.",
    "history": "Print an agent's chat history.",
    "send": "Send a message to an agent.",
    "interrupt": "Interrupt an agent's current turn.",
    "pending": "List the permission requests an agent waits on.",
    "respond": "Allow or deny a pending permission request.",
    "budget": "Show or change an agent's budget.",
    "resume": "Resume an agent paused for a usage limit now.",
    "stop": "Stop an agent and its host.",
    "export": "Write an agent's whole conversation, from its journal.",
    "gc": "Remove the journals of agents that ended long ago.",
    "wait": "Wait until an agent is in one of the given states.",
    "daemon": "Run the daemon, the manager of many agents.",
    "run": "Start an agent through the daemon.",
    "forget": "Remove a stopped agent from the daemon's registry.",
    "tui": "Open a Claude Code or Codex agent's own TUI on its session.",
    "schema": "Print the JSON Schema of the protocol's messages.",
    "acp": "Serve an agent to an editor over ACP, on stdin/stdout.",
    "bridge": "Join stdin/stdout to an agent's socket (for ssh).",
    "web": "Serve the web page and the HTTP API.",
    "policy": "Show and test the approval policy of config.toml.",
    "notify": "Test the notification channels, read what was sent.",
    "config": "Check the home's config.toml.",
    "sandbox": "Check that agents can be confined here; show a sandbox.",
}
"""Command name -> its one-line summary in ``agenthost --help`` (click would cut each
help text's first sentence with "..."). Listed from here: ``--help`` imports none of
the commands' modules."""

ENABLES_GC_ITSELF = frozenset({"serve"})
"""Commands that turn the cyclic garbage collector back on themselves, once they have
imported everything (``serve``: after ``gc.freeze()`` in ``run_host``)."""


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
