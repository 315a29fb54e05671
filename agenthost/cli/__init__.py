"""The ``agenthost`` command line: a thin shell over the library.

Commands import what they need when they run, so ``agenthost serve`` does not load the
client and ``agenthost list`` does not load the host.
"""

from __future__ import annotations

import click

from agenthost._version import __version__
from agenthost.cli.attach import attach
from agenthost.cli.journal_cmds import export, gc
from agenthost.cli.serve import demo, serve
from agenthost.cli.verbs import (
    history,
    interrupt,
    list_,
    pending,
    ping,
    respond,
    send,
    status,
    stop,
)
from agenthost.cli.wait import wait


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agenthost")
def cli() -> None:
    """agenthost keeps coding agents alive and reachable.

    One host process per agent owns the agent, numbers its output as events and serves
    them on a Unix socket; attach, send, stop from any terminal or script.
    """


for command in (
    serve,
    demo,
    attach,
    list_,
    status,
    ping,
    history,
    send,
    interrupt,
    pending,
    respond,
    stop,
    export,
    gc,
    wait,
):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="agenthost")
