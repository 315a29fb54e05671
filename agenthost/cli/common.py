"""What every command shares: options, JSON output, errors and exit codes."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from agenthost.cli.exits import Exit as Exit
from agenthost.cli.exits import error_report, exit_code_for
from agenthost.cli.views import use_color as use_color
from agenthost.errors import (
    AgentHostError,
    ConfigError,
    HostNotFound,
    NotConnected,
)
from agenthost.paths import agent_id_from_socket, hosts_dir, resolve_home

if TYPE_CHECKING:
    from agenthost.remote import Remote

P = ParamSpec("P")
R = TypeVar("R")


def parse_pairs(values: tuple[str, ...], option: str = "--env") -> dict[str, str]:
    """``KEY=VALUE`` option values as a dict (a usage error names the option)."""
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=option)
        pairs[key] = value
    return pairs


def agent_options(func: Callable[P, R]) -> Callable[P, R]:
    """What ``serve`` and ``run`` both take to describe an agent: ``--agent-id``,
    ``--agent``, ``--cwd``, ``--project``, ``--task``, ``--description``, ``--env``,
    ``--agent-opt``, ``--resume``, ``--budget-usd``, ``--budget-tokens``, ``--sandbox``,
    ``--size``."""
    from agenthost.agents import AGENT_KINDS, DEFAULT_AGENT, kinds_help
    from agenthost.cli.params import USD

    options = [
        click.option("--agent-id", required=True, help="Name of the agent (its socket's name)."),
        click.option(
            "--agent",
            "kind",
            type=click.Choice(AGENT_KINDS),
            default=DEFAULT_AGENT,
            help=f"How the agent speaks: {kinds_help()}.",
        ),
        click.option(
            "--cwd",
            type=click.Path(file_okay=False, path_type=Path),
            callback=_cwd_value,
            default=None,
            help="Working directory (worktree) of the agent [default: current directory; "
            "with --remote, a directory there: the remote home by default].",
        ),
        click.option("--project", default="", help="Project name, for listing and discovery."),
        click.option("--task", default=None, help="Task id or title shown in status."),
        click.option("--description", default=None, help="Free text shown in status."),
        click.option(
            "--env", "env", multiple=True, metavar="KEY=VALUE", help="Extra agent environment."
        ),
        click.option(
            "--agent-opt",
            "agent_opts",
            multiple=True,
            metavar="KEY=VALUE",
            help="A setting of the agent's adapter (see docs/agents.md).",
        ),
        click.option("--resume", default=None, help="Resume this session (agents that can)."),
        click.option(
            "--budget-usd",
            type=USD,
            default=None,
            help="Interrupt the agent and refuse sends once its turns cost this many "
            "dollars (0 to 1e9; agenthost budget raises it).",
        ),
        click.option(
            "--budget-tokens",
            type=click.IntRange(min=0, max=10**15),
            default=None,
            help="The same for the tokens its turns reported.",
        ),
        click.option(
            "--sandbox",
            default=None,
            metavar="PROFILE",
            help="Confine the agent: strict (network only to its model API and "
            "[sandbox] allow_hosts), net, none (no network), or off "
            "[default: config.toml's [sandbox] default, else off] (docs/sandbox.md).",
        ),
        click.option(
            "--size",
            default=None,
            metavar="COLSxROWS",
            callback=_size_value,
            help="A terminal agent's fixed size (--agent pty), e.g. 120x40 "
            "[default: the size of the client that last typed or resized].",
        ),
    ]
    for option in reversed(options):  # decorators apply bottom-up: keep --help's order
        func = option(func)
    return func


def _size_value(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[int, int] | None:
    from agenthost.terminal.sizes import parse_size

    if value is None:
        return None
    try:
        return parse_size(value)
    except ConfigError as exc:
        raise click.BadParameter(f"{exc.message}; {exc.hint}") from None


def _cwd_value(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    # a directory of this machine, unless the agent runs on another (--remote, an
    # eager option: already read when this runs)
    if value is None or ctx.params.get("remote") is not None:
        return value
    if not value.is_dir():
        raise click.BadParameter(f"Directory {str(value)!r} does not exist.")
    return value


def check_adapter(
    kind: str, resume: str | None, agent_opts: tuple[str, ...], command: tuple[str, ...]
) -> dict[str, str]:
    """Usage errors of an agent's adapter options and command; return the options."""
    from agenthost.agents import AdapterOptions, make_adapter

    params = parse_pairs(agent_opts, "--agent-opt")
    make_adapter(kind, AdapterOptions(resume=resume, params=params)).build_command(command)
    return params


def check_installed(
    kind: str,
    resume: str | None,
    params: Mapping[str, str],
    command: tuple[str, ...],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
) -> None:
    """AgentCannotStart (exit 13) before anything starts when the agent's program is not
    on this command's PATH (with ``env``, the agent's extra variables), from ``cwd``: the
    message says what is missing and how to install it."""
    from agenthost.agents import AdapterOptions, make_adapter
    from agenthost.agents.programs import check_argv

    adapter = make_adapter(kind, AdapterOptions(resume=resume, params=dict(params)))
    check_argv(adapter, adapter.build_command(command), cwd=str(cwd), env=os.environ, agent_env=env)


def check_agent(
    agent_id: str,
    home: Path | None,
    kind: str,
    resume: str | None,
    agent_opts: tuple[str, ...],
    command: tuple[str, ...],
) -> tuple[Path, dict[str, str]]:
    """Usage errors of an agent's description before anything starts (the socket path,
    the adapter's options and command); return the home and the adapter options."""
    from agenthost.paths import check_socket_path, resolve_home, socket_path

    remember_agent_id(agent_id)
    root = resolve_home(home)
    check_socket_path(socket_path(root, agent_id))
    return root, check_adapter(kind, resume, agent_opts, command)


def home_option(func: Callable[P, R]) -> Callable[P, R]:
    """``--home DIR`` (default: $AGENTHOST_HOME, else $XDG_STATE_HOME/agenthost)."""
    return click.option(
        "--home",
        # a str first: Path("") would already be "." and an empty --home undetectable;
        # no click check of its own: a file is refused by _home_value, as for the variable
        type=click.Path(),
        metavar="DIRECTORY",
        callback=_home_value,
        default=None,
        help="State directory [default: $AGENTHOST_HOME, else $XDG_STATE_HOME/agenthost, "
        "else ~/.local/state/agenthost].",
    )(func)


def _home_value(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Path | None:
    """``--home``, or the home of the environment, checked before anything runs: an
    empty ``--home``, or a home that is a file (given either way), is a usage error with
    one message (:func:`agenthost.paths.check_directory`)."""
    from agenthost.paths import HOME_ENV, check_home, resolve_home

    try:
        if value is not None:
            return check_home(value)
        resolve_home(None)
    except AgentHostError as exc:
        given = os.environ.get(HOME_ENV, "").strip()
        source = None if value is not None else (HOME_ENV if given else "XDG_STATE_HOME")
        if value is None and not given and os.environ.get("AGENTHOST_SANDBOX"):
            raise click.UsageError(exc.message) from exc  # no variable is at fault
        raise click.BadParameter(exc.message, param_hint=source and repr(source)) from exc
    return None


_REMOTE_HELP = (
    "The agent runs on that machine: reach it with ssh (see docs/remote.md). --home is "
    "then the home there."
)


def remote_option(func: Callable[P, R]) -> Callable[P, R]:
    """``--remote [USER@]HOST[:PORT]``: the agent is on another machine (a Remote, or
    None); a bad value is a usage error naming the option."""
    return click.option(
        "--remote",
        metavar="[USER@]HOST[:PORT]",
        callback=_remote_value,
        default=None,
        is_eager=True,  # read before the options whose meaning it changes (--cwd)
        help=_REMOTE_HELP,
    )(func)


def remotes_option(func: Callable[P, R]) -> Callable[P, R]:
    """``--remote`` repeatable (``list``): a tuple of Remote."""
    return click.option(
        "--remote",
        "remotes",
        metavar="[USER@]HOST[:PORT]",
        multiple=True,
        callback=_remote_value,
        help="List the agents of that machine (repeat for several; then only those "
        "machines are listed, with a MACHINE column).",
    )(func)


def _remote_value(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    from agenthost.remote import parse_remote

    if value is None:
        return None
    try:
        if isinstance(value, tuple):
            return tuple(parse_remote(v) for v in value)
        return parse_remote(value)
    except AgentHostError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        raise click.BadParameter(f"{exc.message}{hint}") from exc


def run_there(remote: Remote, args: list[str], *, output: Path | None = None) -> NoReturn:
    """Run ``agenthost ARGS`` on ``remote`` over ssh and exit with its status: its
    stdout is ours (or goes to ``output``), its stderr is passed on. For commands that
    need no connection to a host (``export``, ``forget``). ssh's own failure, or no
    agenthost there, raise RemoteError."""
    import subprocess

    from agenthost.remote import NOT_FOUND_STATUSES, SSH_FAILED, cannot_run, exit_error

    argv = remote.ssh_argv(args)
    try:
        with open(output, "wb") if output else contextlib.nullcontext() as out:
            proc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, check=False
            )
    except OSError as exc:
        raise cannot_run(remote, argv[0], exc.strerror or str(exc)) from exc
    if proc.returncode in (SSH_FAILED, *NOT_FOUND_STATUSES):
        error = exit_error(remote, proc.returncode, proc.stderr, target=f"`agenthost {args[0]}`")
        if error is not None:
            raise error
    sys.stderr.buffer.write(proc.stderr)
    sys.stderr.flush()
    sys.exit(proc.returncode)


def json_option(func: Callable[P, R]) -> Callable[P, R]:
    """``--json``: machine-readable output on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def print_json(obj: Any) -> None:
    """One JSON document on stdout: readable (non-ASCII text as it is), but with the
    characters a terminal acts on or that reorder text (C1 and bidi controls, which
    ``json.dumps`` leaves raw) written as ``\\uXXXX`` escapes: the same data for a
    parser, nothing for a terminal (see :mod:`agenthost.textsafe`)."""
    from agenthost.cli.views import json_text

    click.echo(json_text(obj))


def fail(exc: AgentHostError, *, as_json: bool, home: Path | None = None) -> NoReturn:
    """Report an error (with its hint) and exit with its status.

    With ``--json`` the error is a JSON object on stdout: ``reason`` names the exit
    status (``no_host``, ``timeout``, ...); ``code`` is the host's wire error code,
    present only when the host itself refused the request.
    """
    code = exit_code_for(exc)
    hint = exc.hint
    agent_id = _AGENT_HINT.get("agent_id")
    if isinstance(exc, HostNotFound | NotConnected) and home is not None and agent_id:
        from agenthost.cli.hints import diagnose  # (only on this error path)

        hint = diagnose(home, agent_id) or hint
    text, on_stderr = error_report(exc, hint, as_json=as_json)
    click.echo(text, err=on_stderr)
    sys.exit(int(code))


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn agenthost errors into a message and a documented exit status."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except AgentHostError as exc:
            home = kwargs.get("home")
            local = not kwargs.get("remote") and not kwargs.get("remotes")
            root = None
            if local and isinstance(home, Path | None):  # (another machine's: no hints)
                with contextlib.suppress(AgentHostError):  # (a home that is a file)
                    root = resolve_home(home)
            fail(exc, as_json=bool(kwargs.get("as_json")), home=root)

    return wrapper


_AGENT_HINT: dict[str, str] = {}


def remember_agent_id(agent_id: str) -> str:
    """Record the agent id a command is about, for the hints of :func:`fail`."""
    _AGENT_HINT["agent_id"] = agent_id
    return agent_id


def complete_agent_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of agent ids: running hosts, and agents that have a journal."""
    from click.shell_completion import CompletionItem

    from agenthost.paths import journals_dir

    home = ctx.params.get("home")
    try:
        root = resolve_home(home if isinstance(home, Path) else None)
    except AgentHostError:  # a home that is a file: nothing to complete
        return []
    ids: set[str] = set()
    with contextlib.suppress(OSError):
        ids |= {a for p in hosts_dir(root).iterdir() if (a := agent_id_from_socket(p))}
    with contextlib.suppress(OSError):
        ids |= {p.name for p in journals_dir(root).iterdir() if p.is_dir()}
    return [CompletionItem(i) for i in sorted(ids) if i.startswith(incomplete)]
