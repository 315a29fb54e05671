"""Where an agent's program is, and what to say when it is not there.

A host that cannot start its agent used to start all the same, serve an agent in state
``error`` and make ``run`` and ``serve --detach`` report success. So every way a host
starts looks the program up first, as ``execvpe`` would (the agent's PATH, from its
working directory): ``serve`` before it serves, ``serve --detach`` and ``run`` before
anything starts, the daemon before each spawn and restart (with its own environment,
which is the agent's). A program that is not there is :class:`AgentCannotStart`, whose
message names the program, the PATH searched and how to install it: the npm package of
the agents we know, or the ``AGENTHOST_*_BIN`` variable that names it.

Pure apart from ``stat`` calls: no process is started.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from agenthost.errors import AgentCannotStart

if TYPE_CHECKING:
    from agenthost.agents.base import Adapter

NPM_PACKAGES: Final[Mapping[str, str]] = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "claude-agent-acp": "@agentclientprotocol/claude-agent-acp",
    "codex-acp": "@agentclientprotocol/codex-acp",
}
"""The npm package that installs each agent CLI we know, by its program's name."""


@dataclass(frozen=True, slots=True)
class Program:
    """Who an agent's program is, for the message when it is missing."""

    product: str = ""
    """What the user calls it (``Claude Code``); "" for any command."""
    env_var: str = ""
    """The variable that names the program instead of PATH (``AGENTHOST_CLAUDE_BIN``)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """Where ``execvpe`` would find a program, or why it would not."""

    path: str | None
    """The executable found; None when there is none."""
    denied: bool = False
    """A candidate exists but is not an executable file (exec: permission denied)."""
    searched: tuple[str, ...] = ()
    """The PATH directories searched (empty for a name with a ``/``)."""
    no_cwd: bool = False
    """The working directory does not exist."""


def lookup(name: str, cwd: str | None, env: Mapping[str, str]) -> Lookup:
    """Find ``name`` as ``execvpe`` would with ``env``'s PATH, from ``cwd`` (a name
    with a ``/`` is a path; a relative one is taken from ``cwd``)."""
    if cwd and not os.path.isdir(cwd):
        return Lookup(None, no_cwd=True)
    if not name:
        return Lookup(None)
    searched: tuple[str, ...] = ()
    if "/" in name:
        candidates = [name]
    else:
        searched = tuple(os.get_exec_path(dict(env)))
        candidates = [os.path.join(d, name) for d in searched]
    denied = False
    for candidate in candidates:
        path = os.path.join(cwd, candidate) if cwd else candidate  # relative: from cwd
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return Lookup(path, searched=searched)
        denied = denied or os.path.exists(path)
    return Lookup(None, denied=denied, searched=searched)


def check_argv(
    adapter: Adapter,
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    agent_env: Mapping[str, str],
    whose: str = "",
) -> str:
    """:func:`check_program` for the command ``adapter`` built (``argv``), run with the
    environment a host gives its agent: ``env`` (the host's), the adapter's own
    variables, then ``agent_env`` (``--env``)."""
    full = {**env, **adapter.environment(), **agent_env}
    name = argv[0] if argv else ""
    return check_program(name, cwd=cwd, env=full, program=adapter.program, whose=whose)


def check_program(
    name: str,
    *,
    cwd: str | None,
    env: Mapping[str, str],
    program: Program = Program(),
    whose: str = "",
) -> str:
    """The path of the agent's program ``name``; raise AgentCannotStart, saying what is
    missing and how to install it, when exec could not start it. ``whose`` names the
    environment searched when it is not this command's (``the daemon's``)."""
    found = lookup(name, cwd, env)
    if found.path is not None:
        return found.path
    raise AgentCannotStart(missing_text(name, found, cwd, program, whose or "your"))


def missing_text(name: str, found: Lookup, cwd: str | None, program: Program, whose: str) -> str:
    """The sentence of :func:`check_program` (one line: it crosses the wire)."""
    if found.no_cwd:
        return f"the agent's working directory {cwd} does not exist"
    if not name:
        return "the agent's command is empty: give the program to run after --"
    what = program.product or f"the agent's program `{name}`"
    overridden = _named_by(program.env_var, name)
    if found.denied:
        named = f" ({program.env_var} names it)" if overridden else ""
        return f"{what} cannot be run: {name}{named} is not an executable file"
    if overridden:
        said = f"{what} is not where {program.env_var} says: {name} does not exist"
    elif found.searched:
        path = f"{whose} PATH ({os.pathsep.join(found.searched)})"
        if program.product:
            said = f"{what} is not installed: no `{name}` on {path}"
        else:
            said = f"{what} is not on {path}"
    else:
        relative = f" (relative to {cwd})" if cwd and not os.path.isabs(name) else ""
        said = f"{what} does not exist{relative}"
    return f"{said}; {install_text(name, program)}"


def install_text(name: str, program: Program) -> str:
    """How to get the program: the npm package we know it by, else a general word."""
    package = NPM_PACKAGES.get(os.path.basename(name))
    how = f"install it with `npm install -g {package}`" if package else "install it"
    if program.env_var:
        return f"{how}, or set {program.env_var} to the program's path"
    return f"{how}, or give its full path after --"


def _named_by(variable: str, name: str) -> bool:
    # the adapter took the program from this variable of our environment, not from PATH
    # (adapters build their command in the process that checks it)
    return bool(variable) and os.environ.get(variable) == name
