"""``agenthost policy ...`` (the approval policy) and ``agenthost config ...`` (the
home's config.toml)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json

if TYPE_CHECKING:
    from agenthost.config import HomeConfig


def _load(home: Path | None) -> tuple[Path, bool, HomeConfig]:
    """config.toml's path, whether it exists, and its configuration (ConfigError if
    it is invalid)."""
    from agenthost.config import config_path, load_config
    from agenthost.paths import resolve_home

    resolved = resolve_home(home)
    path = config_path(resolved)
    return path, path.exists(), load_config(resolved)


def _timeout_text(seconds: float | None) -> str:
    from agenthost.attention.policy import duration_text

    return "none (a request waits for a person)" if seconds is None else duration_text(seconds)


@click.group()
def policy() -> None:
    """The approval policy of config.toml: what is allowed or denied without asking."""


@policy.command("test", short_help="What the policy would do with a request, and why.")
@click.option("--tool", required=True, help="The tool's name, as the agent gives it (Bash).")
@click.option("--command", "command", default=None, help="The command line it would run.")
@click.option(
    "--path", "paths", multiple=True, metavar="PATH", help="A file it touches (repeatable)."
)
@click.option("--agent", "agent_id", default="", metavar="ID", help="The agent's id.")
@click.option("--project", default="", help="The agent's project.")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The agent's working directory: paths and their symlinks are resolved there "
    "(default: the current directory).",
)
@home_option
@json_option
@handle_errors
def test_command(
    tool: str,
    command: str | None,
    paths: tuple[str, ...],
    agent_id: str,
    project: str,
    cwd: Path | None,
    home: Path | None,
    as_json: bool,
) -> None:
    """What the policy would do with a permission request, and why."""
    from agenthost.attention.policy import decide, resolver, subject_of

    path, _exists, config = _load(home)
    tool_input: dict[str, Any] = {} if command is None else {"command": command}
    request = {"tool_name": tool, "input": tool_input, "locations": [{"path": p} for p in paths]}
    where = resolver(str((cwd or Path.cwd()).absolute()))
    subject = subject_of(request, agent_id, project, where)
    decision = decide(config.policy.rule, subject)
    if as_json:
        print_json(
            {
                "behavior": decision.behavior,
                "reason": decision.reason,
                "rule": decision.rule,
                "source": decision.source,
                "subject": {
                    "tool": subject.tool,
                    "command": subject.command,
                    "paths": list(subject.paths),
                    "real_paths": list(subject.real_paths or ()),
                    "agent": subject.agent_id,
                    "project": subject.project,
                },
                "config": str(path),
            }
        )
        return
    click.echo(f"{decision.behavior}: {decision.reason}")
    if decision.behavior == "ask" and config.policy.ask_timeout is not None:
        limit = _timeout_text(config.policy.ask_timeout)
        click.echo(f"(denied if nobody answers within {limit})")


@policy.command("show", short_help="The rules, numbered, in the order they are tried.")
@home_option
@json_option
@handle_errors
def show(home: Path | None, as_json: bool) -> None:
    """The rules, numbered, in the order they are tried, and the time limit."""
    from agenthost.attention.policy import describe

    path, exists, config = _load(home)
    rules = config.policy.rule
    if as_json:
        print_json(
            {
                "config": str(path),
                "exists": exists,
                "rules": [
                    {"number": n, "text": describe(r, n), **r.model_dump(exclude_none=True)}
                    for n, r in enumerate(rules, 1)
                ],
                "ask_timeout": config.policy.ask_timeout,
                "session_grants": config.policy.session_grants,
            }
        )
        return
    click.echo(f"{path}{'' if exists else ' (none: the defaults)'}")
    for number, rule in enumerate(rules, 1):
        reason = f": {rule.reason}" if rule.reason else ""
        click.echo(f"  {rule.decision:<5}  {describe(rule, number)}{reason}")
    click.echo(f"  ask    {'anything else' if rules else 'every request'} (a person decides)")
    click.echo(f"ask_timeout: {_timeout_text(config.policy.ask_timeout)}")
    grants = "allowed" if config.policy.session_grants else "off"
    click.echo(f"allow for this session: {grants}")


@click.group()
def config() -> None:
    """The home's configuration file, <home>/config.toml."""


@config.command("check", short_help="Validate config.toml and summarise it.")
@home_option
@json_option
@handle_errors
def check(home: Path | None, as_json: bool) -> None:
    """Validate config.toml and summarise it (secrets hidden); a mistake is named with
    its key or line, exit status 2."""
    from agenthost.config import dump_json

    path, exists, loaded = _load(home)
    if as_json:
        print_json({"ok": True, "config": str(path), "exists": exists, **dump_json(loaded)})
        return
    if not exists:
        click.echo(
            f"{path} does not exist: the defaults apply (nothing notified, every "
            "permission request asks a person)"
        )
        return
    channels = loaded.notify.channels
    names = ", ".join(f"{n} ({c.type})" for n, c in channels.items()) or "none"
    click.echo(f"{path} is valid")
    from agenthost.attention.policy import duration_text

    delay = loaded.notify.delay
    click.echo(
        f"  notify: {len(channels)} channel(s): {names}; events: "
        f"{', '.join(loaded.notify.events) or 'none'}; "
        + (f"after {duration_text(delay)}" if delay > 0 else "at once (delay 0)")
    )
    click.echo(
        f"  policy: {len(loaded.policy.rule)} rule(s); ask_timeout "
        f"{_timeout_text(loaded.policy.ask_timeout)}"
    )
    click.echo(f"  web: public_url {loaded.web.public_url or '(unset: notices carry no links)'}")
    box = loaded.sandbox
    click.echo(
        f"  sandbox: default {box.default}; {len(box.allow_hosts)} allowed host(s); "
        f"{len(box.override)} override(s)"
    )
    click.echo(f"  attach: detach key {loaded.attach.detach_key}")
