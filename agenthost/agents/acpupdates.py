"""ACP ``session/update`` notifications -> adapter events. Sans-IO.

The ``acp`` adapter (:mod:`agenthost.agents.acp`) hands every update of its session to
:class:`SessionUpdates`, which joins message chunks into chat entries, follows tool
calls from their start to their end, and turns the rest into AgentInfo fields. The
editor bridge maps these entries back to ACP, so their shapes are a contract:

- ``agent_message_chunk``: one ``{"role": "assistant", "content": text}`` per ACP
  message (its chunks joined; it ends when anything else is recorded, when its
  ``messageId`` changes (chunks without one, then chunks with one: two messages), or at
  the end of the turn; ``"aborted": True`` when the turn
  was cancelled); ``agent_thought_chunk`` the same with ``"thought": True``.
- ``tool_call``: ``{"role": "tool", "tool_name", "tool_input", "input", "tool_use_id",
  "tool_kind", "status"}``, recorded once the call is known well enough (it has an
  input, it runs, it ended, or the agent asks permission for it): Claude's adapter
  announces a call with an empty ``rawInput`` and sends the input in an update.
- ``tool_call_update`` with status ``completed``/``failed``: ``{"role": "tool",
  "tool_name", "tool_use_id", "tool_result", "is_error", "status"}`` (and
  ``exit_code``). An update of a call never announced (or forgotten: 1000 are kept)
  announces it. A command's output that codex-acp sends beside the content, in
  ``_meta.terminal_output_delta`` (and its end in ``_meta.terminal_exit``), is the
  result when the content only names the terminal.
- ``plan``: ``{"role": "assistant", "content": checklist, "plan": entries}``.
- ``available_commands_update``, ``current_mode_update``, ``usage_update``,
  ``session_info_update`` (and ``plan``): AgentInfo fields only.

Anything else (``user_message_chunk``, update kinds of a later ACP) stays raw output.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from agenthost.acp import schema
from agenthost.agents.base import AdapterEvent, Chat, ErrorNote, InfoUpdate
from agenthost.agents.streamjson import clip, compact, obj, remember

KEPT: Final = 1000
"""Tool calls (and other per-id records) remembered at most: an endless session must
not grow memory."""
MESSAGE_MAX: Final = 1 << 20
"""Characters of one message kept in memory: a longer one is recorded in pieces."""
RESULT_MAX: Final = 1 << 20
"""Characters of a tool result recorded (the raw lines keep all of it)."""
OUTPUT_MAX: Final = 256 << 10
"""Characters of a terminal's streamed output kept per running call."""
FINAL_STATUSES: Final = frozenset({"completed", "failed"})
_SUMMARY_KEYS: Final = (
    "command",
    "cmd",
    "file_path",
    "path",
    "abs_path",
    "pattern",
    "url",
    "query",
    "description",
)
_PLAN_MARKS: Final = {"completed": "[x]", "in_progress": "[~]"}


def text_or(value: Any, default: str = "") -> str:
    """``value`` if it is a non-empty string, else ``default``."""
    return value if isinstance(value, str) and value else default


def block_text(block: Any) -> str:
    """The text of one ACP content block; a readable placeholder for the others."""
    block = obj(block)
    kind = block.get("type")
    if kind == "text":
        return text_or(block.get("text"))
    if kind in ("image", "audio"):
        return f"[{kind}]"
    if kind == "resource_link":
        return f"[{text_or(block.get('name')) or text_or(block.get('uri'), 'resource')}]"
    if kind == "resource":
        resource = obj(block.get("resource"))
        embedded = resource.get("text")
        if isinstance(embedded, str):
            return embedded
        return f"[{text_or(resource.get('uri'), 'resource')}]"
    return f"[{clip(kind, 40)}]" if isinstance(kind, str) and kind else ""


def tool_summary(title: str, raw_input: dict[str, Any], locations: Any) -> str:
    """A short readable summary of a tool call: its command or path, else the path of
    its first location, else the first line of its title."""
    for key in _SUMMARY_KEYS:
        value = raw_input.get(key)
        if isinstance(value, str) and value:
            return clip(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return clip(" ".join(value))
    if isinstance(locations, list) and locations:
        path = obj(locations[0]).get("path")
        if isinstance(path, str) and path:
            return clip(path)
    return clip(title.strip().split("\n", 1)[0]) if title.strip() else ""


def tool_result_text(content: Any, raw_output: Any) -> str:
    """The text of a tool call's content: text blocks, each diff as ``path: +N -M``, a
    terminal as ``[terminal ID]``; its ``rawOutput`` when it has no content."""
    parts: list[str] = []
    for item in content if isinstance(content, list) else ():
        item = obj(item)
        kind = item.get("type")
        if kind == "content":
            parts.append(block_text(item.get("content")))
        elif kind == "diff":
            parts.append(diff_summary(item))
        elif kind == "terminal":
            parts.append(f"[terminal {text_or(item.get('terminalId'), '?')}]")
    text = "\n".join(p for p in parts if p)
    if not text and raw_output is not None:
        text = raw_output if isinstance(raw_output, str) else compact(raw_output)
    return text if len(text) <= RESULT_MAX else text[: RESULT_MAX - 1] + "…"


def _only_terminals(content: Any) -> bool:
    """Whether a call's content is nothing but terminals (or nothing at all)."""
    items = content if isinstance(content, list) else []
    return all(obj(item).get("type") == "terminal" for item in items)


def diff_summary(diff: dict[str, Any]) -> str:
    """``path: +N -M``: lines added and removed (counted as multisets of lines, which
    is linear in the file's size; moved lines do not count)."""
    old, new = diff.get("oldText"), diff.get("newText")
    old_lines = Counter(old.splitlines()) if isinstance(old, str) else Counter[str]()
    new_lines = Counter(new.splitlines()) if isinstance(new, str) else Counter[str]()
    added = sum((new_lines - old_lines).values())
    removed = sum((old_lines - new_lines).values())
    return f"{text_or(diff.get('path'), '?')}: +{added} -{removed}"


def usage_counts(usage: Any) -> dict[str, int]:
    """An ACP ``Usage`` with the snake_case names the other adapters report."""
    names = {
        "inputTokens": "input_tokens",
        "outputTokens": "output_tokens",
        "cachedReadTokens": "cache_read_input_tokens",
        "cachedWriteTokens": "cache_creation_input_tokens",
        "thoughtTokens": "thought_tokens",
        "totalTokens": "total_tokens",
    }
    return {
        ours: value
        for theirs, ours in names.items()
        if isinstance(value := obj(usage).get(theirs), int)
        and not isinstance(value, bool)
        and value >= 0
    }


def plan_entries(entries: Any) -> list[dict[str, str]]:
    """The well-formed entries of a plan (``content``, ``status``, ``priority``)."""
    kept = []
    for entry in entries if isinstance(entries, list) else ():
        entry = obj(entry)
        content = entry.get("content")
        if isinstance(content, str):
            kept.append(
                {
                    "content": content,
                    "status": text_or(entry.get("status"), "pending"),
                    "priority": text_or(entry.get("priority"), "medium"),
                }
            )
    return kept


def plan_text(entries: list[dict[str, str]]) -> str:
    """A plan as a readable checklist: ``[x] done``, ``[~] doing``, ``[ ] to do``."""
    lines = (f"{_PLAN_MARKS.get(e['status'], '[ ]')} {clip(e['content'])}" for e in entries)
    return "\n".join(lines) or "(empty plan)"


@dataclass(slots=True)
class ToolCall:
    """What is known of one ACP tool call."""

    id: str
    title: str = ""
    kind: str = ""
    status: str = "pending"
    input: dict[str, Any] = field(default_factory=dict)
    locations: Any = None
    recorded: bool = False
    output: list[str] = field(default_factory=list)
    """A terminal's output streamed in ``_meta`` (codex-acp), at most OUTPUT_MAX."""
    output_size: int = 0
    exit_code: int | None = None

    @property
    def name(self) -> str:
        """The name it is shown under: its title, else its kind."""
        return clip(self.title) if self.title else self.kind or "tool"

    def merge(self, fields: dict[str, Any]) -> None:
        """Take the fields an update (or a permission request) sets."""
        if isinstance(fields.get("title"), str):
            self.title = fields["title"]
        if isinstance(fields.get("kind"), str):
            self.kind = fields["kind"]
        if fields.get("status") in schema.TOOL_STATUSES:
            self.status = fields["status"]
        raw = fields.get("rawInput")
        if isinstance(raw, dict) and raw:
            self.input = raw
        elif raw is not None and not isinstance(raw, dict):
            self.input = {"input": raw}
        if isinstance(fields.get("locations"), list):
            self.locations = fields["locations"]
        meta = obj(fields.get("_meta"))
        data = obj(meta.get("terminal_output_delta")).get("data")
        if isinstance(data, str) and data and self.output_size < OUTPUT_MAX:
            piece = data[: OUTPUT_MAX - self.output_size]
            self.output.append(piece)
            self.output_size += len(piece)
        code = obj(meta.get("terminal_exit")).get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            self.exit_code = code

    def result_text(self, update: dict[str, Any]) -> str:
        """What the call gave: its content's text, or the output its terminal streamed
        when the content only names the terminal (codex-acp)."""
        content = update.get("content")
        text = tool_result_text(content, update.get("rawOutput"))
        if self.output and _only_terminals(content):
            text = "".join(self.output).rstrip("\n")
            if self.output_size >= OUTPUT_MAX:
                text += "\n… (output cut)"
        return text

    def summary(self) -> str:
        return tool_summary(self.title, self.input, self.locations)

    def start_entry(self) -> dict[str, Any]:
        """The chat entry of the call (recorded once)."""
        entry: dict[str, Any] = {
            "role": "tool",
            "tool_name": self.name,
            "tool_input": self.summary(),
            "input": self.input,
            "tool_use_id": self.id,
            "status": self.status,
        }
        if self.kind:
            entry["tool_kind"] = self.kind
        return entry


@dataclass(slots=True)
class _Message:
    thought: bool
    message_id: str | None
    parts: list[str] = field(default_factory=list)
    size: int = 0


class SessionUpdates:
    """The chat entries and AgentInfo fields of one session's ``session/update``s.

    ``record`` False (a ``session/load`` replaying history already recorded) keeps the
    AgentInfo fields but records no chat entry and remembers no tool call.
    """

    def __init__(self) -> None:
        self.tools: dict[str, ToolCall] = {}
        self.plan: list[dict[str, str]] = []
        self.modes: dict[str, Any] = {}  # {"current", "available"} once the agent told
        self._message: _Message | None = None

    def update(self, update: dict[str, Any], record: bool = True) -> list[AdapterEvent]:
        """Events of one ``update`` object (the ``update`` field of the params)."""
        kind = update.get("sessionUpdate")
        if kind in (schema.AGENT_MESSAGE_CHUNK, schema.AGENT_THOUGHT_CHUNK):
            return self._chunk(update, kind == schema.AGENT_THOUGHT_CHUNK) if record else []
        if kind in (schema.TOOL_CALL, schema.TOOL_CALL_UPDATE):
            return self._tool_call(update) if record else []
        if kind == schema.PLAN:
            return self._plan(update, record)
        if kind == schema.CURRENT_MODE_UPDATE:
            mode = update.get("currentModeId")
            return self.mode(mode) if isinstance(mode, str) else []
        info = _info(kind, update)
        return [InfoUpdate(info)] if info else []

    def flush(self, aborted: bool = False) -> list[AdapterEvent]:
        """The chat entry of the message being streamed, if any (it ended)."""
        message, self._message = self._message, None
        if message is None or not message.size:
            return []
        entry: dict[str, Any] = {"role": "assistant", "content": "".join(message.parts)}
        if message.thought:
            entry["thought"] = True
        if aborted:
            entry["aborted"] = True
        return [Chat(entry)]

    def session_modes(self, modes: Any) -> list[AdapterEvent]:
        """AgentInfo ``mode`` and ``modes`` from the ``modes`` of a session's opening."""
        modes = obj(modes)
        current = modes.get("currentModeId")
        if not isinstance(current, str):
            return []
        available = modes.get("availableModes")
        ids = [obj(m).get("id") for m in (available if isinstance(available, list) else ())]
        self.modes = {"current": current, "available": [i for i in ids if isinstance(i, str)]}
        return self.mode(current)

    def mode(self, mode: str) -> list[AdapterEvent]:
        """AgentInfo fields of the session's new current mode."""
        info: dict[str, Any] = {"mode": mode}
        if self.modes:
            self.modes = {**self.modes, "current": mode}
            info["modes"] = self.modes
        return [InfoUpdate(info)]

    def known_tool(self, tool_call: dict[str, Any]) -> tuple[ToolCall, list[AdapterEvent]]:
        """The tool call a permission request is about, with what the request tells of
        it, and the events that record it (before the question, as for other agents).

        A call the agent never announced (Gemini asks first) gets no entry here: its
        ``tool_call`` follows only if it is allowed.
        """
        tool_id = tool_call.get("toolCallId")
        known = self.tools.get(tool_id) if isinstance(tool_id, str) else None
        if known is None:
            call = ToolCall(tool_id if isinstance(tool_id, str) else "")
            call.merge(tool_call)
            return call, []
        known.merge(tool_call)
        return known, self._record_start(known)

    # --- messages ------------------------------------------------------------------

    def _chunk(self, update: dict[str, Any], thought: bool) -> list[AdapterEvent]:
        text = block_text(update.get("content"))
        message_id = update.get("messageId")
        message_id = message_id if isinstance(message_id, str) else None
        events: list[AdapterEvent] = []
        current = self._message
        if current is not None and (
            current.thought != thought
            # a new id starts a new message, and so does the first id after chunks that
            # had none (codex-acp's warning, then the model's message)
            or (message_id is not None and current.message_id != message_id and current.size)
            or current.size + len(text) > MESSAGE_MAX
        ):
            events = self.flush()
            current = None
        if current is None:
            current = self._message = _Message(thought, message_id)
        elif current.message_id is None:
            current.message_id = message_id
        if text:
            current.parts.append(text)
            current.size += len(text)
        return events

    # --- tool calls ----------------------------------------------------------------

    def _tool_call(self, update: dict[str, Any]) -> list[AdapterEvent]:
        tool_id = update.get("toolCallId")
        if not isinstance(tool_id, str) or not tool_id:
            return [ErrorNote(f"agent sent a {update.get('sessionUpdate')} without a toolCallId")]
        call = self.tools.get(tool_id)
        if call is None:  # an update of a call never announced announces it
            call = ToolCall(tool_id)
            remember(self.tools, tool_id, call, KEPT)
        call.merge(update)
        events = self.flush()
        if call.status in FINAL_STATUSES:
            return [*events, *self._record_start(call), *self._end(call, update)]
        if call.input or call.status == "in_progress":
            events += self._record_start(call)
        return events

    def _record_start(self, call: ToolCall) -> list[AdapterEvent]:
        if call.recorded:
            return []
        call.recorded = True
        return [*self.flush(), Chat(call.start_entry())]

    def _end(self, call: ToolCall, update: dict[str, Any]) -> list[AdapterEvent]:
        self.tools.pop(call.id, None)
        entry: dict[str, Any] = {
            "role": "tool",
            "tool_name": call.name,
            "tool_use_id": call.id,
            "tool_result": call.result_text(update),
            "is_error": call.status == "failed" or call.exit_code not in (None, 0),
            "status": call.status,
        }
        if call.exit_code is not None:
            entry["exit_code"] = call.exit_code
        return [Chat(entry)]

    # --- the rest ------------------------------------------------------------------

    def _plan(self, update: dict[str, Any], record: bool) -> list[AdapterEvent]:
        self.plan = plan_entries(update.get("entries"))
        events: list[AdapterEvent] = [InfoUpdate({"plan": self.plan})]
        if record:
            entry = {"role": "assistant", "content": plan_text(self.plan), "plan": self.plan}
            events = [*self.flush(), Chat(entry), *events]
        return events


def _info(kind: Any, update: dict[str, Any]) -> dict[str, Any]:
    """AgentInfo fields of an update that records nothing ({} for an unknown one)."""
    if kind == schema.AVAILABLE_COMMANDS_UPDATE:
        commands = update.get("availableCommands")
        names = [
            c["name"]
            for c in (commands if isinstance(commands, list) else ())
            if isinstance(c, dict) and isinstance(c.get("name"), str)
        ]
        return {"commands": names}
    if kind == schema.USAGE_UPDATE:
        info: dict[str, Any] = {}
        used, size = update.get("used"), update.get("size")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (used, size)):
            info["context"] = {"used": used, "size": size}
        cost = obj(update.get("cost"))
        amount = _number(cost.get("amount"))
        if cost.get("currency") == "USD" and amount is not None:
            info["cost_usd"] = amount
        return info
    if kind == schema.SESSION_INFO_UPDATE:
        title = update.get("title")
        return {"session_title": title} if isinstance(title, str) else {}
    return {}


def _number(value: Any) -> float | None:
    """``value`` as a finite float, if it is a JSON number that fits one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return number if math.isfinite(number) else None
