"""The ``demo`` adapter: the built-in scripted agent, no API key needed.

The demo agent (:mod:`agenthost.agents.demo_agent`) runs as a real subprocess and
speaks Claude Code's stream-json dialect, so it exercises the same supervision path,
parser, states and history as a real agent.
"""

from __future__ import annotations

import uuid
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
    Write,
)
from agenthost.agents.streamjson import (
    StreamJsonParser,
    interrupt_request,
    permission_response,
    user_message,
)
from agenthost.protocol import AgentState
from agenthost.pyargv import module_argv

REPLAY_FLAG = "--replay-user-messages"
"""Makes Claude Code (and the demo) echo each user message and name the messages each
``result`` answered (``user_message_uuids``), which the turn count relies on."""


class StreamJsonAdapter(Adapter):
    """Common part of adapters whose agent speaks stream-json on stdin and stdout.

    State: ``idle`` while no user message is unanswered, ``running`` from a send until
    a ``result`` has answered every message sent. Each message carries a ``uuid`` and the
    agent's results list the uuids they answered (see :mod:`agenthost.agents.streamjson`:
    Claude Code may answer two sends with one result).
    """

    passthrough: ClassVar[bool] = False
    structured: ClassVar[bool] = True
    max_line_bytes: ClassVar[int] = 8 << 20

    def __init__(self, options: AdapterOptions | None = None) -> None:
        super().__init__(options)
        self.parser = StreamJsonParser()
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
        return self.parser.parse(line)

    def encode_input(self, text: str) -> bytes:
        return user_message(text, self.parser.session_id)

    def send(self, text: str) -> list[AdapterEvent]:
        """The user message with a fresh ``uuid``, counted as unanswered until a result
        lists that uuid."""
        message_id = str(uuid.uuid4())
        self.parser.expect(message_id)
        line = user_message(text, self.parser.session_id, message_id)
        return [Write(line), StateChange(AgentState.RUNNING)]

    def encode_interrupt(self) -> bytes:
        self._control_ids += 1
        return interrupt_request(f"agenthost-interrupt-{self._control_ids}")

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
        option_id: str | None = None,
    ) -> bytes:
        return permission_response(ask.request_id, allow, message, updated_input, ask.input)


class DemoAdapter(StreamJsonAdapter):
    """Runs ``python -m agenthost.agents.demo_agent`` plus any arguments after ``--``."""

    kind = "demo"

    def build_command(self, command: Sequence[str]) -> list[str]:
        # like the claude adapter: echoes and uuids (see StreamJsonAdapter)
        return module_argv("agenthost.agents.demo_agent", REPLAY_FLAG, *command)

    def environment(self) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}
