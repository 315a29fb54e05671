"""Budgets, sans-IO: what an agent spent, whether it crossed its limits, what a change
of the limits does.

What counts as spent, per host run:

* **USD**: the cost the agent reports for its session. Claude Code's ``total_cost_usd``
  (and the demo agent's) is cumulative for the process, so the spent amount is the
  highest value reported, never a sum of them. Codex reports no cost: a USD budget
  never fires for it (``agenthost budget`` says so by showing ``spent_usd`` 0).
* **Tokens**: the sum, over the turns, of each turn's usage: ``total_tokens`` when the
  agent reports it (Codex), else input + output + cache creation + cache reads
  (Claude's fields): every token the model read or wrote for the turn, which is what
  a rate limit counts.

A report that is not a finite, non-negative number is ignored (an agent's output is
external input). A limit is crossed when the spent amount reaches it (``>=``): a budget
of $1.00 is spent once $1.00 was reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from agenthost.money import USD_DIGITS as USD_DIGITS
from agenthost.money import usd as usd

Limit = Literal["usd", "tokens"]

USD_MAX: Final = 1e9
"""The largest USD limit (a billion dollars: anything above is a typo)."""
USD_RULE: Final = f"a USD limit is a finite number of dollars from 0 to {USD_MAX:.0f}"

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
"""The usage fields that add up to a turn's tokens when there is no ``total_tokens``."""


@dataclass(frozen=True, slots=True)
class BudgetState:
    """Limits (None: none) and what was spent against them."""

    usd: float | None = None
    tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    exceeded: str | None = None
    """Why sends are refused (the crossing's reason), or None."""

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return self.usd is not None or self.tokens is not None

    def as_dict(self) -> dict[str, Any]:
        """The ``budget`` of ``AgentInfo`` (1.4)."""
        return {
            "usd": self.usd,
            "tokens": self.tokens,
            "spent_usd": round(self.spent_usd, 6),
            "spent_tokens": self.spent_tokens,
            "exceeded": self.exceeded,
        }


@dataclass(frozen=True, slots=True)
class Crossing:
    """A turn's report made the agent cross a limit it was under."""

    limit: Limit
    reason: str
    detail: dict[str, Any]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def turn_tokens(usage: object) -> int:
    """The tokens of one turn's ``usage`` report (0 when it reports none usable)."""
    if not isinstance(usage, Mapping):
        return 0
    total = _number(usage.get("total_tokens"))
    if total is not None:
        return int(total)
    return int(sum(_number(usage.get(name)) or 0 for name in TOKEN_FIELDS))


def usd_limit(value: float) -> float:
    """``value`` if it can be a USD limit: a finite number from 0 to :data:`USD_MAX`;
    ValueError (:data:`USD_RULE`) otherwise. The one rule for every way a limit is given
    (``serve``/``run --budget-usd``, ``budget --usd``, ``host.budget``, a daemon's
    spawn): a NaN compares false with everything, so a limit of NaN never fired."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= USD_MAX
    ):
        raise ValueError(f"{USD_RULE}, not {value!r}")
    return float(value)


def observe(state: BudgetState, result: Mapping[str, Any]) -> tuple[BudgetState, Crossing | None]:
    """Account for one turn's result (its ``cost_usd`` and ``usage``); return the new
    state and the crossing, when this report crossed a limit not crossed before."""
    cost = _number(result.get("cost_usd"))
    spent_usd = max(state.spent_usd, cost) if cost is not None else state.spent_usd
    spent_tokens = state.spent_tokens + turn_tokens(result.get("usage"))
    new = replace(state, spent_usd=spent_usd, spent_tokens=spent_tokens)
    if state.exceeded is not None:
        return new, None
    crossing = check(new)
    if crossing is not None:
        new = replace(new, exceeded=crossing.reason)
    return new, crossing


def check(state: BudgetState) -> Crossing | None:
    """The first limit ``state`` has reached, USD first; None when under both."""
    if state.usd is not None and state.spent_usd >= state.usd:
        return Crossing(
            "usd",
            f"spent {usd(state.spent_usd)} of its {usd(state.usd)} budget",
            {"limit": "usd", "usd": state.usd, "spent_usd": round(state.spent_usd, 6)},
        )
    if state.tokens is not None and state.spent_tokens >= state.tokens:
        return Crossing(
            "tokens",
            f"used {state.spent_tokens} tokens of its {state.tokens} token budget",
            {"limit": "tokens", "tokens": state.tokens, "spent_tokens": state.spent_tokens},
        )
    return None


def reached(state: BudgetState) -> list[Limit]:
    """The limits ``state`` has reached (USD first): the ones to raise for sends to
    pass again."""
    out: list[Limit] = []
    if state.usd is not None and state.spent_usd >= state.usd:
        out.append("usd")
    if state.tokens is not None and state.spent_tokens >= state.tokens:
        out.append("tokens")
    return out


def raise_command(agent_id: str, state: BudgetState) -> str:
    """``agenthost budget ID --tokens N``: the command that lets sends through again,
    with the flag of each limit reached (a token budget is not raised by ``--usd``)."""
    flags = {"usd": "--usd AMOUNT", "tokens": "--tokens N"}
    wanted = [flags[limit] for limit in reached(state)] or [flags["usd"]]
    return f"agenthost budget {agent_id} {' '.join(wanted)}"


def change(
    state: BudgetState,
    *,
    usd: float | None = None,
    tokens: int | None = None,
    clear: tuple[Limit, ...] | list[Limit] = (),
) -> tuple[BudgetState, str]:
    """Set or clear limits; return the new state (``exceeded`` re-checked: sends go
    through again once no limit is reached) and a sentence saying what changed."""
    if usd is not None and "usd" in clear or tokens is not None and "tokens" in clear:
        raise ValueError("a limit cannot be both set and cleared")
    new = replace(
        state,
        usd=None if "usd" in clear else (usd if usd is not None else state.usd),
        tokens=None if "tokens" in clear else (tokens if tokens is not None else state.tokens),
    )
    crossing = check(new)
    new = replace(new, exceeded=crossing.reason if crossing is not None else None)
    return new, describe_change(state, new)


def describe_change(before: BudgetState, after: BudgetState) -> str:
    """``USD limit $1.00 -> $5.00; token limit none -> 20000``."""
    parts = []
    if before.usd != after.usd:
        old = "none" if before.usd is None else usd(before.usd)
        parts.append(f"USD limit {old} -> {'none' if after.usd is None else usd(after.usd)}")
    if before.tokens != after.tokens:
        old = "none" if before.tokens is None else str(before.tokens)
        new = "none" if after.tokens is None else str(after.tokens)
        parts.append(f"token limit {old} -> {new}")
    text = "; ".join(parts) or "limits unchanged"
    if before.exceeded is not None and after.exceeded is None:
        text += "; sends allowed again"
    elif after.exceeded is not None:
        text += f"; still over: {after.exceeded}"
    return text
