"""``agenthost hook add|list|rm``: the signed webhooks that ``agenthost web`` takes at
``POST /hooks/NAME`` (docs/hooks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json
from agenthost.cli.spawnopts import SPAWN_OPTIONS, spawn_options, spawn_spec


@click.group()
def hook() -> None:
    """Signed webhooks that send to an agent or start one (agenthost web serves them).

    A delivery to POST /hooks/NAME, signed with the hook's secret (GitHub's
    X-Hub-Signature-256, or X-Agenthost-Signature-256), becomes a message made by the
    hook's template, sent to --agent-id or to a new agent (--new). See docs/hooks.md.
    """


@hook.command("add", short_help="Add a hook: a template and a target.")
@click.argument("name")
@click.option(
    "--new",
    is_flag=True,
    help="Start a new agent for each delivery (id AGENT_ID-YYYYMMDD-HHMMSS, with the "
    "options below) and stop it when its turn ends [default: send to the running "
    "--agent-id].",
)
@click.option(
    "--event",
    "events",
    multiple=True,
    metavar="EVENT[.ACTION]",
    help="Take only this event (pull_request), or this action of it "
    "(pull_request.opened); repeat for several [default: every event].",
)
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The secret (its first line), e.g. the one typed into GitHub: a file of yours "
    "only you can read [default: a new random one, printed once].",
)
@spawn_options
@home_option
@json_option
@click.argument("template")
@handle_errors
def add(
    name: str,
    new: bool,
    events: tuple[str, ...],
    secret_file: Path | None,
    home: Path | None,
    as_json: bool,
    template: str,
    **options: Any,
) -> None:
    """Add hook NAME: each delivery sends TEMPLATE, filled from its payload, to the
    agent --agent-id, or with --new starts a new agent with it.

    TEMPLATE inserts payload fields by their dotted path, e.g.
    'Review {pull_request.html_url}: {pull_request.title}' ({{ and }} are braces;
    nothing else is evaluated). Prints the path to give the sender and, unless
    --secret-file, the new secret (once: it is kept in <home>/webhooks/NAME.secret).
    """
    from agenthost.automation import hookfiles, webhooks
    from agenthost.automation.model import RunTarget
    from agenthost.paths import resolve_home, webhooks_dir

    hookfiles.check_name(name)
    parsed = webhooks.parse_template(template)
    filters = tuple(webhooks.parse_event(e) for e in events)
    ctx = click.get_current_context()
    given = [
        "--" + n.replace("_", "-").replace("kind", "agent")
        for n in SPAWN_OPTIONS
        if n != "agent_id" and ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT
    ]
    if new:
        spec, _ = spawn_spec(options, home=home, remote=None)
        target = RunTarget(new=spec)
    elif given:
        raise click.UsageError(f"{given[0]} describes a new agent: it goes with --new")
    else:
        target = RunTarget(agent_id=options["agent_id"])
    root = resolve_home(home)
    stored = target.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if target.new is not None:  # its id is the runs' prefix: kept even as a default
        stored["new"]["agent_id"] = target.new.agent_id
    secret = _read_secret(secret_file) if secret_file is not None else None
    entry = hookfiles.Hook(name, hookfiles.check_target(stored), parsed, filters)
    value = hookfiles.add_hook(root, entry, secret)
    if as_json:
        body: dict[str, Any] = {"ok": True, "hook": entry.describe()}
        if secret is None:
            body["secret"] = value.decode()
        print_json(body)
        return
    click.echo(f"hook {name}: deliveries to POST {entry.path} -> {target.describe()}")
    if secret is None:
        click.echo(f"secret (shown once; kept in {webhooks_dir(root)}): {value.decode()}")


def _read_secret(path: Path) -> bytes:
    from agenthost.errors import ConfigError
    from agenthost.homefiles import read_checked
    from agenthost.secretfile import MAX_SECRET

    try:
        raw, _ = read_checked(path.absolute(), MAX_SECRET, secret=True)
    except FileNotFoundError:
        raise ConfigError(f"no secret file {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    lines = raw.splitlines()
    return lines[0] if lines else b""


@hook.command("list", short_help="List the hooks and their recent deliveries.")
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=1000),
    default=10,
    show_default=True,
    help="Deliveries shown per hook (--json), the newest first.",
)
@home_option
@json_option
@handle_errors
def list_(limit: int, home: Path | None, as_json: bool) -> None:
    """List the hooks: name, path, target, events and their recent deliveries (the
    runs the daemon recorded: none shown when no daemon runs)."""
    import asyncio

    from agenthost.automation import hookfiles
    from agenthost.automation.hookruns import recent_runs
    from agenthost.daemon.client import daemon_alive
    from agenthost.errors import ConfigError
    from agenthost.paths import resolve_home
    from agenthost.textsafe import escape

    root = resolve_home(home)
    rows: list[dict[str, Any]] = []
    for name in hookfiles.hook_names(root):
        try:
            found = hookfiles.load_hook(root, name)
        except ConfigError as exc:
            rows.append({"name": name, "path": f"/hooks/{name}", "error": exc.message})
            continue
        if found is not None:
            rows.append(found.describe())
    runs: dict[str, list[Any]] = {}
    if rows and daemon_alive(root):
        runs = asyncio.run(recent_runs(root, [r["name"] for r in rows], limit))
    for row in rows:
        row["deliveries"] = runs.get(row["name"], [])
    if as_json:
        print_json({"hooks": rows})
        return
    if not rows:
        click.echo("no hooks (agenthost hook add NAME ... TEMPLATE)")
        return
    for row in rows:
        if "error" in row:
            click.echo(f"{row['name']}  unusable: {escape(row['error'])}")
            continue
        target = row["target"]
        to = f"agent {target['agent_id']}" if "agent_id" in target else "a new agent each"
        events = ", ".join(row["events"]) or "every event"
        click.echo(f"{row['name']}  POST {row['path']}  -> {to}  ({events})")
        for run in row["deliveries"][:3]:
            agent = run.get("agent_id") or "-"
            click.echo(
                f"    {run['started_at']}  {run['result']:<8} {agent}  "
                f"{escape(run.get('reason') or '')}".rstrip()
            )


@hook.command("rm", short_help="Remove a hook and its secret.")
@click.argument("name")
@home_option
@json_option
@handle_errors
def rm(name: str, home: Path | None, as_json: bool) -> None:
    """Remove hook NAME (its definition and its secret): its deliveries are refused."""
    from agenthost.automation import hookfiles
    from agenthost.errors import ConfigError
    from agenthost.paths import resolve_home

    root = resolve_home(home)
    if not hookfiles.remove_hook(root, hookfiles.check_name(name)):
        raise ConfigError(f"there is no hook {name!r}", hint="agenthost hook list shows them")
    if as_json:
        print_json({"ok": True, "removed": name})
        return
    click.echo(f"removed hook {name}")
