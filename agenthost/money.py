"""Amounts of money as every view shows them (the CLI's fast path prints costs too, and
:mod:`agenthost.governance.budget`, which keeps the budgets, costs it ~10 ms to import)."""

from __future__ import annotations

import math

USD_DIGITS = 4
"""Significant digits an amount keeps (at least cents): a budget of $0.001 reads
``$0.001``, never ``$0.00``."""


def usd(amount: float) -> str:
    """An amount in dollars as every view shows it: cents at least (``$12.50``), and
    below that as many decimals as :data:`USD_DIGITS` significant digits need, trailing
    zeros dropped (``$0.001``, ``$0.00105``, ``$1.005``, ``$0.00``). Not finite: as
    Python spells it (``$nan``), never an exception."""
    if not math.isfinite(amount):
        return f"${amount}"
    digits = 2
    if amount != 0:
        digits = max(2, min(12, USD_DIGITS - 1 - math.floor(math.log10(abs(amount)))))
    text = f"{amount:.{digits}f}"
    if digits > 2:
        text = text.rstrip("0")
        text += "0" * (2 - len(text.partition(".")[2]))
    return "$" + text
