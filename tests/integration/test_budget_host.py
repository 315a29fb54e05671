"""Budgets in a real host with the demo agent: the crossing interrupts the agent, is
recorded with its reason, refuses sends (API and CLI) until `agenthost budget` raises
the limit, and every change is in the history."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sandboxtools import require_sandbox

from conftest import HostFactory
from hosttools import (
    HostProc,
    attached,
    cli,
    events_until,
    history,
    turn,
)


def _governance(host: HostProc, action: str) -> dict[str, object]:
    with attached(host, offset=0) as conn:
        events = events_until(
            conn,
            lambda e: e["type"] == "governance" and e["governance"]["action"] == action,
        )
    record: dict[str, object] = events[-1]["governance"]
    return record


@pytest.mark.parametrize("sandbox", ["off", "none"])
def test_a_crossed_token_budget_refuses_sends_until_raised(
    home: Path, host_factory: HostFactory, sandbox: str
) -> None:
    if sandbox != "off":  # budgets hold for a sandboxed agent alike
        require_sandbox()
    host = host_factory("b1", "--agent", "demo", "--budget-tokens", "1", "--sandbox", sandbox)
    # (limits that are not set are left out, as every null field of a status)
    assert host.agent()["budget"] == {"tokens": 1, "spent_usd": 0.0, "spent_tokens": 0}
    result = [e for e in turn(host, "hello") if e["type"] == "result"][-1]["result"]
    record = _governance(host, "budget_exceeded")
    spent = sum(result["usage"].values())
    assert record["actor"] == "host"
    assert record["spent_tokens"] == spent and record["tokens"] == 1
    assert f"used {spent} tokens of its 1 token budget" in str(record["reason"])
    host.wait_state("idle")

    with host.raw() as conn:
        refused = conn.request("host.send", {"input": "more"})
    assert (refused["success"], refused["code"]) == (False, "budget_exceeded")
    sent = cli(home, "send", "b1", "more")
    assert sent.returncode == 12, sent
    assert "over its budget" in sent.stderr and "agenthost budget b1" in sent.stderr
    # the token limit was crossed: the way out is --tokens (it said --usd first)
    assert "raise it with: agenthost budget b1 --tokens N" in sent.stderr, sent
    assert "--usd" not in sent.stderr

    raised = cli(home, "budget", "b1", "--tokens", "1000000")
    assert raised.returncode == 0, raised
    assert "tokens: 1000000" in raised.stdout
    changed = _governance(host, "budget_changed")
    assert changed["actor"] == "cli"
    assert changed["reason"] == "token limit 1 -> 1000000; sends allowed again"
    assert any(e["type"] == "result" for e in turn(host, "again"))

    shown = json.loads(cli(home, "budget", "b1", "--json").stdout)
    assert shown["tokens"] == 1000000 and shown["exceeded"] is None
    assert shown["spent_tokens"] > spent
    lines = [
        e["content"]
        for e in history(host)
        if e["role"] == "governance" and e["governance"]["action"] != "sandboxed"
    ]
    assert lines == [
        f"budget exceeded by host: {record['reason']}",
        f"budget changed by cli: {changed['reason']}",
    ]


def test_a_usd_budget_set_later_below_the_spent_cost_refuses_at_once(
    home: Path, host_factory: HostFactory
) -> None:
    host = host_factory("b2", "--agent", "demo")
    assert "budget" not in host.agent()  # no budget: nothing loaded, nothing shown
    turn(host, "hello")  # not counted: no budget existed yet
    lowered = cli(home, "budget", "b2", "--usd", "0")
    assert lowered.returncode == 0, lowered
    assert "USD limit none -> $0.00; still over" in str(_governance(host, "budget_changed"))
    assert cli(home, "send", "b2", "x").returncode == 12
    cleared = cli(home, "budget", "b2", "--clear", "usd")
    assert cleared.returncode == 0 and "usd:    none" in cleared.stdout
    assert any(e["type"] == "result" for e in turn(host, "again"))


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"usd": "5"}, "usd"),
        ({"usd": -1}, "usd"),
        ({"usd": math.nan}, "usd"),  # (a NaN limit never fired: nothing compares to it)
        ({"usd": math.inf}, "usd"),
        ({"usd": -math.inf}, "usd"),
        ({"tokens": 1.5}, "tokens"),
        ({"clear": ["dollars"]}, "clear"),
        ({"usd": 1, "clear": ["usd"]}, "both set and cleared"),
    ],
)
def test_garbage_budget_requests_are_refused_and_change_nothing(
    home: Path, host_factory: HostFactory, payload: dict[str, object], says: str
) -> None:
    host = host_factory("b3", "--agent", "demo", "--budget-usd", "2")
    with host.raw() as conn:
        response = conn.request("host.budget", payload)
    assert (response["success"], response["code"]) == (False, "invalid_payload")
    assert says in response["error"]
    assert host.agent()["budget"]["usd"] == 2.0


@pytest.mark.parametrize("value", ["-1", "abc", str(math.inf), "nan", "-inf", "1e400", "-0.5"])
def test_garbage_budget_options_are_usage_errors(home: Path, value: str) -> None:
    # one rule everywhere, before anything starts: `serve` (in the foreground and
    # --detach), `run` (no daemon is started) and `budget` (no host is asked)
    rule = "a USD limit is a finite number of dollars from 0 to 1000000000"
    for args in (
        ["serve", "--agent-id", "x", "--budget-usd", value],
        ["serve", "--agent-id", "x", "--detach", "--budget-usd", value],
        ["run", "--agent-id", "x", "--budget-usd", value],
        ["budget", "x", "--usd", value],
    ):
        result = cli(home, *args)
        assert result.returncode == 2, result
        assert f"{rule}, not {value!r}" in result.stderr, result
        assert "Traceback" not in result.stderr
    assert cli(home, "budget", "x", "--tokens", value).returncode == 2
    assert list(home.iterdir()) == []  # no host, no daemon, no log


def test_set_and_clear_together_is_a_usage_error(home: Path) -> None:
    result = cli(home, "budget", "x", "--usd", "1", "--clear", "usd")
    assert result.returncode == 2 and "both set and cleared" in result.stderr
