"""Every number option of the command line refuses NaN (a usage error, exit 2) before
anything starts. click's FloatRange let NaN through (it compares false with both
bounds): `serve --linger nan` gave a host that ended at once, `daemon stop --timeout
nan` a traceback after the daemon had been signalled."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click
import pytest

from agenthost.cli import COMMANDS, cli
from agenthost.cli.common import Exit

from hosttools import PY


def _float_options() -> list[tuple[list[str], str]]:
    ctx = click.Context(cli)
    found: list[tuple[list[str], str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
        required: list[str] = []
        for param in command.params:
            if param.required and isinstance(param, click.Argument):
                required.append("x1")
            elif param.required and isinstance(param, click.Option):
                choices = getattr(param.type, "choices", None)
                required += [param.opts[0], str(next(iter(choices))) if choices else "x1"]
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange):
                found.append(([*path, *required], param.opts[0]))

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        walk(command, [name])
    return found


FLOAT_OPTIONS = _float_options()


def test_the_options_are_found() -> None:
    options = {(args[0], option) for args, option in FLOAT_OPTIONS}
    assert {("serve", "--linger"), ("run", "--backoff"), ("stop", "--timeout")} <= options
    assert ("daemon", "--probe-timeout") in options


@pytest.mark.parametrize(
    ("args", "option"), FLOAT_OPTIONS, ids=[f"{a[0]} {o}" for a, o in FLOAT_OPTIONS]
)
def test_nan_is_a_usage_error(home: Path, args: list[str], option: str) -> None:
    env = {**os.environ, "AGENTHOST_HOME": str(home / "h"), "NO_COLOR": "1"}
    done = subprocess.run(
        [PY, "-m", "agenthost", *args, option, "nan"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == Exit.USAGE, done
    assert f"Invalid value for '{option}': 'nan' is not a number" in done.stderr, done
    assert not (home / "h").exists()  # nothing started, nothing made
