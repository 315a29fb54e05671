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

from agenthost.cli.common import Exit

from clitree import every_command, required_args
from hosttools import PY


def _float_options() -> list[tuple[list[str], str]]:
    return [
        ([*path, *required_args(command)], param.opts[0])
        for command, path in every_command()
        for param in command.params
        if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange)
    ]


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
