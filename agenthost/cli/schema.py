"""``agenthost schema``: the JSON Schema of the host's and the daemon's messages.

Published for clients in other languages, and checked in as ``docs/schema/*.json`` so
that every change of the protocol shows as a diff (a test compares the files with the
models).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

SERVICES = ("host", "daemon")
"""The services whose message tables are published, in the order they are printed."""


def schema_texts() -> dict[str, str]:
    """File name -> content of each published schema (``host.json``, ``daemon.json``):
    indent 2, keys sorted, a final newline."""
    # Imported here: ``agenthost schema --help`` loads no model.
    from agenthost.daemon.protocol import DAEMON_MESSAGES
    from agenthost.protocol import HOST_MESSAGES

    tables = {"host": HOST_MESSAGES.json_schema_text, "daemon": DAEMON_MESSAGES.json_schema_text}
    return {f"{service}.json": tables[service]() for service in SERVICES}


@click.command()
@click.argument("service", required=False, type=click.Choice(SERVICES))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the documents (host.json, daemon.json) into this directory, created if "
    "missing, instead of printing them.",
)
def schema(service: str | None, out: Path | None) -> None:
    """Print the JSON Schema of the host's and the daemon's messages.

    For clients in other languages: one document per service, with each request
    type's request and response payloads, the frames a client receives (responses,
    stream events, the daemon's notices) and the request envelope. Without host or
    daemon, both: as one JSON object keyed by service, or as host.json and daemon.json
    with --out.
    """
    texts = schema_texts()
    wanted = [f"{service}.json"] if service else list(texts)
    if out is None:
        if service:
            click.echo(texts[wanted[0]], nl=False)
        else:
            both = {name.removesuffix(".json"): json.loads(texts[name]) for name in wanted}
            click.echo(json.dumps(both, indent=2, ensure_ascii=False))
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            path = out / name
            if path.exists() and path.read_text(encoding="utf-8") == texts[name]:
                click.echo(f"{path}: up to date")
                continue
            path.write_text(texts[name], encoding="utf-8")
            click.echo(f"{path}: written")
    except OSError as exc:
        raise click.ClickException(f"cannot write the schema: {exc}") from None
