"""What an agent's stream becomes for an ACP editor: ``session/update`` bodies. Sans-IO.

:class:`UpdateMapper` turns one stream event into the ``update`` objects of
``session/update`` notifications (docs/acp.md has the table), whatever adapter wrote
the events: chat entries become message, thought, plan and tool call updates; the raw
output of an agent without structured output (``lines``) becomes message text; errors
become message text too, so the user sees them; a permission question sets its tool
call ``pending``, an allow sets it ``in_progress``. It remembers only what the mapping
needs: which tool calls the editor has seen start, and which call each open question
is about. :func:`stop_reason` is a turn's
ACP stop reason, from its last ``result`` event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from agenthost.acp import schema
from agenthost.agents.streamjson import clip, compact

if TYPE_CHECKING:
    from agenthost.protocol import HistoryEntry, PermissionRequest, StreamEvent

KIND_BY_TOOL: Final = {
    "bash": "execute",
    "shell": "execute",
    "exec_command": "execute",
    "read": "read",
    "edit": "edit",
    "multiedit": "edit",
    "write": "edit",
    "notebookedit": "edit",
    "apply_patch": "edit",
    "grep": "search",
    "glob": "search",
    "webfetch": "fetch",
}
"""ACP's tool kind for a tool name (case-insensitive) when the entry names none."""

TITLE_MAX: Final = 200
STARTED_MAX: Final = 4096  # tool call ids remembered (a bound against a flood of calls)


def text_block(text: str) -> dict[str, Any]:
    """An ACP text content block."""
    return {"type": "text", "text": text}


def chunk(kind: str, text: str) -> dict[str, Any]:
    """A message chunk update (``agent_message_chunk``, ``user_message_chunk``, ...)."""
    return {"sessionUpdate": kind, "content": text_block(text)}


def tool_kind(name: str | None, given: Any = None) -> str:
    """The ACP kind of a tool: ``given`` when it is one, else from the tool's name."""
    if isinstance(given, str) and given in schema.TOOL_KINDS:
        return given
    return KIND_BY_TOOL.get((name or "").lower(), "other")


def tool_title(name: str | None, summary: str | None) -> str:
    """``Bash: ls -la``: the tool and its readable input, on one line."""
    name = name or "tool"
    return clip(f"{name}: {summary}" if summary else name, TITLE_MAX)


def permission_tool_call(request: PermissionRequest) -> dict[str, Any]:
    """The ``toolCall`` of a ``session/request_permission`` for a host's request."""
    return {
        "toolCallId": request.tool_use_id or request.request_id,
        "title": tool_title(request.tool_name, request.tool_input),
        "kind": tool_kind(request.tool_name, getattr(request, "tool_kind", None)),
        "status": "pending",
        "rawInput": request.input,
    }


class UpdateMapper:
    """Stream events -> ``session/update`` bodies, for one editor session.

    ``structured`` says whether the agent's output is structured (chat entries): when
    it is not (``lines``), each output line is shown as message text instead.
    """

    def __init__(self, *, structured: bool = True) -> None:
        self.structured = structured
        self._started: dict[str, None] = {}  # tool calls the editor saw start (ordered)
        self._asked: dict[str, str] = {}  # permission request id -> its tool call id
        self._last_error = ""  # the text of the last error shown (see _assistant)

    def reset(self) -> None:
        """A new stream: nothing of the old one was seen."""
        self._started.clear()
        self._asked.clear()
        self._last_error = ""

    def updates(self, event: StreamEvent) -> list[dict[str, Any]]:
        """The updates ``event`` gives (none for states, results, permissions...)."""
        if event.type == "chat_entry" and event.chat_entry is not None:
            return self._entry(event.chat_entry, event.offset)
        if event.type == "output" and not self.structured and event.data is not None:
            text = event.data if event.continued else event.data + "\n"
            return [chunk(schema.AGENT_MESSAGE_CHUNK, text)]
        if event.type == "error" and event.error:
            self._last_error = event.error
            return [chunk(schema.AGENT_MESSAGE_CHUNK, f"Error: {event.error}\n")]
        if event.type == "permission_request" and event.request is not None:
            # the call the question is about waits for an answer
            call_id = event.request.tool_use_id
            if call_id is not None:
                self._asked[event.request.request_id] = call_id
                if len(self._asked) > STARTED_MAX:
                    del self._asked[next(iter(self._asked))]
            return self._status(call_id, "pending")
        if event.type == "permission_response" and event.decision is not None:
            if event.decision.behavior == "allow":  # it runs now
                return self._status(self._asked.pop(event.decision.request_id, None), "in_progress")
            self._asked.pop(event.decision.request_id, None)
        return []

    def _status(self, call_id: str | None, status: str) -> list[dict[str, Any]]:
        """A status update of a tool call the editor saw start (none for another)."""
        if call_id is None or call_id not in self._started:
            return []
        return [{"sessionUpdate": schema.TOOL_CALL_UPDATE, "toolCallId": call_id, "status": status}]

    def _entry(self, entry: HistoryEntry, offset: int) -> list[dict[str, Any]]:
        last_error, self._last_error = self._last_error, ""
        if entry.role == "user":
            return [chunk(schema.USER_MESSAGE_CHUNK, entry.content or "")]
        if entry.role == "assistant":
            return self._assistant(entry, last_error)
        if entry.role == "tool":
            return [self._tool(entry, offset)]
        return []

    def _assistant(self, entry: HistoryEntry, last_error: str) -> list[dict[str, Any]]:
        extra = entry.model_extra or {}
        plan = extra.get("plan")
        if isinstance(plan, list):
            return [{"sessionUpdate": schema.PLAN, "entries": plan_entries(plan)}]
        text = entry.content or ""
        if entry.is_error and text == last_error:
            return []  # a failed turn's record, right after its error event: shown once
        if extra.get("thought") is True:
            return [chunk(schema.AGENT_THOUGHT_CHUNK, text)]
        return [chunk(schema.AGENT_MESSAGE_CHUNK, text)] if text else []

    def _tool(self, entry: HistoryEntry, offset: int) -> dict[str, Any]:
        extra = entry.model_extra or {}
        call_id = entry.tool_use_id or f"agenthost-{offset}"
        seen = call_id in self._started
        update: dict[str, Any] = {"toolCallId": call_id}
        if entry.tool_result is None:
            # an adapter that names no status records a call when it runs (a permission
            # question, if any, follows and sets it pending)
            status = extra.get("status")
            update["status"] = status if status in schema.TOOL_STATUSES else "in_progress"
        else:
            status = extra.get("status")
            if status not in ("completed", "failed"):
                status = "failed" if entry.is_error else "completed"
            update["status"] = status
            content = {"type": "content", "content": text_block(entry.tool_result)}
            update["content"] = [content]
            if "raw_output" in extra:
                update["rawOutput"] = extra["raw_output"]
        if not seen:
            update["title"] = tool_title(entry.tool_name, entry.tool_input)
            update["kind"] = tool_kind(entry.tool_name, extra.get("tool_kind"))
        elif entry.tool_result is None:  # a running call, updated (e.g. its input came)
            if entry.tool_input:
                update["title"] = tool_title(entry.tool_name, entry.tool_input)
            if extra.get("tool_kind") in schema.TOOL_KINDS:
                update["kind"] = extra["tool_kind"]
        if entry.input is not None:
            update["rawInput"] = entry.input
        if seen:
            return {"sessionUpdate": schema.TOOL_CALL_UPDATE, **update}
        self._started[call_id] = None
        if len(self._started) > STARTED_MAX:
            del self._started[next(iter(self._started))]
        return {"sessionUpdate": schema.TOOL_CALL, **update}


_PRIORITIES: Final = ("high", "medium", "low")
_PLAN_STATUSES: Final = ("pending", "in_progress", "completed")


def plan_entries(plan: list[Any]) -> list[dict[str, Any]]:
    """A plan's entries as ACP has them: each with ``content``, ``priority`` and
    ``status`` (entries written by an ACP agent pass as they are; what is missing or
    not one of ACP's values is filled in, so the editor can read every entry)."""
    out = []
    for item in plan:
        entry = dict(item) if isinstance(item, dict) else {"content": item}
        content = entry.get("content")
        entry["content"] = content if isinstance(content, str) else compact(content)
        if entry.get("priority") not in _PRIORITIES:
            entry["priority"] = "medium"
        if entry.get("status") not in _PLAN_STATUSES:
            entry["status"] = "pending"
        out.append(entry)
    return out


def stop_reason(result: dict[str, Any] | None, *, cancelled: bool = False) -> str:
    """A turn's ACP ``stopReason`` from its last ``result`` event: the agent's own
    (ACP agents), ``cancelled`` when it was interrupted (or the editor cancelled it),
    else ``end_turn`` (a failed turn too: its error is in the conversation)."""
    if cancelled:
        return schema.CANCELLED
    result = result or {}
    reason = result.get("stop_reason")
    if isinstance(reason, str) and reason in schema.STOP_REASONS:
        return reason
    if result.get("interrupted") is True:
        return schema.CANCELLED
    return schema.END_TURN
