"""The ``lines`` adapter: any command; each stdout line is an ``output`` event."""

from __future__ import annotations

from collections.abc import Sequence

from agenthost.agents.base import Adapter
from agenthost.errors import ConfigError


class LinesAdapter(Adapter):
    """Runs the command given after ``--``; ``send`` writes one line to its stdin."""

    kind = "lines"

    def build_command(self, command: Sequence[str]) -> list[str]:
        if not command:
            raise ConfigError(
                "the lines agent needs a command",
                hint="put it after --, e.g. --agent lines -- bash (with serve or run)",
            )
        return list(command)
