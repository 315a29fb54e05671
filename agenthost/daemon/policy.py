"""Restart policy decisions: pure functions of what happened and what the policy says."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agenthost.daemon.protocol import RestartPolicy


class Outcome(StrEnum):
    """How a host run ended, as far as the daemon knows."""

    EXITED = "exited"
    """The daemon saw the agent's end (its final state and exit status)."""
    LOST = "lost"
    """The host vanished without the daemon seeing the agent's end (killed, or the
    daemon was down)."""
    STOPPED = "stopped"
    """Stopped through the daemon."""


@dataclass(frozen=True, slots=True)
class RestartDecision:
    """What to do after a host run ended."""

    restart: bool
    delay: float = 0.0
    """Seconds to wait before the new host is spawned."""
    attempt: int = 0
    """The consecutive restart this one is (1 for the first)."""
    gave_up: bool = False
    """True when the agent should restart but the limit is reached."""
    reason: str = ""


CLEAN_SIGNALS = frozenset({"SIGHUP", "SIGINT", "SIGTERM", "SIGPIPE"})
"""Deaths by these signals are deliberate stops, not failures (as for systemd's
``Restart=on-failure``): ``agenthost stop ID`` ends an agent with SIGTERM."""


def is_failure(
    outcome: Outcome,
    *,
    exit_code: int | None,
    state: str,
    signal: str | None = None,
    stop_requested: bool = False,
) -> bool:
    """Whether a run's end counts as a failure for ``on-failure``.

    A stop never does: through the daemon, or asked of the host directly
    (``stop_requested``, which the host reports even when its stop had to SIGKILL). A
    seen end does when the exit status is not 0 (a signal is reported as a negative
    code), except a death by one of :data:`CLEAN_SIGNALS`, or, without a code, when
    the final state is ``error``. A lost host does unless the agent was last seen
    ``done``: a host only vanishes on its own after a stop or its linger time, so an
    unexplained disappearance of a running agent is a crash (the host or its machine
    was killed).
    """
    if outcome is Outcome.STOPPED or stop_requested:
        return False
    if signal in CLEAN_SIGNALS:
        return False
    if outcome is Outcome.EXITED:
        return exit_code != 0 if exit_code is not None else state == "error"
    return state != "done"


def backoff_delay(policy: RestartPolicy, attempt: int) -> float:
    """The delay before restart number ``attempt`` (1, 2, ...): doubling from
    ``backoff``, capped at ``backoff_max``."""
    if attempt < 1:
        return 0.0
    return float(min(policy.backoff * 2.0 ** min(attempt - 1, 60), policy.backoff_max))


def decide(
    policy: RestartPolicy, *, failure: bool, restarts: int, ran_for: float
) -> RestartDecision:
    """Apply ``policy`` to a run that ended.

    ``restarts`` is how many consecutive restarts already happened; ``ran_for`` how
    long the run lasted (a run longer than ``reset_after`` starts a new series).
    """
    if policy.policy == "never":
        return RestartDecision(False, reason="restart policy is never")
    if not failure:
        return RestartDecision(False, reason="the agent did not fail")
    done = 0 if ran_for >= policy.reset_after else restarts
    if done >= policy.max_restarts:
        return RestartDecision(
            False,
            gave_up=True,
            reason=f"restart limit reached ({policy.max_restarts} in a row)",
        )
    attempt = done + 1
    return RestartDecision(
        True,
        delay=backoff_delay(policy, attempt),
        attempt=attempt,
        reason=f"restart {attempt} of at most {policy.max_restarts}",
    )
