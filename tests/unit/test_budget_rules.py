"""Budgets, sans-IO (agenthost.governance.budget): what counts as spent, when a limit
is crossed, what a change of the limits does."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from agenthost.daemon.protocol import SpawnSpec
from agenthost.governance.budget import (
    USD_RULE,
    BudgetState,
    change,
    check,
    observe,
    raise_command,
    turn_tokens,
    usd,
    usd_limit,
)
from agenthost.models import BudgetRequest


def claude_result(cost: Any, inp: Any = 10, out: Any = 5, **more: Any) -> dict[str, Any]:
    return {"cost_usd": cost, "usage": {"input_tokens": inp, "output_tokens": out, **more}}


def test_usd_spent_is_the_highest_cumulative_cost_reported_not_a_sum() -> None:
    state = BudgetState(usd=1.0)
    state, crossing = observe(state, claude_result(0.4))
    assert (state.spent_usd, crossing) == (0.4, None)
    state, crossing = observe(state, claude_result(0.7))  # cumulative: 0.7, not 1.1
    assert (state.spent_usd, crossing) == (0.7, None)
    state, crossing = observe(state, claude_result(0.5))  # a lower report changes nothing
    assert state.spent_usd == 0.7 and crossing is None


def test_reaching_the_usd_limit_crosses_it_once_with_the_numbers() -> None:
    state, crossing = observe(BudgetState(usd=1.0), claude_result(1.0))
    assert crossing is not None and crossing.limit == "usd"
    assert crossing.reason == "spent $1.00 of its $1.00 budget"
    assert crossing.detail == {"limit": "usd", "usd": 1.0, "spent_usd": 1.0}
    assert state.exceeded == crossing.reason
    state, again = observe(state, claude_result(2.0))
    assert again is None and state.spent_usd == 2.0  # still counted, reported once


def test_tokens_add_up_over_turns_with_claudes_cache_fields() -> None:
    state = BudgetState(tokens=100)
    state, crossing = observe(
        state,
        claude_result(None, 10, 5, cache_creation_input_tokens=20, cache_read_input_tokens=15),
    )
    assert (state.spent_tokens, crossing) == (50, None)
    state, crossing = observe(state, claude_result(None, 40, 10))
    assert state.spent_tokens == 100
    assert crossing is not None and crossing.limit == "tokens"
    assert crossing.reason == "used 100 tokens of its 100 token budget"


def test_codex_total_tokens_wins_over_the_parts() -> None:
    usage = {"input_tokens": 10, "cached_input_tokens": 8, "output_tokens": 3, "total_tokens": 13}
    assert turn_tokens(usage) == 13


@pytest.mark.parametrize(
    "usage",
    [None, [], "many", 7, {"input_tokens": "10"}, {"input_tokens": -5}, {"total_tokens": math.nan}],
)
def test_garbage_usage_counts_nothing(usage: Any) -> None:
    assert turn_tokens(usage) == 0


@pytest.mark.parametrize("cost", ["1.5", -1, math.nan, math.inf, True, None, [1]])
def test_garbage_cost_is_ignored(cost: Any) -> None:
    state, crossing = observe(BudgetState(usd=0.5, spent_usd=0.2), {"cost_usd": cost})
    assert (state.spent_usd, crossing) == (0.2, None)


def test_no_limit_never_crosses_but_still_counts() -> None:
    state, crossing = observe(BudgetState(), claude_result(100.0, 10**6, 10**6))
    assert crossing is None and state.spent_usd == 100.0 and state.spent_tokens == 2 * 10**6
    assert not state.limited


def test_usd_is_checked_before_tokens() -> None:
    state = BudgetState(usd=1.0, tokens=10, spent_usd=2.0, spent_tokens=20)
    crossing = check(state)
    assert crossing is not None and crossing.limit == "usd"


def test_raising_the_reached_limit_lets_sends_through_and_says_so() -> None:
    over = BudgetState(usd=1.0, spent_usd=1.2, exceeded="spent $1.20 of its $1.00 budget")
    raised, text = change(over, usd=5.0)
    assert raised.exceeded is None and raised.usd == 5.0
    assert text == "USD limit $1.00 -> $5.00; sends allowed again"


def test_raising_one_limit_while_the_other_is_reached_keeps_refusing() -> None:
    over = BudgetState(usd=1.0, tokens=10, spent_usd=0.1, spent_tokens=50, exceeded="x")
    still, text = change(over, usd=5.0)
    assert still.exceeded == "used 50 tokens of its 10 token budget"
    assert text.startswith("USD limit $1.00 -> $5.00; still over: used 50 tokens")


def test_lowering_below_what_was_spent_refuses_at_once() -> None:
    lowered, _ = change(BudgetState(usd=10.0, spent_usd=2.0), usd=1.0)
    assert lowered.exceeded == "spent $2.00 of its $1.00 budget"


def test_clearing_removes_a_limit() -> None:
    over = BudgetState(tokens=10, spent_tokens=11, exceeded="x")
    cleared, text = change(over, clear=["tokens"])
    assert cleared.tokens is None and cleared.exceeded is None
    assert text == "token limit 10 -> none; sends allowed again"


def test_setting_and_clearing_the_same_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="both set and cleared"):
        change(BudgetState(), usd=1.0, clear=["usd"])
    with pytest.raises(ValueError, match="both set and cleared"):
        change(BudgetState(), tokens=1, clear=["tokens"])


def test_an_unchanged_budget_says_so() -> None:
    assert change(BudgetState(usd=1.0), usd=1.0)[1] == "limits unchanged"


AMOUNTS = [
    (0, "$0.00"),
    (0.001, "$0.001"),  # a budget of $0.001 read $0.00 (issue 28)
    (0.0009, "$0.0009"),
    (0.00105, "$0.00105"),
    (0.004, "$0.004"),
    (0.0123, "$0.0123"),
    (0.1234567, "$0.1235"),  # four significant digits
    (0.1 + 0.2, "$0.30"),  # cents at least, no float noise
    (1.005, "$1.005"),
    (12.5, "$12.50"),
    (1234.5, "$1234.50"),
    (1e-7, "$0.0000001"),
    (1e9, "$1000000000.00"),
    (float("nan"), "$nan"),  # never raises
    (float("inf"), "$inf"),
]


@pytest.mark.parametrize(("amount", "text"), AMOUNTS)
def test_amounts_read_exactly_enough(amount: float, text: str) -> None:
    assert usd(amount) == text


def test_the_record_of_agent_info() -> None:
    state = BudgetState(usd=1.0, spent_usd=0.1234567, spent_tokens=3)
    assert state.as_dict() == {
        "usd": 1.0,
        "tokens": None,
        "spent_usd": 0.123457,
        "spent_tokens": 3,
        "exceeded": None,
    }


GARBAGE_USD = [math.nan, math.inf, -math.inf, -1.0, -0.001, 1e9 + 1, 1e400, True, "1", None]


@pytest.mark.parametrize("value", GARBAGE_USD, ids=repr)
def test_a_usd_limit_is_a_finite_amount_from_zero_to_a_billion(value: Any) -> None:
    with pytest.raises(ValueError, match="a USD limit is a finite number of dollars"):
        usd_limit(value)


@pytest.mark.parametrize("value", [0, 0.0, 0.001, 1, 2.5, 1e9])
def test_sensible_usd_limits_pass(value: float) -> None:
    assert usd_limit(value) == value and isinstance(usd_limit(value), float)


@pytest.mark.parametrize("value", GARBAGE_USD[:7], ids=repr)
def test_the_protocol_takes_the_same_rule(value: float) -> None:
    # host.budget and the daemon's spawn request: one validator (it was pydantic's
    # allow_inf_nan on one side, a click range that lets NaN through on the other)
    with pytest.raises(ValidationError, match=USD_RULE):
        BudgetRequest.model_validate({"usd": value})
    with pytest.raises(ValidationError, match=USD_RULE):
        SpawnSpec.model_validate({"agent_id": "a1", "budget_usd": value})
    assert BudgetRequest.model_validate({"usd": 3}).usd == 3.0
    assert SpawnSpec.model_validate({"agent_id": "a1", "budget_usd": 0.5}).budget_usd == 0.5


@pytest.mark.parametrize(
    ("state", "command"),
    [
        (BudgetState(tokens=10, spent_tokens=10), "agenthost budget a1 --tokens N"),
        (BudgetState(usd=1.0, spent_usd=1.5), "agenthost budget a1 --usd AMOUNT"),
        (
            BudgetState(usd=1.0, tokens=10, spent_usd=2.0, spent_tokens=11),
            "agenthost budget a1 --usd AMOUNT --tokens N",
        ),
        (BudgetState(usd=5.0, tokens=10, spent_tokens=20), "agenthost budget a1 --tokens N"),
    ],
)
def test_the_way_out_names_the_limit_that_was_reached(state: BudgetState, command: str) -> None:
    assert raise_command("a1", state) == command
