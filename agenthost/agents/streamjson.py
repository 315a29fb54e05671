"""Claude Code's stream-json dialect: parse its stdout lines, format user messages.

Used by the ``demo`` adapter (the built-in agent speaks this dialect) and by the
Claude Code adapter. Sans-IO and defensive: a line that is not JSON, a message of an
unknown type, a content block of an unknown kind or a field of the wrong type yields an
``output`` event (and, for non-JSON, an error note) and never an exception.

What each line becomes (the raw line is always kept as an ``output`` event first):

============================  =================================================
``system`` ``init``           session_id and model into AgentInfo
``assistant`` text block      chat entry, role ``assistant``
``assistant`` tool_use block  chat entry, role ``tool``: tool_name, a short
                              ``tool_input`` summary, the full ``input``,
                              ``tool_use_id``
``assistant`` thinking block  nothing (kept out of history)
``assistant`` API error       the turn failed: an error note (with the HTTP
                              status) and an assistant entry with ``is_error``
``user`` tool_result block    chat entry, role ``tool``: ``tool_result``,
                              ``tool_use_id``, ``is_error``, tool_name of the call
``user`` replay / text        nothing (our own send echoed, or the interrupt
                              marker, which marks the turn interrupted)
``result``                    a ``result`` event, cost and usage into
                              AgentInfo; a failure not reported yet, or
                              "turn interrupted"; state ``idle`` once every
                              user message sent is accounted for
``command_lifecycle``         a user message completed or was cancelled
``control_request``           ``can_use_tool``: a permission request (the host
                              publishes it and waits for a client's answer)
``control_cancel_request``    the agent withdrew a permission request
``control_response``          nothing (the answer to our interrupt)
============================  =================================================

Counting turns: Claude Code folds a user message that arrives while a tool runs (or
while a permission question is open) into the running turn, so one ``result`` may
answer several sends, while a message that arrives as the model streams is queued and
gets a ``result`` of its own. Each send is therefore registered with
:meth:`StreamJsonParser.expect` under the ``uuid`` written on its line, and a
``result`` settles the uuids listed in its ``user_message_uuids`` (the CLI reports them
with ``--replay-user-messages``). A ``result`` that lists none (an older CLI) settles the
oldest send, as one result per send used to.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, Final

from agenthost.agents.base import (
    AdapterEvent,
    Chat,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    UsageLimited,
    turn_failed,
    turn_interrupted,
)
from agenthost.governance.usagelimits import looks_like_limit, reset_from_event
from agenthost.protocol import AgentState

# how Claude Code marks the user line it adds when a turn is interrupted
_INTERRUPT_MARK: Final = "[Request interrupted by user"
# result terminal reasons of an interrupted turn (or a deny that stops it)
_ABORTED: Final = frozenset({"aborted_streaming", "aborted_tools"})
ERROR_MAX: Final = 2000

SUMMARY_MAX: Final = 200

# tool name -> input keys whose value best summarises a call, first present wins
_SUMMARY_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "Bash": ("command",),
    "BashOutput": ("bash_id",),
    "KillShell": ("shell_id",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Glob": ("pattern",),
    "Grep": ("pattern",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Task": ("description", "prompt"),
    "exec_command": ("command", "cmd"),
}


def summarize_tool_input(name: str, tool_input: Any) -> str:
    """A short, readable, single-line summary of a tool call's input."""
    if not isinstance(tool_input, dict):
        return clip(compact(tool_input))
    for key in _SUMMARY_KEYS.get(name, ()):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return clip(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return clip(" ".join(value))
    if name == "TodoWrite" and isinstance(tool_input.get("todos"), list):
        return f"{len(tool_input['todos'])} todos"
    for key in ("command", "file_path", "path", "pattern", "url", "query", "description"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return clip(value)
    return clip(compact(tool_input))


def content_text(content: Any) -> str:
    """Text of a message or tool-result content: a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
        return "\n".join(parts)
    if content is None:
        return ""
    return compact(content)


def user_message(text: str, session_id: str | None = None, uuid: str | None = None) -> bytes:
    """A stream-json user message line for the agent's stdin (always valid JSON).

    ``uuid`` names the message: the CLI lists it in the ``user_message_uuids`` of the
    ``result`` that answered it.
    """
    msg: dict[str, Any] = {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": None,
        "session_id": session_id or "default",
    }
    if uuid is not None:
        msg["uuid"] = uuid
    return (json.dumps(msg, ensure_ascii=True) + "\n").encode()


def interrupt_request(request_id: str) -> bytes:
    """A control request that interrupts the current turn."""
    msg = {"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}}
    return (json.dumps(msg) + "\n").encode()


def permission_response(
    request_id: str,
    allow: bool,
    message: str | None,
    updated_input: dict[str, Any] | None,
    original_input: dict[str, Any],
) -> bytes:
    """The control response answering a ``can_use_tool`` request.

    Allowing always carries ``updatedInput`` (the original input unless replaced);
    denying carries a ``message`` the agent sees as the reason.
    """
    answer: dict[str, Any]
    if allow:
        answer = {"behavior": "allow", "updatedInput": updated_input or original_input}
    else:
        answer = {"behavior": "deny", "message": message or "denied by the user"}
    msg = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": answer},
    }
    return (json.dumps(msg, ensure_ascii=True) + "\n").encode()


class StreamJsonParser:
    """Stateful parser of one agent's stream-json stdout."""

    def __init__(self) -> None:
        # orjson's import (about 15 ms of CPU in a bare process, 0.5 ms in a host) is paid
        # only where agent lines are parsed, not by the command line
        from agenthost import jsontext

        self._loads = jsontext.loads
        self.session_id: str | None = None
        self._tool_names: dict[str, str] = {}  # tool_use_id -> tool name
        self._turns = 0
        # sends not answered yet, oldest first: their uuid, or None if written without
        self._unanswered: deque[str | None] = deque()
        self._in_turn = False
        self._failure_reported = False  # this turn's failure is out already
        self._interrupted = False  # this turn was interrupted
        self._failure_text = ""  # what this turn's failure said
        self._limit_reset: float | None = None  # a rejecting rate_limit_event's reset
        self._total_cost = 0.0  # the last total_cost_usd: the process's cost so far

    def expect(self, uuid: str | None) -> None:
        """A user message was written (with ``uuid``, or None): the agent is busy until
        a ``result`` accounts for it."""
        self._unanswered.append(uuid)

    @property
    def unanswered(self) -> int:
        """How many user messages sent have not been answered yet."""
        return len(self._unanswered)

    def parse(self, line: str) -> list[AdapterEvent]:
        """Events for one stdout line; the first is always the raw line."""
        events: list[AdapterEvent] = [Output(line)]
        stripped = line.strip()
        if not stripped:
            return events
        try:
            # NaN/Infinity are not JSON (Python accepts them): read as null, so that
            # the line can still be published
            obj = self._loads(stripped)
        except (ValueError, RecursionError):
            events.append(ErrorNote(f"agent printed a line that is not JSON: {clip(stripped)}"))
            return events
        if not isinstance(obj, dict):
            return events
        kind = obj.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            events.extend(handler(self, obj))
        return events

    # --- handlers ------------------------------------------------------------------

    def _system(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        if obj.get("subtype") != "init":
            return []
        fields: dict[str, Any] = {}
        if isinstance(obj.get("session_id"), str):
            self.session_id = obj["session_id"]
            fields["session_id"] = obj["session_id"]
        if isinstance(obj.get("model"), str):
            fields["model"] = obj["model"]
        return [InfoUpdate(fields)] if fields else []

    def _assistant(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [Chat({"role": "assistant", "content": content})] if content else []
        if not isinstance(content, list):
            return []
        if obj.get("is_api_error_message") is True:
            # the CLI's own message for a failed model call: the turn failed
            self._failure_reported = True
            status = obj.get("api_error_status")
            text = self._failure_text = clip(content_text(content), ERROR_MAX) or "API error"
            return turn_failed(text, _int(status))
        events: list[AdapterEvent] = []
        # an interrupted answer comes as its partial text, marked "aborted"
        aborted = {"aborted": True} if obj.get("aborted") is True else {}
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
                events.append(Chat({"role": "assistant", "content": block["text"], **aborted}))
            elif kind in ("tool_use", "server_tool_use"):
                events.append(self._tool_use(block))
        return events

    def _tool_use(self, block: dict[str, Any]) -> Chat:
        name = block.get("name") if isinstance(block.get("name"), str) else "tool"
        tool_input = block.get("input")
        entry: dict[str, Any] = {
            "role": "tool",
            "tool_name": name,
            "tool_input": summarize_tool_input(str(name), tool_input),
        }
        if isinstance(tool_input, dict):
            entry["input"] = tool_input
        tool_id = block.get("id")
        if isinstance(tool_id, str):
            entry["tool_use_id"] = tool_id
            self._tool_names[tool_id] = str(name)
            if len(self._tool_names) > 10_000:  # bound memory on endless sessions
                self._tool_names.pop(next(iter(self._tool_names)))
        return Chat(entry)

    def _user(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or obj.get("isReplay") is True:
            # our own send echoed back (--replay-user-messages): already recorded
            return []
        events: list[AdapterEvent] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and text.startswith(_INTERRUPT_MARK):
                    self._interrupted = True
                continue
            if block.get("type") != "tool_result":
                continue
            entry: dict[str, Any] = {
                "role": "tool",
                "tool_result": content_text(block.get("content")),
                "is_error": bool(block.get("is_error", False)),
            }
            tool_id = block.get("tool_use_id")
            if isinstance(tool_id, str):
                entry["tool_use_id"] = tool_id
                name = self._tool_names.pop(tool_id, None)
                if name is not None:
                    entry["tool_name"] = name
            events.append(Chat(entry))
        return events

    def _control_request(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        request = obj.get("request")
        request_id = obj.get("request_id")
        if not isinstance(request, dict) or not isinstance(request_id, str) or not request_id:
            return []
        if request.get("subtype") != "can_use_tool":
            return []  # hooks, MCP messages...: kept as raw output only
        name = request.get("tool_name")
        name = name if isinstance(name, str) and name else "tool"
        tool_input = request.get("input")
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        tool_use_id = request.get("tool_use_id")
        return [
            PermissionAsk(
                request_id=request_id,
                tool_name=name,
                tool_input=summarize_tool_input(name, tool_input),
                input=tool_input,
                tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
            )
        ]

    def _control_cancel(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        request_id = obj.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            return []
        return [PermissionDecided(request_id, "cancelled", "withdrawn by the agent")]

    def _lifecycle(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        state, uuid = obj.get("state"), obj.get("command_uuid")
        if state == "started":
            self._in_turn = True
        elif (
            state in ("completed", "cancelled")
            and isinstance(uuid, str)
            and uuid in self._unanswered
        ):
            # settled without a result listing it (the result lists it otherwise)
            self._unanswered.remove(uuid)
            if not self._unanswered and not self._in_turn:
                return [StateChange(AgentState.IDLE)]
        return []

    def _settle(self, obj: dict[str, Any]) -> bool:
        """Account for the sends a result answered; whether none is left."""
        listed = obj.get("user_message_uuids")
        named = [u for u in listed if isinstance(u, str)] if isinstance(listed, list) else []
        if named:
            for uuid in named:
                if uuid in self._unanswered:
                    self._unanswered.remove(uuid)
        elif self._unanswered:  # a CLI that names no message: one result per send
            self._unanswered.popleft()
        return not self._unanswered

    def _outcome(self, obj: dict[str, Any], result: dict[str, Any]) -> list[AdapterEvent]:
        """The failure or interruption a result reports, unless reported already."""
        failed = obj.get("is_error") is True or str(obj.get("subtype", "")).startswith("error")
        interrupted, reported = self._interrupted, self._failure_reported
        self._interrupted = self._failure_reported = False
        if not failed:
            return []
        reason = obj.get("terminal_reason")
        # (a list or an object there must not raise: they are not hashable)
        if interrupted or (isinstance(reason, str) and reason in _ABORTED):
            result["interrupted"] = True
            return turn_interrupted()
        if reported:
            return []
        text, errors, subtype = obj.get("result"), obj.get("errors"), obj.get("subtype")
        if not (isinstance(text, str) and text) and isinstance(errors, list):
            text = "; ".join(e for e in errors if isinstance(e, str))
        if not (isinstance(text, str) and text):
            text = subtype if isinstance(subtype, str) and subtype else "turn failed"
        self._failure_text = clip(text, ERROR_MAX)
        return turn_failed(self._failure_text, result.get("api_error_status"))

    def _rate_limit(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        # Claude Code signed in with a subscription says when a rejecting limit resets
        self._limit_reset = reset_from_event(obj)
        return []

    def _limited(self, failed: bool) -> list[AdapterEvent]:
        """The turn's usage limit, when it failed on one (then the host pauses)."""
        reset, text = self._limit_reset, self._failure_text
        self._limit_reset, self._failure_text = None, ""
        if not failed or (reset is None and not looks_like_limit(text)):
            return []
        return [UsageLimited(reset, text)]

    def _result(self, obj: dict[str, Any]) -> list[AdapterEvent]:
        self._turns += 1
        self._in_turn = False
        result: dict[str, Any] = {}
        for key, kinds in _RESULT_FIELDS.items():
            value = obj.get(key)
            if isinstance(value, kinds) and (kinds is bool or not isinstance(value, bool)):
                result[key] = value
        cost = obj.get("total_cost_usd", obj.get("cost_usd"))
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            result["cost_usd"] = cost
        total = obj.get("total_cost_usd")
        if isinstance(total, int | float) and not isinstance(total, bool) and total >= 0:
            # the total is the process's so far: this turn's is what it added (a total
            # that went down started again: all of it is this turn's)
            before = self._total_cost if total >= self._total_cost else 0.0
            result["turn_cost_usd"] = round(total - before, 10)
            self._total_cost = float(total)
        if isinstance(obj.get("usage"), dict):
            result["usage"] = obj["usage"]
        if isinstance(obj.get("session_id"), str):
            self.session_id = obj["session_id"]
            result["session_id"] = obj["session_id"]
        info: dict[str, Any] = {"turns": self._turns}
        for key in ("cost_usd", "usage", "session_id"):
            if key in result:
                info[key] = result[key]
        outcome = self._outcome(obj, result)
        failed = obj.get("is_error") is True and result.get("interrupted") is not True
        limited = self._limited(failed)
        events = [*outcome, *limited, TurnResult(result), InfoUpdate(info)]
        if self._settle(obj):
            events.append(StateChange(AgentState.IDLE))
        return events


# what a result line may carry into the result event, with the types we accept
_RESULT_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "subtype": str,
    "is_error": bool,
    "duration_ms": (int, float),
    "duration_api_ms": (int, float),
    "num_turns": int,
    "terminal_reason": str,
    "stop_reason": str,
    "api_error_status": int,
}

_HANDLERS: Final = {
    "system": StreamJsonParser._system,
    "assistant": StreamJsonParser._assistant,
    "user": StreamJsonParser._user,
    "result": StreamJsonParser._result,
    "control_request": StreamJsonParser._control_request,
    "control_cancel_request": StreamJsonParser._control_cancel,
    "command_lifecycle": StreamJsonParser._lifecycle,
    "rate_limit_event": StreamJsonParser._rate_limit,
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compact(value: Any) -> str:
    """Compact JSON of ``value`` (``repr`` if it is not JSON)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (an agent's fields may be null
    or of the wrong type)."""
    return value if isinstance(value, dict) else {}


def remember(table: dict[Any, Any], key: Any, value: Any, limit: int = 1000) -> None:
    """``table[key] = value``, forgetting the oldest entry beyond ``limit``: what an
    adapter keeps per call or message stays bounded on endless sessions."""
    table[key] = value
    if len(table) > limit:
        table.pop(next(iter(table)))


def clip(text: str, limit: int = SUMMARY_MAX) -> str:
    """``text`` on one line (whitespace collapsed), at most ``limit`` characters."""
    text = " ".join(text.split())  # one line: no \n, \r, \t, \v, \f
    return text if len(text) <= limit else text[: limit - 1] + "…"
