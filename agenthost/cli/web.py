"""``agenthost web``: the web gateway (docs/web.md), and ``agenthost web token ...``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agenthost.cli.common import handle_errors, home_option, json_option, print_json
from agenthost.log import LEVELS

SCOPES = ("read", "send", "respond", "control", "admin")
"""agenthost.web.access.SCOPES, without importing the gateway's access rules (a test
checks they agree)."""

if TYPE_CHECKING:
    from agenthost.web.tokens import TokenStore

MORE_TOKENS = "`agenthost web token add NAME --scope send --scope respond`"
"""How to make a token that can talk to agents and answer them (the default scope of
``token add`` only reads): the first start's line says it, and the login page."""


def _seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A deadline: a finite number of seconds above 0 (None: the default)."""
    if value is not None and not 0 < value < float("inf"):  # NaN fails both
        raise click.BadParameter(f"wants a number of seconds above 0, not {value}")
    return value


@click.group(invoke_without_command=True)
@click.option(
    "--listen",
    default="127.0.0.1:8765",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on (port 0: any free port, printed).",
)
@click.option(
    "--tls-cert", type=click.Path(dir_okay=False, exists=True), help="TLS certificate (PEM)."
)
@click.option(
    "--tls-key", type=click.Path(dir_okay=False, exists=True), help="TLS private key (PEM)."
)
@click.option(
    "--insecure-listen",
    is_flag=True,
    help="Allow a non-loopback address without TLS (something else encrypts the traffic).",
)
@click.option(
    "--remote",
    "remotes",
    multiple=True,
    metavar="[USER@]HOST[:PORT]",
    help="Also serve the agents of this machine, over SSH (repeatable).",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name the browser may use to reach the gateway, besides IP addresses "
    "and localhost (repeatable).",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="Where browsers reach the gateway through a proxy in front (e.g. "
    "https://agents.example.org): its origin is accepted as the gateway's own, its host "
    "name too, and https makes the cookie Secure.",
)
@click.option(
    "--head-timeout",
    type=float,
    callback=_seconds,
    metavar="SECONDS",
    help="A connection must send a whole request head this soon, however its bytes "
    "trickle in; also the TLS handshake's limit  [default: 5].",
)
@click.option(
    "--body-timeout",
    type=float,
    callback=_seconds,
    metavar="SECONDS",
    help="A request's body must be in this soon after its head  [default: 10].",
)
@click.option(
    "--write-timeout",
    type=float,
    callback=_seconds,
    metavar="SECONDS",
    help="A client that reads nothing of an answer for this long is cut off  [default: 30].",
)
@click.option("--log-level", type=click.Choice(LEVELS), default="info", show_default=True)
@home_option
@click.pass_context
@handle_errors
def web(
    ctx: click.Context,
    listen: str,
    tls_cert: str | None,
    tls_key: str | None,
    insecure_listen: bool,
    remotes: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    public_url: str | None,
    head_timeout: float | None,
    body_timeout: float | None,
    write_timeout: float | None,
    log_level: str,
    home: Path | None,
) -> None:
    """Serve the web page and the HTTP API of the agents (loopback by default).

    The first start of a home creates the token `admin` and prints it once, when the
    gateway listens.
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = home
        return
    from agenthost.errors import ConfigError
    from agenthost.log import configure_logging
    from agenthost.paths import resolve_home
    from agenthost.remote import parse_remote
    from agenthost.web.limits import Deadlines
    from agenthost.web.server import (
        Options,
        loopback_or_tls,
        parse_listen,
        public_origin,
        serve,
    )
    from agenthost.web.tokens import TokenStore

    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("give both --tls-cert and --tls-key, or neither")
    try:
        host, port = parse_listen(listen)
        for remote in remotes:
            parse_remote(remote)
        public_origin(public_url)
    except ConfigError as exc:
        raise click.UsageError(exc.message) from None
    root = resolve_home(home)
    options = Options(
        home=root,
        host=host,
        port=port,
        tls_cert=Path(tls_cert) if tls_cert else None,
        tls_key=Path(tls_key) if tls_key else None,
        remotes=remotes,
        allowed_hosts=allowed_hosts,
        public_url=public_url,
        deadlines=Deadlines(
            head=Deadlines.head if head_timeout is None else head_timeout,
            body=Deadlines.body if body_timeout is None else body_timeout,
            write=Deadlines.write if write_timeout is None else write_timeout,
        ),
    )
    refusal = loopback_or_tls(options)
    if refusal and not insecure_listen:
        raise click.UsageError(refusal)
    configure_logging(log_level)
    store = TokenStore(root)

    def announce(url: str) -> None:
        # Only now, listening: a start that cannot listen (a port in use) must not
        # spend the first token, which is printed once.
        if not store.exists():
            token = store.add("admin", ["admin"])
            click.echo(f"token admin: {token}")
            click.echo(f"(shown once: keep it; {MORE_TOKENS} makes more)", err=True)
        click.echo(f"listening on {url}")
        sys.stdout.flush()

    serve(options, announce)


@web.group(short_help="Add, list or revoke the gateway's access tokens.")
def token() -> None:
    """Manage the gateway's access tokens (changes apply without a restart)."""


def _store(home: Path | None) -> TokenStore:
    """The token store of ``--home`` (given after ``token`` or before it)."""
    from agenthost.paths import resolve_home
    from agenthost.web.tokens import TokenStore

    parent = click.get_current_context().find_object(Path)
    return TokenStore(resolve_home(home or parent))


@token.command(name="add", short_help="Create a token and print it (only now).")
@click.argument("name")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(SCOPES),
    help="What the token may do (repeatable; default read): read, send (messages, a "
    "terminal's keys and size), respond, control (signals to a terminal agent), admin. "
    "Every scope includes read; admin includes all.",
)
@home_option
@handle_errors
def token_add(name: str, scopes: tuple[str, ...], home: Path | None) -> None:
    """Create a token NAME and print it (only now: it is stored hashed)."""
    click.echo(_store(home).add(name, scopes or ("read",)))


@token.command(name="list", short_help="List the tokens' names and scopes.")
@home_option
@json_option
@handle_errors
def token_list(home: Path | None, as_json: bool) -> None:
    """List the tokens (names and scopes; the tokens themselves are not kept)."""
    records = _store(home).records()
    if as_json:
        print_json([r.public() for r in records.values()])
        return
    if not records:
        click.echo("no tokens", err=True)
    for record in records.values():
        click.echo(f"{record.name}\t{','.join(record.scopes)}")


@token.command(name="revoke", short_help="Delete a token: it is refused from now on.")
@click.argument("name")
@home_option
@handle_errors
def token_revoke(name: str, home: Path | None) -> None:
    """Delete token NAME: requests and sessions with it are refused from now on."""
    from agenthost.errors import ConfigError

    if not _store(home).revoke(name):
        raise ConfigError(f"no token named {name!r}")
    click.echo(f"revoked {name}", err=True)
