"""Garbage ``--home`` values and ``AGENTHOST_HOME``, through the real command line.

``Path("")`` is the current directory, so an empty ``--home`` used to put a host's
socket, lock and journal wherever the command ran. Now: an empty or blank ``--home`` is
a usage error (exit 2), a file is refused by click, a relative path is made absolute
against the current directory, and an empty ``AGENTHOST_HOME`` counts as unset.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agenthost.cli.common import Exit

from hosttools import PY

SERVE = ("serve", "--agent-id", "h1", "--detach", "--agent", "lines", "--linger", "0")


def agenthost(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "AGENTHOST_HOME"}
    full_env.update(NO_COLOR="1", **env)
    return subprocess.run(
        [PY, "-m", "agenthost", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "the home directory is empty ('')"),
        (" ", "the home directory is blank (' ')"),
        ("\t\n", "the home directory is blank"),
    ],
)
def test_empty_or_blank_home_never_means_here(home: Path, value: str, message: str) -> None:
    cwd = home / "cwd"
    cwd.mkdir()
    done = agenthost(cwd, *SERVE, "--home", value, "--", "true")
    assert done.returncode == Exit.USAGE, done.stderr
    assert "Invalid value for '--home'" in done.stderr and message in done.stderr
    assert list(cwd.iterdir()) == []  # nothing was created where the command ran
    ping = agenthost(cwd, "ping", "h1", "--home", value)
    assert ping.returncode == Exit.USAGE and message in ping.stderr


def test_a_file_as_home_is_refused(home: Path) -> None:
    afile = home / "afile"
    afile.write_text("")
    done = agenthost(home, "list", "--home", str(afile))
    assert done.returncode == Exit.USAGE and "is a file" in done.stderr


def test_a_relative_home_is_made_absolute(home: Path) -> None:
    started = agenthost(home, *SERVE, "--home", "rel/h", "--json", "--", "cat")
    assert started.returncode == 0, started.stderr
    sock = home / "rel" / "h" / "hosts" / "h1.sock"
    assert sock.is_socket() and str(sock) in started.stdout  # reported absolute
    stopped = agenthost(Path("/"), "stop", "h1", "--home", str(home / "rel" / "h"))
    assert stopped.returncode == 0, stopped.stderr


def test_empty_agenthost_home_means_unset(home: Path) -> None:
    xdg = home / "xdg"
    env = {"AGENTHOST_HOME": "", "XDG_STATE_HOME": str(xdg)}
    started = agenthost(home, *SERVE, "--", "cat", **env)
    assert started.returncode == 0, started.stderr
    assert (xdg / "agenthost" / "hosts" / "h1.sock").is_socket()
    assert not (home / "hosts").exists()  # not the current directory
    stopped = agenthost(home, "stop", "h1", **env)
    assert stopped.returncode == 0, stopped.stderr


def _every_command() -> list[list[str]]:
    """Every command that takes a home (group subcommands included), with dummy values
    for its required parameters: ``agenthost ARGS`` runs as far as its options."""
    from clitree import every_command, required_args

    return [
        [*path, *required_args(command)]
        for command, path in every_command()
        if any(p.name == "home" for p in command.params)
    ]


EVERY_COMMAND = _every_command()


def test_every_command_is_tried() -> None:
    tried = [" ".join(args) for args in EVERY_COMMAND]
    wanted = ["list", "run ", "status ", "demo", "serve ", "daemon", "daemon stop", "web token"]
    assert all(any(t.startswith(w) for t in tried) for w in wanted), tried
    assert len(tried) >= 30  # every command but `schema`, which has no home


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=" ".join)
def test_every_command_refuses_a_home_that_is_a_file(home: Path, args: list[str]) -> None:
    # AGENTHOST_HOME naming a file gave a traceback (`list`), a hang (`run`), a hint
    # about `kill -USR1` (`status`), "already running" (`demo`): one check, one message,
    # the one `--home FILE` gets, before anything starts
    afile = home / "afile"
    afile.write_text("mine\n")
    message = f"the home directory {afile} is a file"
    by_variable = agenthost(home, *args, AGENTHOST_HOME=str(afile))
    assert by_variable.returncode == Exit.USAGE, by_variable
    assert f"Invalid value for 'AGENTHOST_HOME': {message}" in by_variable.stderr
    assert "Traceback" not in by_variable.stderr
    by_option = agenthost(home, *args, "--home", str(afile))
    assert by_option.returncode == Exit.USAGE, by_option
    assert f"Invalid value for '--home': {message}" in by_option.stderr
    assert afile.read_text() == "mine\n" and sorted(home.iterdir()) == [afile]


def test_a_home_below_a_file_and_an_xdg_home_that_is_a_file(home: Path) -> None:
    afile = home / "afile"
    afile.write_text("")
    below = agenthost(home, "list", AGENTHOST_HOME=str(afile / "sub"))
    assert below.returncode == Exit.USAGE
    assert f"the home directory {afile}/sub cannot be made: {afile} is a file" in below.stderr
    xdg = agenthost(home, "status", "a1", XDG_STATE_HOME=str(afile))
    assert xdg.returncode == Exit.USAGE
    assert f"Invalid value for 'XDG_STATE_HOME': the home directory {afile}/agenthost" in xdg.stderr
