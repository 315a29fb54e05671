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


def test_every_agent_kind_has_its_adapter() -> None:
    from agenthost.agents import AGENT_KINDS, adapter_class, make_adapter

    for kind in AGENT_KINDS:
        cls = adapter_class(kind)
        assert cls is not None and cls.kind == kind
        assert make_adapter(kind).kind == kind
    assert adapter_class("nope") is None


def test_a_lines_host_loads_no_other_adapter() -> None:
    code = (
        "import sys\n"
        "from agenthost.agents import make_adapter\n"
        "make_adapter('lines')\n"
        "print(','.join(m for m in sys.modules if m.startswith('agenthost.agents.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    # (programs: where an agent's program is, which every adapter names; pure and small)
    base = {"agenthost.agents.base", "agenthost.agents.programs"}
    assert set(out.strip().split(",")) == {*base, "agenthost.agents.lines"}


def test_the_collector_is_back_on_for_every_command_but_serve() -> None:
    import gc

    ctx = click.Context(cli)
    try:
        for name in COMMANDS:
            gc.disable()  # as main() does while commands are imported
            cli.get_command(ctx, name)
            # serve turns it on in run_host, after gc.freeze()
            assert gc.isenabled() is (name != "serve"), name
    finally:
        gc.enable()
