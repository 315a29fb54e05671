"""The layering rules hold, and the check would see them broken (an import added to the
graph, directly or through another module, is reported with its chain)."""

from __future__ import annotations

import grimp
import pytest

from layers import SANS_IO, broken, rules


@pytest.fixture
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("agenthost", include_external_packages=True, cache_dir=None)


def test_every_sans_io_module_named_exists(graph: grimp.ImportGraph) -> None:
    assert [m for m in SANS_IO if m not in graph.modules] == []


def test_the_package_keeps_every_rule(graph: grimp.ImportGraph) -> None:
    assert broken(graph, rules()) == []


@pytest.mark.parametrize(
    ("importer", "imported", "rule"),
    [
        ("agenthost.wire.connection", "asyncio", "sans-IO"),
        ("agenthost.daemon.fanout", "agenthost.wire.server", "sans-IO"),  # indirectly
        ("agenthost.daemon.supervisor", "agenthost.host.host", "never import each other"),
        ("agenthost.host.process", "agenthost.daemon.files", "never import each other"),
        ("agenthost.wire.codec", "agenthost.client", "wire layer"),
    ],
)
def test_a_broken_rule_is_reported_with_its_chain(
    graph: grimp.ImportGraph, importer: str, imported: str, rule: str
) -> None:
    graph.add_import(importer=importer, imported=imported)
    problems = broken(graph, rules())
    assert any(rule in p and importer in p for p in problems), problems
