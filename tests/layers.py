"""The layering rules of agenthost (docs/architecture.md, "Dependency rules"), checked
on the import graph of the package: ``make lint`` runs this file, and
``tests/unit/test_layering.py`` runs the same rules (and proves they can fail).

Indirect imports count: a sans-IO module may not reach asyncio or socket through
another module of ours. The graph is grimp's (the library import-linter is built on;
import-linter itself pulls in rich, which structlog then imports in every host and
CLI start of the test environment, making it unlike a user's).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import grimp

SANS_IO = (
    "agenthost.forks",
    "agenthost.daemon.forking",
    "agenthost.wire.framing",
    "agenthost.wire.codec",
    "agenthost.wire.table",
    "agenthost.wire.connection",
    "agenthost.wire.stream",
    "agenthost.protocol",
    "agenthost.jsontext",
    "agenthost.agentlist",
    "agenthost.money",
    "agenthost.models",
    "agenthost.approval",
    "agenthost.position",
    "agenthost.ringbuffer",
    "agenthost.linesplit",
    "agenthost.host.stream",
    "agenthost.daemon.fanout",
    "agenthost.daemon.policy",
    "agenthost.daemon.spec",
    "agenthost.automation.model",
    "agenthost.automation.cron",
    "agenthost.automation.plan",
    "agenthost.hostfactory.messages",
    "agenthost.names",
    "agenthost.pyargv",
    "agenthost.agents.base",
    "agenthost.agents.streamjson",
    "agenthost.agents.demo",
    "agenthost.agents.claude",
    "agenthost.agents.codex",
    "agenthost.agents.codexsandbox",
    "agenthost.agents.lines",
    "agenthost.agents.programs",
    "agenthost.acp.jsonrpc",
    "agenthost.acp.schema",
    "agenthost.host.confine",
    "agenthost.acp.params",
    "agenthost.acp.updates",
    "agenthost.acp.bridge",
    "agenthost.acp.effects",
    "agenthost.agents.acp",
    "agenthost.agents.acpupdates",
    "agenthost.remote",
    "agenthost.web.access",
    "agenthost.web.payloads",
    "agenthost.web.termbodies",
    "agenthost.web.limits",
    "agenthost.web.linkpage",
    "agenthost.config",
    "agenthost.attention.links",
    "agenthost.attention.policy",
    "agenthost.attention.commandline",
    "agenthost.attention.notices",
    "agenthost.governance",
    "agenthost.governance.budget",
    "agenthost.governance.usagelimits",
    "agenthost.textsafe",
    "agenthost.sandbox.seccomp",
    "agenthost.sandbox.profiles",
    "agenthost.terminal.chunks",
    "agenthost.terminal.sizes",
    "agenthost.terminal.replay",
    "agenthost.terminal.asciicast",
    "agenthost.terminal.keys",
    "agenthost.terminal.local",
    "agenthost.agents.pty",
    "agenthost.sandbox.kinds",
    "agenthost.sandbox.bwrapargs",
    "agenthost.sandbox.allowlist",
    "agenthost.sandbox.proxyrules",
    "agenthost.terminal.hookevents",
    "agenthost.terminal.hooksetup",
    "agenthost.terminal.screen",
    "agenthost.terminal.modes",
    "agenthost.terminal.guard",
    "agenthost.daemon.tuispec",
    "agenthost.automation.webhooks",
)
"""Modules that do no I/O: they import neither asyncio nor socket."""

IO_MODULES = ("asyncio", "socket")

DAEMON_SERVER = tuple(
    f"agenthost.daemon.{name}"
    for name in (
        "service",
        "server",
        "supervisor",
        "startup",
        "spawner",
        "fanout",
        "follower",
        "commands",
        "backfill",
        "reconcile",
        "discovery",
        "run",
    )
)
"""The daemon's own process. Its client side (``client``, ``protocol``, ``files``, and
the ``registry`` read when no daemon answers) is for every client."""


@dataclass(frozen=True)
class Rule:
    """``importer`` must not reach ``imported`` (packages include their modules)."""

    name: str
    importer: str
    imported: str
    as_packages: bool


def rules() -> Iterator[Rule]:
    """Every rule of the layering."""
    for module in SANS_IO:
        for io in IO_MODULES:
            yield Rule("sans-IO modules import neither asyncio nor socket", module, io, False)
    for a, b in (("host", "daemon"), ("daemon", "host")):
        yield Rule(
            "the host and the daemon never import each other",
            f"agenthost.{a}",
            f"agenthost.{b}",
            True,
        )
    for service in ("host", "daemon"):
        yield Rule(
            "the ACP editor bridge is a client of hosts: it imports neither host nor daemon",
            "agenthost.acp",
            f"agenthost.{service}",
            True,
        )
    for forbidden in ("agenthost.host", "agenthost.cli", *DAEMON_SERVER):
        yield Rule(
            "the web gateway is a client of hosts and the daemon: it imports neither the "
            "host, the daemon's server side, nor the CLI",
            "agenthost.web",
            forbidden,
            True,
        )
    for service in ("host", "daemon", "web", "cli"):
        yield Rule(
            "attention's decisions and senders are used by the host, the daemon and the "
            "gateway: they import none of them",
            "agenthost.attention",
            f"agenthost.{service}",
            True,
        )
    for service in ("host", "daemon", "web", "cli", "client"):
        yield Rule(
            "governance decisions are rules in, decisions out: they import no service, "
            "client or CLI",
            "agenthost.governance",
            f"agenthost.{service}",
            True,
        )
    for part in ("approvals", "budgets", "pauses"):
        yield Rule(
            "a part of the host is handed the narrow interface it uses: it never imports "
            "the host it belongs to",
            f"agenthost.host.{part}",
            "agenthost.host.host",
            False,
        )
    for service in ("host", "daemon", "client", "cli", "follow"):
        yield Rule(
            "the wire layer imports none of the services, clients or CLI on it",
            "agenthost.wire",
            f"agenthost.{service}",
            True,
        )


def broken(graph: grimp.ImportGraph, checked: Iterator[Rule]) -> list[str]:
    """One line per broken rule, with the chain of imports that breaks it."""
    out = []
    for rule in checked:
        chain = graph.find_shortest_chain(rule.importer, rule.imported, rule.as_packages)
        if chain is not None:
            out.append(f"{rule.name}: {' -> '.join(chain)}")
    return out


def main() -> int:
    graph = grimp.build_graph("agenthost", include_external_packages=True, cache_dir=None)
    missing = [m for m in SANS_IO if m not in graph.modules]
    problems = [f"no such module (update tests/layers.py): {m}" for m in missing]
    problems += broken(graph, rules())
    for line in problems:
        print(line, file=sys.stderr)
    count = sum(1 for _ in rules())
    print(f"layering: {count - len(problems)} of {count} rules kept")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
