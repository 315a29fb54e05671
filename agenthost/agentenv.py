"""Handing the agent's extra environment to a host without a command line.

``serve --env KEY=VALUE`` puts values on the host's command line, which every user of
the machine can read (``ps``, ``/proc/PID/cmdline``). A host started in the background
(``serve --detach``, the daemon) gets them instead in one variable of its environment,
which only its own user can read; the host takes the variable out of its environment
at start-up, so neither its agent nor its status ever shows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping

from agenthost.errors import ConfigError

AGENT_ENV_VAR = "AGENTHOST_AGENT_ENV"
"""The variable: a JSON object of string keys to string values."""


def pack(extra: Mapping[str, str]) -> dict[str, str]:
    """The variable to add to a host's environment for ``extra`` (nothing if empty)."""
    if not extra:
        return {}
    return {AGENT_ENV_VAR: json.dumps(dict(extra), ensure_ascii=False)}


def unpack(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Remove the variable from ``environ`` and return what it held.

    Raise ConfigError, naming the variable but never its value (it holds secrets),
    when it is not a JSON object of strings to strings.
    """
    raw = environ.pop(AGENT_ENV_VAR, None)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(
            f"{AGENT_ENV_VAR} must be a JSON object of variable names to string values",
            hint=f"unset {AGENT_ENV_VAR}; it is set by agenthost for the hosts it starts",
        )
    return value
