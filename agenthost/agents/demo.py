"""The ``demo`` adapter: the built-in scripted agent, no API key needed.

The demo agent (:mod:`agenthost.agents.demo_agent`) runs as a real subprocess and
speaks Claude Code's stream-json dialect, so it exercises the same supervision path,
parser, states and history as a real agent.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from agenthost.agents.base import (
    Adapter,
    AdapterEvent,
    AdapterOptions,
    ErrorNote,
    Output,
    PermissionAsk,
    StateChange,
)
from agenthost.agents.streamjson import (
    StreamJsonParser,
    interrupt_request,
    permission_response,
    user_message,
)
from agenthost.protocol import AgentState


class StreamJsonAdapter(Adapter):
    """Common part of adapters whose agent speaks stream-json on stdin and stdout.

    State: ``idle`` while no turn is pending, ``running`` from a send until the
    ``result`` of the last turn sent (messages sent during a turn queue up in the agent).
    """

    passthrough: ClassVar[bool] = False
    max_line_bytes: ClassVar[int] = 8 << 20

    def __init__(self, options: AdapterOptions | None = None) -> None:
        super().__init__(options)
        self.parser = StreamJsonParser()
        self._pending_turns = 0
        self._fragment_bytes = 0  # size so far of an over-long line being cut
        self._control_ids = 0

    def parse_fragment(self, chunk: str, continued: bool) -> list[AdapterEvent]:
        self._fragment_bytes += len(chunk)
        return [Output(chunk, continued=continued)]

    def initial_state(self) -> AgentState:
        return AgentState.IDLE

    def parse_line(self, line: str) -> list[AdapterEvent]:
        if self._fragment_bytes:
            # the last piece of a line too long to parse: keep it raw, and say so
            size, self._fragment_bytes = self._fragment_bytes + len(line), 0
            return [
                Output(line),
                ErrorNote(
                    f"agent printed a line of about {size} characters, more than the "
                    f"{self.max_line_bytes} bytes parsed; it is kept as raw output only"
                ),
            ]
        events = self.parser.parse(line)
        if any(isinstance(e, StateChange) and e.state is AgentState.IDLE for e in events):
            self._pending_turns = max(0, self._pending_turns - 1)
            if self._pending_turns:
                events = [
                    e
                    for e in events
                    if not (isinstance(e, StateChange) and e.state is AgentState.IDLE)
                ]
        return events

    def encode_input(self, text: str) -> bytes:
        return user_message(text, self.parser.session_id)

    def encode_interrupt(self) -> bytes:
        self._control_ids += 1
        return interrupt_request(f"agenthost-interrupt-{self._control_ids}")

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
    ) -> bytes:
        return permission_response(ask.request_id, allow, message, updated_input, ask.input)

    def on_send(self, text: str) -> list[AdapterEvent]:
        self._pending_turns += 1
        return [StateChange(AgentState.RUNNING)]


class DemoAdapter(StreamJsonAdapter):
    """Runs ``python -m agenthost.agents.demo_agent`` plus any arguments after ``--``."""

    kind = "demo"

    def build_command(self, command: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "agenthost.agents.demo_agent", *command]

    def environment(self) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}
