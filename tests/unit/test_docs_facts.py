"""Facts the docs state about the code, checked against the code (issue 28): the
protocol version hosts answer with, the fields of the daemon's messages, the variables
a notice's command gets, and which commands take --json."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from pydantic import BaseModel

from agenthost.attention import channels
from agenthost.cli import cli
from agenthost.daemon.limits import Limits
from agenthost.daemon.protocol import (
    DAEMON_PROTOCOL_VERSION,
    DAEMON_REQUEST_PAYLOADS,
    DAEMON_RESPONSE_PAYLOADS,
    DaemonAgent,
    RestartPolicy,
)
from agenthost.protocol import MIN_PROTOCOL_VERSION, PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def lines() -> list[tuple[str, str]]:
    return [
        (f"{doc.name}:{number}", line)
        for doc in DOCS
        for number, line in enumerate(doc.read_text().splitlines(), 1)
    ]


# --- the protocol version -----------------------------------------------------------------

VERSION = r"(\d+\.\d+)"
SPOKEN = [
    re.compile(rf'"protocol_version": ?"{VERSION}"'),  # a ping, a status, a lock file
    re.compile(rf'"host_protocol_version": ?"{VERSION}"'),  # daemon.list
    re.compile(rf"host version: \S+ \(protocol {VERSION}\)"),  # agenthost status
    re.compile(rf"host \S+, protocol {VERSION}, up"),  # agenthost ping
    re.compile(rf"NDJSON, protocol {VERSION}"),  # architecture.md's picture
    re.compile(rf"^# The host protocol, version {VERSION}"),  # protocol.md's title
    re.compile(rf"^Version \S+, protocol {VERSION}"),  # README's status
]
"""Where the docs show the version a host speaks today (in real output, or saying so)."""


def spoken_versions(docs_lines: list[tuple[str, str]]) -> list[str]:
    """Each place that shows a host speaking a version other than PROTOCOL_VERSION."""
    wrong = []
    for where, line in docs_lines:
        if line.startswith("→") or '{"type":' in line.replace(" ", ""):
            continue  # a request: a client may send any version
        # the daemon's own message set, its lock file and its ping
        expected = DAEMON_PROTOCOL_VERSION if "daemon." in line else PROTOCOL_VERSION
        for pattern in SPOKEN:
            for match in pattern.finditer(line):
                if match.group(1) != expected:
                    wrong.append(f"{where}: {match.group(0)} (the code speaks {expected})")
        for found in re.findall(rf'"min_protocol_version": ?"{VERSION}"', line):
            if found != MIN_PROTOCOL_VERSION:
                wrong.append(f"{where}: min_protocol_version {found}")
    return wrong


def test_the_docs_show_the_protocol_version_hosts_speak() -> None:
    assert not (wrong := spoken_versions(lines())), "\n".join(wrong)


@pytest.mark.parametrize(
    "line",
    [
        '← {"kind":"response","type":"host.ping","payload":{"protocol_version":"1.1"}}',
        '      "protocol_version": "1.2",',
        "host version: 0.1.0 (protocol 1.1)",
        "doc: host 0.1.0, protocol 1.0, up 36s",
        "  +------ AF_UNIX, NDJSON, protocol 1.1 ------+",
        '  "host_protocol_version": "1.1",',
        '{"pid": 1, "protocol_version": "1.4", "socket": "/tmp/h/daemon.sock"}',
    ],
)
def test_an_old_version_is_caught(line: str) -> None:
    assert spoken_versions([("x.md:1", line)])


def test_a_request_and_the_daemon_may_show_their_own() -> None:
    assert not spoken_versions(
        [
            ("x.md:1", '→ {"type":"host.ping","id":"v3","protocol_version":"1.7"}'),
            ("x.md:2", '{"type": "host.ping", "id": "r1", "protocol_version": "1.0"}'),
            ("x.md:3", '{"pid": 1, "protocol_version": "1.0", "socket": "/tmp/h/daemon.sock"}'),
            ("x.md:4", f'"protocol_version": "{PROTOCOL_VERSION}",'),
        ]
    )


# --- the daemon's messages ----------------------------------------------------------------


def daemon_table() -> dict[str, tuple[str, str]]:
    """docs/daemon.md's table of messages: type -> (request cell, response cell)."""
    rows = {}
    for line in (ROOT / "docs" / "daemon.md").read_text().splitlines():
        match = re.match(r"^\| `(daemon\.[\w.]+)` \|(.*)\|(.*)\|$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def named(cell: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", cell))


def fields(model: type[BaseModel] | None) -> set[str]:
    return set(model.model_fields) if model is not None else set()


NESTED = {"restart": set(RestartPolicy.model_fields), "limits": set(Limits().describe())}
"""Fields whose own fields the table lists too."""
SUMMED_UP = {
    ("daemon.list", "response"): {"agents"},  # [DaemonAgent]: its section lists them
    ("daemon.stop", "response"): {"agent_id"},  # "and host.stop's payload" (protocol.md)
    ("daemon.watch", "response"): {"agents"},  # {agent_id: WatchStart}, section 4
}


def test_the_daemon_table_lists_every_field_of_every_message() -> None:
    table = daemon_table()
    assert set(table) == {str(t) for t in DAEMON_REQUEST_PAYLOADS}
    missing = []
    for mtype, (request, response) in table.items():
        for side, cell, model in (
            ("request", request, DAEMON_REQUEST_PAYLOADS[mtype]),  # type: ignore[index]
            ("response", response, DAEMON_RESPONSE_PAYLOADS[mtype]),  # type: ignore[index]
        ):
            wanted = SUMMED_UP.get((mtype, side), fields(model))
            for name in sorted(wanted):
                wanted = wanted | NESTED.get(name, set())
            missing += [f"{mtype} {side}: {name}" for name in sorted(wanted - named(cell))]
    assert not missing, missing


def test_the_daemon_list_section_names_every_field_of_an_agent() -> None:
    text = (ROOT / "docs" / "daemon.md").read_text()
    section = text.split("### daemon.list", 1)[1].split("\n### ", 1)[0]
    shown = set(re.findall(r'"(\w+)":', section)) | named(section)
    assert not (missing := set(DaemonAgent.model_fields) - shown), missing


# --- a notice's command -------------------------------------------------------------------


def test_notify_md_names_every_variable_of_a_notices_command_in_full() -> None:
    given = set(re.findall(r'"(AGENTHOST_NOTICE_\w+)"', Path(channels.__file__).read_text()))
    text = (ROOT / "docs" / "notify.md").read_text()
    documented = set(re.findall(r"`(AGENTHOST_NOTICE_\w+)`", text))
    assert len(given) >= 8 and documented == given
    assert not re.search(r"`_[A-Z]+`", text), "an abbreviated variable"


# --- --json -------------------------------------------------------------------------------


def commands(group: click.Group, ctx: click.Context, prefix: str = "") -> dict[str, click.Command]:
    """Every command a user can run, by its words (`web token add`); a group that runs
    without a subcommand (`web`) counts too."""
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        words = f"{prefix}{name}"
        if isinstance(command, click.Group):
            if command.invoke_without_command:
                found[words] = command
            found |= commands(command, ctx, words + " ")
        else:
            found[words] = command
    return found


def takes_json(command: click.Command) -> bool:
    return any("--json" in p.opts for p in command.params)


def documented_without_json() -> set[str]:
    """docs/cli.md's "Commands without --json": the commands its table names."""
    text = (ROOT / "docs" / "cli.md").read_text()
    table = text.split("### Commands without `--json`", 1)[1].split("\n\n", 2)[1]
    return {
        words
        for row in table.splitlines()[2:]
        for words in re.findall(r"`([a-z][a-z -]*)`", row.split("|")[1])
    }


def test_cli_md_says_which_commands_take_json() -> None:
    every = commands(cli, click.Context(cli))
    without = {words for words, command in every.items() if not takes_json(command)}
    assert without and documented_without_json() == without
    readme = (ROOT / "README.md").read_text()
    assert "Every command but" not in readme  # the claim issue 28 found untrue
