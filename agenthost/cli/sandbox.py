"""``agenthost sandbox ...``: what this machine can confine (``check``), and what an
agent's sandbox would hold (``show``)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from agenthost.cli.common import Exit, handle_errors, home_option, json_option, print_json


@click.group()
def sandbox() -> None:
    """Agent sandboxes (--sandbox PROFILE): what this machine supports, what one holds."""


@sandbox.command("check", short_help="Whether agents can be confined here, and why not.")
@json_option
@handle_errors
def check(as_json: bool) -> None:
    """Check for bubblewrap, user namespaces (trying a sandbox for real) and libseccomp.

    Exit status 0 when agents can be confined, 13 when not (the reason is printed)."""
    from agenthost.sandbox.machine import check as run_check
    from agenthost.textsafe import escape as safe

    report = run_check()
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "reason": report.reason,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks],
            }
        )
    else:
        for item in report.checks:
            mark = "ok  " if item.ok else "FAIL"
            click.echo(f"{mark} {item.name}: {safe(item.detail)}")
        if report.ok:
            click.echo("agents can be confined here: --sandbox strict | net | none")
        else:
            click.echo("agents cannot be confined here; --sandbox refuses to start them")
    if not report.ok:
        raise SystemExit(Exit.CANNOT_START)


@sandbox.command("show", short_help="The sandbox an agent would get, as bubblewrap's command.")
@click.option("--agent", "kind", default="demo", help="The agent's kind (claude, codex, ...).")
@click.option("--profile", default="strict", help="The profile: strict, net or none.")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The agent's worktree (default: the current directory).",
)
@click.option("--agent-id", default="", help="The agent's id ([[sandbox.override]] match it).")
@click.option("--project", default="", help="The agent's project.")
@home_option
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def show(
    kind: str,
    profile: str,
    cwd: Path | None,
    agent_id: str,
    project: str,
    home: Path | None,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Print what an agent of that kind would see: every mount, the hosts it may reach,
    the environment changed for it. Runs nothing."""
    from agenthost.agents import AdapterOptions, make_adapter
    from agenthost.errors import ConfigError
    from agenthost.paths import resolve_home
    from agenthost.sandbox import kinds
    from agenthost.sandbox.layout import Request, build_layout
    from agenthost.sandbox.resolve import resolve
    from agenthost.textsafe import escape as safe

    root = resolve_home(home)
    chosen, settings = resolve(root, profile, agent_id or "show", project)
    if chosen is None:
        raise ConfigError("--profile off: no sandbox to show", hint="give strict, net or none")
    worktree = (cwd or Path.cwd()).absolute()
    adapter = make_adapter(kind, AdapterOptions(str(worktree)))
    argv = adapter.build_command(command)
    env = dict(os.environ)
    hosts = (*kinds.api_hosts(kind, env), *settings.allow_hosts)
    layout = build_layout(
        Request(
            profile=chosen,
            kind=kind,
            command=argv,
            worktree=worktree,
            home=root,
            env=env,
            user_home=Path(env.get("HOME") or os.path.expanduser("~")),
            read_only=settings.read_only,
            read_write=settings.read_write,
            proxy_dir=root / "hosts" / "AGENT.run" if chosen.network == "strict" else None,
            create=False,
        )
    )
    mounts = [{"kind": m.kind, "path": m.dest, "source": m.source} for m in layout.mounts]
    if as_json:
        print_json(
            {
                "profile": chosen.name,
                "mounts": mounts,
                "cwd": layout.cwd,
                "allow_hosts": list(hosts) if chosen.network == "strict" else None,
                "command": argv,
            }
        )
        return
    click.echo(f"profile: {chosen.name} (network: {chosen.network})")
    for m in layout.mounts:
        source = f" <- {m.source}" if m.source and m.source != m.dest else ""
        click.echo(f"  {m.kind:7} {safe(m.dest)}{safe(source)}")
    if chosen.network == "strict":
        click.echo("reachable through the proxy: " + (", ".join(hosts) or "nothing"))
    click.echo("command: " + safe(" ".join(argv)))
