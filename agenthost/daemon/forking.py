"""What the daemon checks and fills in when it spawns a fork (``agenthost fork``).
Sans-IO.

The client builds the forked agent's spec from the parent's as ``daemon.list`` shows
it, where the values of the environment are hidden: the daemon puts the parent's
values back (:func:`inherit`). A fork never gets more than its parent: no budget
above the parent's, the same sandbox, no larger resource limits, no environment
variable the parent does not have; a spec that asks for more is refused.
"""

from __future__ import annotations

from agenthost.daemon.journalnote import governance_record
from agenthost.daemon.protocol import SpawnSpec
from agenthost.errors import ForkRefused
from agenthost.forks import inherit_env


def inherit(child: SpawnSpec, parent: SpawnSpec, hidden: str) -> SpawnSpec:
    """``child`` with the parent's environment values; ForkRefused when it would get
    more than the parent (see the module's docstring)."""
    for name in ("budget_usd", "budget_tokens", "memory_max", "cpu_max"):
        limit, asked = getattr(parent, name), getattr(child, name)
        if limit is not None and (asked is None or asked > limit):
            raise ForkRefused(
                f"a fork gets at most its parent's {name} ({limit}), not {asked}",
                hint=f"leave --{name.replace('_', '-')} out: the fork copies the parent's",
            )
    if child.sandbox != parent.sandbox:
        raise ForkRefused(
            f"a fork runs in its parent's sandbox ({parent.sandbox or 'as configured'}), "
            f"not {child.sandbox or 'as configured'}"
        )
    return child.model_copy(update={"env": inherit_env(child.env, parent.env, hidden)})


def forked_record(spec: SpawnSpec) -> dict[str, object]:
    """The ``governance`` record that starts a fork's journal: where it came from."""
    fork = spec.fork
    assert fork is not None
    at = f" at offset {fork.offset}" if fork.offset is not None else ""
    return governance_record(
        "forked",
        "daemon",
        f"from {fork.from_agent}{at} (session {fork.session_id})",
        from_agent=fork.from_agent,
        from_offset=fork.offset,
        session_id=fork.session_id,
        point=fork.point,
    )
