"""The ``agenthost`` command line: a thin shell over the library.

Each command's module is imported only when that command runs (``LazyGroup``), and
commands import what they need inside their body, so ``agenthost serve`` loads neither
the client nor the terminal UI, and ``agenthost list`` does not load the host. Start-up
time of ``serve`` is a measured figure (docs/performance.md).

Before click is even imported, :func:`main` offers the command line to the fast path
(:mod:`agenthost.cli.fast`): the plain local ``status``, ``ping``, ``send``,
``pending`` and ``respond`` run there on the standard library alone, with the same
output, errors and exit codes; everything else (and ``AGENTHOST_NO_FAST=1``) takes
click's way.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agenthost.cli.group import LazyGroup as LazyGroup
    from agenthost.cli.group import cli as cli

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
    "schedule": ("agenthost.cli.schedule", "schedule"),
    "fork": ("agenthost.cli.fork", "fork"),
    "tui": ("agenthost.cli.tui", "tui"),
    "schema": ("agenthost.cli.schema", "schema"),
    "acp": ("agenthost.cli.acp", "acp"),
    "bridge": ("agenthost.cli.bridge", "bridge"),
    "web": ("agenthost.cli.web", "web"),
    "policy": ("agenthost.cli.policy", "policy"),
    "notify": ("agenthost.cli.notify", "notify"),
    "config": ("agenthost.cli.policy", "config"),
    "sandbox": ("agenthost.cli.sandbox", "sandbox"),
    "hook": ("agenthost.cli.hooks", "hook"),
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
    "schedule": "Send an agent a message, or start one, at cron times.",
    "fork": "Start a new agent on a copy of an agent's conversation.",
    "tui": "Open a Claude Code or Codex agent's own TUI on its session.",
    "schema": "Print the JSON Schema of the protocol's messages.",
    "acp": "Serve an agent to an editor over ACP, on stdin/stdout.",
    "bridge": "Join stdin/stdout to an agent's socket (for ssh).",
    "web": "Serve the web page and the HTTP API.",
    "policy": "Show and test the approval policy of config.toml.",
    "notify": "Test the notification channels, read what was sent.",
    "config": "Check the home's config.toml.",
    "sandbox": "Check that agents can be confined here; show a sandbox.",
    "hook": "Add, list and remove the signed webhooks that start runs.",
}
"""Command name -> its one-line summary in ``agenthost --help`` (click would cut each
help text's first sentence with "..."). Listed from here: ``--help`` imports none of
the commands' modules."""

ENABLES_GC_ITSELF = frozenset({"serve"})
"""Commands that turn the cyclic garbage collector back on themselves, once they have
imported everything (``serve``: after ``gc.freeze()`` in ``run_host``)."""


def __getattr__(name: str) -> object:
    # click and the group are imported when first asked for: the fast path needs neither
    if name in ("cli", "LazyGroup"):
        from agenthost.cli import group

        return getattr(group, name)
    raise AttributeError(f"module 'agenthost.cli' has no attribute {name!r}")


def main() -> None:
    """Console-script entry point."""
    if not os.environ.get("AGENTHOST_NO_FAST"):
        from agenthost.cli.fast import run_fast

        status = run_fast(sys.argv[1:])
        if status is not None:
            sys.exit(status)
    # Importing pydantic and our models allocates many objects that live as long as
    # the process; collecting while they are created is wasted work (measured: ~10 %
    # of serve's start-up CPU). The collector is back on once the command's modules
    # are imported (serve: once the host has started).
    gc.disable()
    try:
        from agenthost.cli.group import cli

        cli(prog_name="agenthost")
    finally:
        gc.enable()
