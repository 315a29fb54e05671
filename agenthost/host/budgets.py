"""The agent's budget, applied in the host (:mod:`agenthost.governance.budget` decides).

Built when the host starts with a budget (``--budget-usd``, ``--budget-tokens``) or at
the first ``host.budget``: a host without one imports nothing of it. It sees every
turn's result in the batch that publishes it (``AgentStream.on_result``): a crossing is
recorded there, as a ``governance`` event with the reason, and the agent is
interrupted right after the batch (its turn may still run: a Claude Code turn reports
its cost at its end, an ACP agent's usage may come earlier). From then on
:meth:`Budgets.check_send` refuses sends until ``host.budget`` raises or clears the
limit that was reached.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from agenthost.agents.base import AdapterEvent, Governed, TurnResult
from agenthost.errors import AgentHostError, BudgetExceeded, InvalidPayload
from agenthost.governance.budget import BudgetState, change, observe, raise_command

if TYPE_CHECKING:
    from agenthost.host.stream import AgentStream
    from agenthost.models import Budget, BudgetRequest

log = structlog.get_logger("agenthost.host.budgets")


class Budgets:
    """One host's budget: its limits, what the agent spent, and whether sends pass."""

    def __init__(
        self,
        stream: AgentStream,
        agent_id: str,
        interrupt: Callable[[], object],
        usd: float | None = None,
        tokens: int | None = None,
    ) -> None:
        self.stream = stream
        self.agent_id = agent_id
        self._stop_turn = interrupt
        self.state = BudgetState(usd=usd, tokens=tokens)
        stream.on_result = self.on_result

    def on_result(self, result: TurnResult) -> list[AdapterEvent]:
        """Account for a turn's result; the ``budget_exceeded`` record when it crossed."""
        self.state, crossing = observe(self.state, result.result)
        if crossing is None:
            return []
        log.info("budget.exceeded", limit=crossing.limit, reason=crossing.reason)
        # not inside the batch being published: an interrupt may publish events itself
        asyncio.get_running_loop().call_soon(self._interrupt)
        return [
            Governed(
                "budget_exceeded",
                "host",
                f"{crossing.reason}; the agent was interrupted and sends are refused "
                "until the budget is raised",
                crossing.detail,
            )
        ]

    def _interrupt(self) -> None:
        with contextlib.suppress(AgentHostError):  # it ended meanwhile: nothing to stop
            self._stop_turn()

    def check_send(self) -> None:
        """Raise BudgetExceeded while a limit is reached."""
        if self.state.exceeded is None:
            return
        # the way out is in the message: a hint does not cross the wire
        raise BudgetExceeded(
            f"agent {self.agent_id} is over its budget ({self.state.exceeded}): send "
            f"refused; raise it with: {raise_command(self.agent_id, self.state)}"
        )

    def change(self, request: BudgetRequest) -> Budget:
        """Apply ``host.budget``; record who changed what as ``budget_changed``. A
        request that names no limit only reads the budget."""
        if request.usd is None and request.tokens is None and not request.clear:
            return self.model()
        try:
            self.state, text = change(
                self.state, usd=request.usd, tokens=request.tokens, clear=request.clear
            )
        except ValueError as exc:
            raise InvalidPayload(str(exc)) from None
        actor = request.actor or "cli"
        self.stream.publish([Governed("budget_changed", actor, text, self.state.as_dict())])
        return self.model()

    def model(self) -> Budget:
        """The ``budget`` of ``AgentInfo``."""
        from agenthost.models import Budget

        return Budget(**self.state.as_dict())
