"""The ACP values agenthost uses (protocol version 1), by their names in the schema.

Only names: the messages themselves are plain JSON objects built and read where they
are used (the ``acp`` adapter, the editor bridge). docs/acp.md maps them to agenthost's
events.
"""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 1
"""The ACP major version spoken (``initialize``'s ``protocolVersion``)."""

# --- permission options (``session/request_permission``) -------------------------------
ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"
REJECT_ALWAYS: Final = "reject_always"
OPTION_KINDS: Final = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS)

# --- why a prompt turn ended (``session/prompt``'s ``stopReason``) -----------------------
END_TURN: Final = "end_turn"
MAX_TOKENS: Final = "max_tokens"
MAX_TURN_REQUESTS: Final = "max_turn_requests"
REFUSAL: Final = "refusal"
CANCELLED: Final = "cancelled"
STOP_REASONS: Final = (END_TURN, MAX_TOKENS, MAX_TURN_REQUESTS, REFUSAL, CANCELLED)

# --- ``session/update`` kinds (the ``sessionUpdate`` field) ------------------------------
USER_MESSAGE_CHUNK: Final = "user_message_chunk"
AGENT_MESSAGE_CHUNK: Final = "agent_message_chunk"
AGENT_THOUGHT_CHUNK: Final = "agent_thought_chunk"
TOOL_CALL: Final = "tool_call"
TOOL_CALL_UPDATE: Final = "tool_call_update"
PLAN: Final = "plan"
AVAILABLE_COMMANDS_UPDATE: Final = "available_commands_update"
CURRENT_MODE_UPDATE: Final = "current_mode_update"
USAGE_UPDATE: Final = "usage_update"
SESSION_INFO_UPDATE: Final = "session_info_update"

# --- tool call status and kind ---------------------------------------------------------
TOOL_STATUSES: Final = ("pending", "in_progress", "completed", "failed")
TOOL_KINDS: Final = (
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
)

# --- methods ---------------------------------------------------------------------------
INITIALIZE: Final = "initialize"
AUTHENTICATE: Final = "authenticate"
SESSION_NEW: Final = "session/new"
SESSION_LOAD: Final = "session/load"
SESSION_RESUME: Final = "session/resume"
SESSION_FORK: Final = "session/fork"
"""(unstable in the ACP schema) A new session on a copy of another; offered as
``agentCapabilities.sessionCapabilities.fork``."""
SESSION_LIST: Final = "session/list"
SESSION_PROMPT: Final = "session/prompt"
SESSION_CANCEL: Final = "session/cancel"
SESSION_SET_MODE: Final = "session/set_mode"
SESSION_UPDATE: Final = "session/update"
REQUEST_PERMISSION: Final = "session/request_permission"
CANCEL_REQUEST: Final = "$/cancel_request"
FS_READ: Final = "fs/read_text_file"
FS_WRITE: Final = "fs/write_text_file"
TERMINAL_CREATE: Final = "terminal/create"
TERMINAL_OUTPUT: Final = "terminal/output"
TERMINAL_WAIT: Final = "terminal/wait_for_exit"
TERMINAL_KILL: Final = "terminal/kill"
TERMINAL_RELEASE: Final = "terminal/release"
CLIENT_CALLS: Final = (
    FS_READ,
    FS_WRITE,
    TERMINAL_CREATE,
    TERMINAL_OUTPUT,
    TERMINAL_WAIT,
    TERMINAL_KILL,
    TERMINAL_RELEASE,
)
"""What an agent may ask of its client (the host performs them, see ClientCall)."""

META_KEY: Final = "agenthost"
"""Our extension's key in ACP ``_meta`` objects: ``{"agenthost": {"offset": N,
"epoch": "..."}}`` on each update of the editor bridge, ``{"agenthost": {"after": N,
"epoch": "..."}}`` in ``session/load`` to resume after an offset."""
