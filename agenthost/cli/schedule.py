"""``agenthost schedule ...``: agents on a cron schedule, kept by the daemon
(docs/automation.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json
from agenthost.cli.spawnopts import SPAWN_OPTIONS, spawn_options, spawn_spec

T = TypeVar("T")


@click.group()
def schedule() -> None:
    """Agents on a schedule: send an agent a message, or start one, at cron times."""


@schedule.command("add", short_help="Add a schedule: a message at cron times.")
@click.argument("name")
@click.option("--cron", required=True, metavar="EXPR", help="Five fields: '0 3 * * *' is 03:00.")
@click.option(
    "--tz", default=None, metavar="ZONE", help="The zone of --cron (Europe/Paris) [default: local]."
)
@click.option(
    "--new",
    is_flag=True,
    help="Start a new agent for each run (id AGENT_ID-YYYYMMDD-HHMMSS, with the options "
    "below) and stop it when its turn ends [default: send to the running --agent-id].",
)
@click.option(
    "--missed",
    type=click.Choice(["run", "skip"]),
    default="skip",
    show_default=True,
    help="A due time passed while no daemon ran: run once when it starts, or skip it.",
)
@click.option("--replace", is_flag=True, help="Replace a schedule of the same name.")
@spawn_options
@home_option
@json_option
@click.argument("message")
@handle_errors
def add(
    name: str,
    cron: str,
    tz: str | None,
    new: bool,
    missed: str,
    replace: bool,
    home: Path | None,
    as_json: bool,
    message: str,
    **options: Any,
) -> None:
    """Add a schedule NAME: at each time of --cron, send MESSAGE to the agent --agent-id
    (queued behind a turn it is running), or with --new start a new agent with it.

    A run never overlaps the schedule's previous one (it is skipped, and recorded so).
    The daemon keeps the schedule; it is started if none runs.
    """
    from agenthost.automation.model import RunTarget, ScheduleSpec

    ctx = click.get_current_context()
    given = [
        "--" + n.replace("_", "-")
        for n in SPAWN_OPTIONS
        if n != "agent_id" and ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT
    ]
    if new:
        if options["kind"] == "pty":  # before the adapter asks for a command
            _model(RunTarget, new={"agent_id": options["agent_id"], "agent": "pty"})
        spec, _ = spawn_spec(options, home=home, remote=None)
        target = _model(RunTarget, new=spec)
    elif given:
        raise click.UsageError(f"{given[0]} describes a new agent: it goes with --new")
    else:
        target = _model(RunTarget, agent_id=options["agent_id"])
    info = _model(
        ScheduleSpec,
        name=name,
        cron=cron,
        tz=tz,
        missed=missed,
        target=target,
        message=message,
        replace=replace,
    )
    answer = _daemon(home, lambda d: d.schedule_add(info), start=True)
    if as_json:
        print_json({"ok": True, **answer.model_dump(mode="json")})
        return
    click.echo(f"schedule {name}: {_cron(answer.spec)} -> {answer.spec.target.describe()}")
    click.echo(f"next run {_when(answer.next_at, answer.spec.tz)}")


@schedule.command("list", short_help="The schedules, their last and next runs.")
@home_option
@json_option
@handle_errors
def list_(home: Path | None, as_json: bool) -> None:
    """The schedules: when they run, where to, how their last run went, the next time."""
    infos = _daemon(home, lambda d: d.schedules())
    if as_json:
        print_json({"schedules": [i.model_dump(mode="json") for i in infos]})
        return
    if not infos:
        click.echo("no schedules (agenthost schedule add NAME --cron EXPR ...)")
        return
    rows = [("NAME", "WHEN", "TARGET", "LAST RUN", "NEXT RUN")]
    for info in infos:
        last = info.last
        if info.running:
            lastly = f"running since {_when(last.started_at) if last else '?'}"
        elif last is not None:
            lastly = f"{last.result} {_when(last.started_at)}"
        else:
            lastly = "-"
        rows.append((info.spec.name, _cron(info.spec), info.spec.target.describe(), lastly,
                     _when(info.next_at, info.spec.tz)))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]))


@schedule.command("rm", short_help="Remove a schedule (its runs stay recorded).")
@click.argument("name")
@home_option
@json_option
@handle_errors
def rm(name: str, home: Path | None, as_json: bool) -> None:
    """Remove the schedule NAME. A run of it that goes is not stopped."""
    removed = _daemon(home, lambda d: d.schedule_rm(name))
    if as_json:
        print_json({"ok": True, "name": name, "removed": removed})
        return
    click.echo(f"removed schedule {name}")


@schedule.command("run-now", short_help="Start a schedule's run now.")
@click.argument("name")
@home_option
@json_option
@handle_errors
def run_now(name: str, home: Path | None, as_json: bool) -> None:
    """Start a run of the schedule NAME now, out of its times (refused while its last
    run goes)."""
    run = _daemon(home, lambda d: d.schedule_run(name))
    if as_json:
        print_json({"ok": True, "run": run.model_dump(mode="json")})
        return
    click.echo(f"run {run.run_id} of {name} started: {run.agent_id}")


def _model(cls: Callable[..., T], **fields: Any) -> T:
    """The model, or a usage error saying what is wrong (a cron expression, a zone...)."""
    from pydantic import ValidationError

    from agenthost.wire.codec import first_problem

    try:
        return cls(**fields)
    except ValidationError as exc:
        where, text = first_problem(exc)
        raise click.UsageError(f"{where}: {text}" if where else text) from None


def _daemon(home: Path | None, ask: Callable[[Any], Awaitable[T]], *, start: bool = False) -> T:
    """Ask the home's daemon (started first with ``start``)."""
    import asyncio

    import uvloop

    from agenthost.daemon.client import DaemonClient, ensure_daemon
    from agenthost.paths import resolve_home

    root = resolve_home(home)
    started = ensure_daemon(root) if start else 0
    if started:
        click.echo(f"started the daemon (pid {started})", err=True)

    async def go() -> T:
        async with DaemonClient(root) as daemon:
            return await ask(daemon)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(go())


def _cron(spec: Any) -> str:
    return f"{spec.cron} ({spec.tz})" if spec.tz else spec.cron


def _when(value: datetime | None, tz: str | None = None) -> str:
    """A time in the schedule's zone when it has one (03:00 CET), else the local one."""
    if value is None:
        return "-"
    from agenthost.automation.cron import zone

    try:
        local = value.astimezone(zone(tz))
    except ValueError:
        local = value.astimezone()
    return local.strftime("%Y-%m-%d %H:%M %Z")
