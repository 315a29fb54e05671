"""The ``pty`` adapter: any program, full screen, in a pseudo-terminal of its own.

The host gives the agent a terminal instead of pipes: what it paints is published as
``terminal`` events (bytes, exactly once, like every event), and clients type into it
(``host.input``), resize it and signal it. See docs/terminal.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from agenthost.agents.base import Adapter, AdapterEvent, PermissionAsk, StateChange, given_command
from agenthost.protocol import AgentState

TERM: str = "xterm-256color"
"""What the agent's terminal says it is: the terminals people and xterm.js are."""


class PtyAdapter(Adapter):
    """Runs the command given after ``--`` in a pseudo-terminal."""

    kind = "pty"
    passthrough = False
    terminal: ClassVar[bool] = True
    known_params = frozenset({"hooks"})
    """``hooks=claude|codex|none``: whose hooks report the agent's state and requests
    (by default: ``claude`` and ``codex`` by their program's name, others none)."""

    answer_hook: Callable[[PermissionAsk, bool, str | None], None] | None = None
    """Where an answer to a permission request goes: the hook that asked (set by the
    host, :mod:`agenthost.host.tuihooks`). Never into the terminal."""

    def build_command(self, command: Sequence[str]) -> list[str]:
        return given_command(self.kind, command, "vim")

    def environment(self) -> dict[str, str]:
        return {"TERM": TERM, "COLORTERM": "truecolor"}

    def encode_input(self, text: str) -> bytes:
        """A message is typed; Enter follows in a write of its own, a moment later
        (:meth:`agenthost.host.terminal.TerminalSide.enter_soon`): a TUI takes text
        and a carriage return that arrive in one read for a paste, not a submit."""
        return text.rstrip("\r\n").encode()

    def on_send(self, text: str) -> list[AdapterEvent]:
        """A message sent to a CLI that reports through hooks starts a turn (Codex's
        TUI says nothing until the turn ends)."""
        return [StateChange(AgentState.RUNNING)] if self.answer_hook is not None else []

    def encode_interrupt(self) -> bytes:
        """Ctrl-C, typed: the terminal's line discipline signals the foreground group,
        and a full-screen program in raw mode reads it as its own key."""
        return b"\x03"

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
        option_id: str | None = None,
    ) -> bytes:
        """The answer goes to the hook that asked; nothing is typed into the terminal."""
        if self.answer_hook is None:
            return super().encode_permission_response(ask, allow, message, updated_input)
        self.answer_hook(ask, allow, message)
        return b""

    def parse_line(self, line: str) -> list[AdapterEvent]:  # pragma: no cover - never fed
        raise AssertionError("a terminal agent's output is not read as lines")
