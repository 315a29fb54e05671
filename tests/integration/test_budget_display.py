"""Amounts as ``budget``, ``status`` and ``list`` print them: exact enough for small
budgets (issue 28: a budget of $0.001 read ``$0.00``)."""

from __future__ import annotations

from pathlib import Path

from agenthost.governance.budget import usd

from conftest import HostFactory
from hosttools import cli, turn


def test_a_small_budget_reads_as_set(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("b1", "--agent", "demo", "--budget-usd", "0.001")
    shown = cli(home, "budget", "b1")
    assert shown.returncode == 0, shown
    assert shown.stdout.splitlines()[0] == "usd:    $0.001 (spent $0.00)"
    assert "budget:       $0.001 (spent $0.00, 0 tokens)" in cli(home, "status", "b1").stdout
    result = [e for e in turn(host, "hello") if e["type"] == "result"][-1]["result"]
    spent = usd(result["cost_usd"])
    assert spent not in ("$0.00", "$0.0000")  # what the demo spent shows
    host.wait_state("idle")
    shown = cli(home, "budget", "b1")
    assert shown.stdout.splitlines()[0] == f"usd:    $0.001 (spent {spent})"
    assert f"cost:         {spent}" in cli(home, "status", "b1").stdout
    (row,) = [r for r in cli(home, "list").stdout.splitlines() if r.startswith("b1 ")]
    assert row.rstrip().endswith(f" {spent}")
