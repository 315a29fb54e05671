"""A budget crossed by a real Claude Code turn (against the fake model API): the host
records why, refuses the next send, and `agenthost budget` lets sends through again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asking import claude_host
from claude_env import FAST_RETRY_ENV, claude_env, temp_dirs
from clis import require_cli
from fakes.anthropic import FakeAnthropic, text

from conftest import HostFactory
from hosttools import attached, events_until, results, settled_turn


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def test_a_real_turns_cost_crosses_the_budget(
    server: FakeAnthropic, host_factory: HostFactory
) -> None:
    claude_bin = require_cli("claude")
    server.add(text("First answer."), text("Second answer."))
    with temp_dirs() as dirs:
        env = claude_env(server.url, dirs, extra={**FAST_RETRY_ENV})
        host = claude_host(host_factory, "cb1", claude_bin, dirs, env, "--budget-tokens", "1")
        with attached(host, timeout=60) as conn:
            events = settled_turn(conn, "Hello?")
        (result,) = results(events)
        assert result["is_error"] is False and result["usage"]["output_tokens"] > 0
        with attached(host, offset=0, timeout=60) as conn:
            found = events_until(conn, lambda e: e["type"] == "governance")
        record = found[-1]["governance"]
        assert record["action"] == "budget_exceeded" and record["actor"] == "host"
        assert record["spent_tokens"] >= result["usage"]["output_tokens"]
        with host.raw() as conn:
            refused = conn.request("host.send", {"input": "More?"})
            assert refused["code"] == "budget_exceeded"
            raised = conn.request("host.budget", {"tokens": 10**9, "actor": "e2e"})
            assert raised["payload"]["budget"].get("exceeded") is None  # (null: left out)
        with attached(host, timeout=60) as conn:
            again = settled_turn(conn, "More?")
        assert results(again)[0]["is_error"] is False
        assert len(server.turn_requests()) == 2  # the refused send never reached the model
