"""The options that describe an agent the daemon starts (``agenthost run``, and the
runs of ``agenthost schedule add --new`` and ``agenthost hook add --new``), and the
spawn spec they make: one set of options, one set of checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from agenthost.cli.common import (
    agent_options,
    check_adapter,
    check_agent,
    check_installed,
    parse_pairs,
    remember_agent_id,
)
from agenthost.cli.params import FloatRange
from agenthost.paths import validate_agent_id
from agenthost.remote import Remote

if TYPE_CHECKING:
    from agenthost.daemon.spec import SpawnSpec

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

SPAWN_OPTIONS = (
    "agent_id", "kind", "cwd", "project", "task", "description", "env", "agent_opts",
    "resume", "budget_usd", "budget_tokens", "sandbox", "size", "linger", "stop_timeout",
    "ring_size", "ring_bytes", "restart", "max_restarts", "backoff", "backoff_max",
    "worktree", "repo", "setup", "memory_max", "cpu_max",
)  # fmt: skip
"""The parameter names :func:`spawn_options` adds (what :func:`spawn_spec` takes)."""


def parsed(
    parse: Callable[[str], T],
) -> Callable[[click.Context, click.Parameter, str | None], T | None]:
    """A click callback that parses an option's value with ``parse`` (a ValueError is
    the usage error); None stays None."""

    def callback(_ctx: click.Context, _param: click.Parameter, value: str | None) -> T | None:
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


def _size(value: str) -> int:
    from agenthost.daemon.resources import parse_size

    return parse_size(value)


def _cpus(value: str) -> float:
    from agenthost.daemon.resources import parse_cpus

    return parse_cpus(value)


def spawn_options(func: Callable[P, R]) -> Callable[P, R]:
    """:func:`~agenthost.cli.common.agent_options` and what the daemon adds: lingering,
    the ring, restarts, a worktree, resources."""
    options = [
        click.option("--linger", type=FloatRange(min=0), default=None, help="As for serve."),
        click.option("--stop-timeout", type=FloatRange(min=0), default=None, help="As for serve."),
        click.option("--ring-size", type=click.IntRange(min=1), default=None, help="As for serve."),
        click.option(
            "--ring-bytes", type=click.IntRange(min=1024), default=None, help="As for serve."
        ),
        click.option(
            "--restart",
            type=click.Choice(["never", "on-failure"]),
            default="never",
            help="Restart the agent in a new host when it fails (Claude Code: with --resume).",
        ),
        click.option(
            "--max-restarts", type=click.IntRange(min=0), default=5, help="Consecutive restarts."
        ),
        click.option(
            "--backoff", type=FloatRange(min=0), default=1.0, help="First restart delay (doubles)."
        ),
        click.option(
            "--backoff-max", type=FloatRange(min=0), default=60.0, help="Longest restart delay."
        ),
        click.option(
            "--worktree",
            "worktree",
            is_flag=False,
            flag_value="",
            default=None,
            metavar="[BRANCH]",
            help="Run the agent in a git worktree of its own of --repo, on BRANCH (default: "
            "agenthost/ID; made from the repository's HEAD if new). forget removes it.",
        ),
        click.option(
            "--repo",
            type=click.Path(path_type=Path),
            default=None,
            help="The repository of --worktree [default: the current directory].",
        ),
        click.option(
            "--setup",
            default=None,
            metavar="COMMAND",
            help="A shell command run in a new worktree before the agent starts (npm ci...).",
        ),
        click.option(
            "--memory-max",
            metavar="SIZE",
            callback=parsed(_size),
            default=None,
            help="Memory the host and its agent may use (512M, 2G); needs systemd scopes.",
        ),
        click.option(
            "--cpu-max",
            metavar="CPUS",
            callback=parsed(_cpus),
            default=None,
            help="CPUs the host and its agent may use (1.5); needs systemd scopes.",
        ),
    ]
    for option in reversed(options):  # decorators apply bottom-up: keep --help's order
        func = option(func)
    return agent_options(func)


def check_worktree_branch(branch: str) -> None:
    """A usage error for a ``--worktree`` branch git would refuse."""
    from agenthost.daemon.worktrees import check_branch
    from agenthost.errors import ConfigError

    try:
        check_branch(branch)
    except ConfigError as exc:
        raise click.BadParameter(exc.message, param_hint="--worktree") from None


def _worktree_fields(
    worktree: str | None, repo: Path | None, setup: str | None, remote: Remote | None
) -> dict[str, str | None]:
    """The spec's worktree fields: the repository made absolute here, unless it is on
    another machine (--remote: taken as given)."""
    if worktree is None:
        return {}
    where = str((repo or Path.cwd()).expanduser().absolute()) if remote is None else str(repo)
    return {"worktree": worktree, "repo": where, "setup": setup}


def spawn_spec(
    options: dict[str, Any],
    *,
    home: Path | None,
    remote: Remote | None,
    command: tuple[str, ...] = (),
) -> tuple[SpawnSpec, Path | None]:
    """The spawn spec of :func:`spawn_options`' values, checked as far as can be before
    anything starts (usage errors); and the home it is for (None: a remote's)."""
    from agenthost.daemon.spec import RestartPolicy, SpawnSpec
    from agenthost.terminal.sizes import format_size

    o = options
    agent_id, kind, cwd, resume = o["agent_id"], o["kind"], o["cwd"], o["resume"]
    worktree, repo, setup = o["worktree"], o["repo"], o["setup"]
    agent_opts, env, sandbox, project = o["agent_opts"], o["env"], o["sandbox"], o["project"]
    size = o["size"]
    if worktree is None and (repo is not None or setup is not None):
        raise click.UsageError("--repo and --setup go with --worktree")
    if worktree is not None and cwd is not None:
        raise click.UsageError("--worktree chooses the working directory: no --cwd with it")
    if worktree is not None and remote is not None and repo is None:
        raise click.UsageError("--worktree with --remote needs --repo (a directory there)")
    if worktree:
        check_worktree_branch(worktree)
    if worktree is not None and remote is None:  # a usage error, before anything starts
        from agenthost.daemon.worktrees import find_repo

        find_repo(str(repo or Path.cwd()))
    if remote is None:
        from agenthost.daemon.client import daemon_alive

        root: Path | None
        root, params = check_agent(agent_id, home, kind, resume, agent_opts, command)
        here = str((cwd or Path.cwd()).absolute())
        if not daemon_alive(root):  # the one started now has our PATH; a running one checks
            check_installed(kind, resume, params, command, cwd=here, env=parse_pairs(env))
        from agenthost.sandbox.resolve import check_sandbox

        check_sandbox(root, sandbox, agent_id, project)
        where: str | None = here
    else:  # the home and the directory are the remote's: only the adapter is checked here
        validate_agent_id(remember_agent_id(agent_id))
        root, params = home, check_adapter(kind, resume, agent_opts, command)
        where = str(cwd) if cwd is not None else None
    spec = SpawnSpec(
        agent_id=agent_id,
        agent=kind,
        command=list(command),
        cwd=where,
        env=parse_pairs(env),
        project=project,
        task=o["task"],
        description=o["description"],
        agent_opts=params,
        resume=resume,
        budget_usd=o["budget_usd"],
        budget_tokens=o["budget_tokens"],
        sandbox=sandbox,
        size=format_size(size) if size is not None else None,
        linger=o["linger"],
        stop_timeout=o["stop_timeout"],
        ring_size=o["ring_size"],
        ring_bytes=o["ring_bytes"],
        restart=RestartPolicy(
            policy="on-failure" if o["restart"] == "on-failure" else "never",
            max_restarts=o["max_restarts"],
            backoff=o["backoff"],
            backoff_max=o["backoff_max"],
        ),
        memory_max=o["memory_max"],
        cpu_max=o["cpu_max"],
        **_worktree_fields(worktree, repo, setup, remote),
    )
    return spec, root
