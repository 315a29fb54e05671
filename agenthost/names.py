"""The names of the host protocol: message types, event types, agent states. Sans-IO.

Plain enumerations, without pydantic: a host answers pings, numbers events and reports
states with these alone, and its models (:mod:`agenthost.models`) are imported only
when a request needs one (see :mod:`agenthost.protocol`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class MessageType(StrEnum):
    """Request types."""

    PING = "host.ping"
    STATUS = "host.status"
    LIST = "host.list"
    ATTACH = "host.attach"
    DETACH = "host.detach"
    HISTORY = "host.history"
    SEND = "host.send"
    STOP = "host.stop"
    # 1.1
    INTERRUPT = "host.interrupt"
    PENDING = "host.pending"
    RESPOND = "host.respond"
    # 1.4
    BUDGET = "host.budget"
    RESUME = "host.resume"
    # 1.7: terminal agents
    INPUT = "host.input"
    RESIZE = "host.resize"
    SIGNAL = "host.signal"
    SCREEN = "host.screen"


MESSAGE_SINCE: Final[dict[str, str]] = {
    MessageType.INTERRUPT: "1.1",
    MessageType.PENDING: "1.1",
    MessageType.RESPOND: "1.1",
    MessageType.BUDGET: "1.4",
    MessageType.RESUME: "1.4",
    MessageType.INPUT: "1.7",
    MessageType.RESIZE: "1.7",
    MessageType.SIGNAL: "1.7",
    MessageType.SCREEN: "1.7",
}
"""The protocol version that introduced each message type newer than 1.0."""

NO_PAYLOAD: Final = frozenset(
    {
        MessageType.PING,
        MessageType.STATUS,
        MessageType.LIST,
        MessageType.DETACH,
        MessageType.INTERRUPT,
        MessageType.PENDING,
        MessageType.RESUME,
    }
)
"""Request types that take no payload (``EmptyRequest``: any object, fields ignored)."""


class EventType(StrEnum):
    """Stream event types. Clients must ignore types they do not know."""

    OUTPUT = "output"
    STATE = "state"
    CHAT_ENTRY = "chat_entry"
    ERROR = "error"
    RESULT = "result"
    # 1.1
    PERMISSION_REQUEST = "permission_request"
    PERMISSION_RESPONSE = "permission_response"
    # 1.4
    GOVERNANCE = "governance"
    # 1.7
    TERMINAL = "terminal"
    TERMINAL_SIZE = "terminal_size"


class AgentState(StrEnum):
    """Agent states reported in AgentInfo and ``state`` events."""

    STARTING = "starting"
    RUNNING = "running"
    IDLE = "idle"
    WAITING = "waiting"
    PAUSED = "paused"
    """(1.4) A turn failed on a usage limit that said when it resets: the host resumes
    the agent then (``AgentInfo.paused_until``), or at ``host.resume``."""
    DONE = "done"
    ERROR = "error"


FINAL_STATES: Final = frozenset({AgentState.DONE, AgentState.ERROR})


TERMINAL_SIGNALS: Final = (
    "SIGINT",
    "SIGQUIT",
    "SIGTERM",
    "SIGHUP",
    "SIGTSTP",
    "SIGCONT",
    "SIGWINCH",
    "SIGUSR1",
    "SIGUSR2",
    "SIGKILL",
)
"""(1.7) What ``host.signal`` may send to a terminal agent's foreground process group."""

TERMINAL_COLS: Final = (2, 1000)
"""(1.7) The columns a terminal may have, at least and at most."""

TERMINAL_ROWS: Final = (1, 1000)
"""(1.7) The rows a terminal may have, at least and at most."""
