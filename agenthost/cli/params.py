"""Parameter types of the command line that click does not have as we need them:
numbers without NaN, and a USD limit. A bad value is a usage error (exit 2) naming the
option, before anything starts."""

from __future__ import annotations

import math
from typing import Any

import click


class FloatRange(click.FloatRange):
    """click's FloatRange, without NaN: NaN compares false with both bounds, so click
    took ``--linger nan`` (a host that ended at once), ``stop --timeout nan`` (a
    traceback). Infinities stay what the bounds make of them (``--linger inf``: for
    ever)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


class UsdAmount(click.ParamType[float, Any]):
    """A USD limit (``--budget-usd``, ``budget --usd``): a finite number of dollars
    from 0 to a billion, by the rule of :func:`agenthost.governance.budget.usd_limit`
    (NaN, infinities and negatives are usage errors, exit 2)."""

    name = "usd"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "USD"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        from agenthost.governance.budget import USD_RULE, usd_limit

        try:
            return usd_limit(value if isinstance(value, float) else float(value))
        except ValueError:  # (the rule, with what was typed: "1e400", not inf)
            self.fail(f"{USD_RULE}, not {value!r}", param, ctx)


USD = UsdAmount()
