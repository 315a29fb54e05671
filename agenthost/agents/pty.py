"""The ``pty`` adapter: any program, full screen, in a pseudo-terminal of its own.

The host gives the agent a terminal instead of pipes: what it paints is published as
``terminal`` events (bytes, exactly once, like every event), and clients type into it
(``host.input``), resize it and signal it. See docs/terminal.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from agenthost.agents.base import Adapter, AdapterEvent
from agenthost.errors import ConfigError

TERM: str = "xterm-256color"
"""What the agent's terminal says it is: the terminals people and xterm.js are."""


class PtyAdapter(Adapter):
    """Runs the command given after ``--`` in a pseudo-terminal."""

    kind = "pty"
    passthrough = False
    terminal: ClassVar[bool] = True

    def build_command(self, command: Sequence[str]) -> list[str]:
        if not command:
            raise ConfigError(
                "the pty agent needs a command",
                hint="put it after --, e.g. --agent pty -- vim (with serve or run)",
            )
        return list(command)

    def environment(self) -> dict[str, str]:
        return {"TERM": TERM, "COLORTERM": "truecolor"}

    def encode_input(self, text: str) -> bytes:
        """A message is typed, then Enter (a carriage return, as a key sends it)."""
        return text.rstrip("\r\n").encode() + b"\r"

    def encode_interrupt(self) -> bytes:
        """Ctrl-C, typed: the terminal's line discipline signals the foreground group,
        and a full-screen program in raw mode reads it as its own key."""
        return b"\x03"

    def parse_line(self, line: str) -> list[AdapterEvent]:  # pragma: no cover - never fed
        raise AssertionError("a terminal agent's output is not read as lines")
