"""The ``lines`` adapter: any command; each stdout line is an ``output`` event."""

from __future__ import annotations

from collections.abc import Sequence

from agenthost.agents.base import Adapter, given_command


class LinesAdapter(Adapter):
    """Runs the command given after ``--``; ``send`` writes one line to its stdin."""

    kind = "lines"

    def build_command(self, command: Sequence[str]) -> list[str]:
        return given_command(self.kind, command, "bash")
