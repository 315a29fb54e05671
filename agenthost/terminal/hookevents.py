"""What Claude Code's hooks and Codex's ``notify`` tell the host about a TUI. Sans-IO.

A terminal agent's screen says nothing a program can trust about the agent's state. The
two CLIs we know say it themselves, to a command they run (set up by
:mod:`agenthost.terminal.hooksetup`, delivered by :mod:`agenthost.terminal.hook`):

- Claude Code runs a hook per event, the payload as JSON on its stdin
  (tests/e2e/CLAUDE_FINDINGS.md, "Hooks in the TUI"). ``UserPromptSubmit`` means a turn
  started, ``Stop`` that it ended, ``PermissionRequest`` that the TUI shows its
  permission dialog, and that hook may answer it (:func:`decision_json`).
- Codex runs its ``notify`` program when a turn completes, the payload as JSON in its
  last argument (tests/e2e/CODEX_FINDINGS.md, "notify in the TUI").

:class:`HookMapper` turns one hook (its kind and its JSON payload) into adapter events
(agenthost/agents/base.py) for the host to publish. It keeps what ties hooks together
(the ``tool_use_id`` that only ``PreToolUse`` carries; the open permission requests, so
that one answered in the TUI itself is closed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agenthost.agents.base import (
    AdapterEvent,
    InfoUpdate,
    PermissionAsk,
    PermissionDecided,
    StateChange,
)
from agenthost.agents.streamjson import summarize_tool_input
from agenthost.errors import ProtocolError
from agenthost.names import AgentState

CLAUDE_ORDER: tuple[str, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "SessionEnd",
    "StatusLine",
)
"""The Claude Code hook events the host listens to, in the order a turn meets them."""

CLAUDE_KINDS: frozenset[str] = frozenset(CLAUDE_ORDER)
"""The Claude Code hook events the host listens to (``StatusLine`` is the status line
command's input, which carries the session's cost)."""

CODEX_KINDS: frozenset[str] = frozenset({"notify"})
"""Codex's ``notify`` program (one kind; the payload's ``type`` tells what happened)."""

DECIDING_KINDS: frozenset[str] = frozenset({"PermissionRequest"})
"""Hooks that wait for the host's answer (a person's, or the policy's) before they exit;
the others are told at once."""

TERMINAL_ACTOR = "terminal"
"""The actor of a decision taken in the TUI itself (a person at the agent's terminal)."""

# Codex 0.169.0 names a new thread with a model call of its own, and notifies its
# completion too: not a turn of the user's conversation (CODEX_FINDINGS.md).
_CODEX_TITLE_PROMPT = "Generate a concise, single-line task title"


def _text(payload: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = payload.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"hook payload field {key!r} must be a string, not {value!r:.80}")
    return value


def _key(tool_name: str, tool_input: Any) -> str:
    # the same tool call seen by two hooks: PermissionRequest carries no tool_use_id
    return tool_name + "\0" + json.dumps(tool_input, sort_keys=True, separators=(",", ":"))


class HookMapper:
    """Hook payloads of one agent -> adapter events. One per agent run.

    :meth:`events` for every hook that arrives; :meth:`withdrawn` when a deciding hook
    went away unanswered (the CLI killed it: the person answered "No" or pressed Esc in
    the TUI, or the hook's timeout passed).
    """

    def __init__(self) -> None:
        self._tool_ids: dict[str, str] = {}  # _key(...) -> tool_use_id, from PreToolUse
        self._open: dict[str, PermissionAsk] = {}  # request_id -> the open ask
        self._codex_thread: str | None = None

    @property
    def open_requests(self) -> list[str]:
        """The request ids of the permission requests still open."""
        return list(self._open)

    def events(self, kind: str, payload: Any, request_id: str | None = None) -> list[AdapterEvent]:
        """The events one hook means. ``request_id`` names a deciding hook's request
        (the host makes it unique per hook call). Raises ProtocolError on garbage."""
        if not isinstance(payload, Mapping):
            raise ProtocolError(f"a hook payload must be a JSON object, not {payload!r:.80}")
        if kind in CODEX_KINDS:
            return self._codex(payload)
        if kind not in CLAUDE_KINDS:
            raise ProtocolError(f"unknown hook kind {kind!r:.80}")
        events: list[AdapterEvent] = []
        session = _text(payload, "session_id")
        if session:
            events.append(InfoUpdate({"session_id": session}))
        if kind == "SessionStart":
            model = _text(payload, "model")
            if model:
                events.append(InfoUpdate({"model": model}))
            events.append(StateChange(AgentState.IDLE))  # the TUI waits for a prompt
        elif kind == "UserPromptSubmit":
            events += self._close_all("cancelled", "a new prompt was submitted")
            events.append(StateChange(AgentState.RUNNING))
        elif kind == "PreToolUse":
            name = _text(payload, "tool_name", required=True) or ""
            tool_use_id = _text(payload, "tool_use_id")
            if tool_use_id:
                self._tool_ids[_key(name, payload.get("tool_input"))] = tool_use_id
            events.append(StateChange(AgentState.RUNNING))
        elif kind == "PermissionRequest":
            if not request_id:
                raise ProtocolError("a PermissionRequest hook needs a request id")
            events.append(self._ask(payload, request_id))
        elif kind in ("PostToolUse", "PostToolUseFailure"):
            events += self._tool_done(kind, payload)
            events.append(StateChange(AgentState.RUNNING))
        elif kind in ("Stop", "StopFailure"):
            events += self._close_all("cancelled", "the turn ended")
            events.append(StateChange(AgentState.IDLE))
        elif kind == "Notification":
            # "Claude needs your permission" (permission_prompt) comes ~6 s after the
            # PermissionRequest hook that already made the agent waiting; idle_prompt
            # repeats what Stop said. Neither changes anything here.
            _text(payload, "message")
        elif kind == "StatusLine":
            events += self._status(payload)
        # SessionEnd: the process is exiting; its exit code says the rest.
        return events

    def _ask(self, payload: Mapping[str, Any], request_id: str) -> PermissionAsk:
        name = _text(payload, "tool_name", required=True) or ""
        tool_input = payload.get("tool_input")
        if not isinstance(tool_input, dict):
            raise ProtocolError("a PermissionRequest hook payload needs a tool_input object")
        ask = PermissionAsk(
            request_id=request_id,
            tool_name=name,
            tool_input=summarize_tool_input(name, tool_input),
            input=dict(tool_input),
            tool_use_id=self._tool_ids.get(_key(name, tool_input)),
            native={"hook": "PermissionRequest", "program": "claude"},
        )
        self._open[request_id] = ask
        return ask

    def _tool_done(self, kind: str, payload: Mapping[str, Any]) -> list[AdapterEvent]:
        # A tool ran (or failed running): an open ask for it was answered "yes" in the
        # TUI, where the hook cannot see it (the CLI lets that hook run on).
        name = _text(payload, "tool_name", required=True) or ""
        tool_use_id = _text(payload, "tool_use_id")
        key = _key(name, payload.get("tool_input"))
        if self._tool_ids.get(key) == tool_use_id:
            del self._tool_ids[key]
        for request_id, ask in list(self._open.items()):
            same = ask.tool_use_id == tool_use_id if ask.tool_use_id else False
            if same or _key(ask.tool_name, ask.input) == key:
                del self._open[request_id]
                return [
                    PermissionDecided(
                        request_id,
                        "allow",
                        actor=TERMINAL_ACTOR,
                        reason="answered in the terminal",
                    )
                ]
        return []

    def _close_all(self, behavior: str, reason: str) -> list[AdapterEvent]:
        closed: list[AdapterEvent] = [
            PermissionDecided(request_id, behavior, actor=TERMINAL_ACTOR, reason=reason)
            for request_id in self._open
        ]
        self._open.clear()
        self._tool_ids.clear()
        return closed

    def withdrawn(self, request_id: str) -> list[AdapterEvent]:
        """The deciding hook of ``request_id`` ended without an answer from the host (the
        CLI killed it): the request is cancelled. Claude Code does that when the person
        answers "No" or presses Esc in the dialog, which interrupts the turn without a
        ``Stop`` hook, so the agent is idle then. Nothing when it was already closed."""
        ask = self._open.pop(request_id, None)
        if ask is None:
            return []
        events: list[AdapterEvent] = [
            PermissionDecided(
                request_id,
                "cancelled",
                actor=TERMINAL_ACTOR,
                reason="the request was withdrawn in the terminal",
            )
        ]
        if not self._open:
            events.append(StateChange(AgentState.IDLE))
        return events

    def answered(self, request_id: str) -> None:
        """The host answered ``request_id`` through its hook: it is no longer open."""
        self._open.pop(request_id, None)

    def _status(self, payload: Mapping[str, Any]) -> list[AdapterEvent]:
        fields: dict[str, Any] = {}
        cost = payload.get("cost")
        if isinstance(cost, Mapping):
            total = cost.get("total_cost_usd")
            if isinstance(total, int | float) and not isinstance(total, bool):
                fields["cost_usd"] = float(total)
        model = payload.get("model")
        if isinstance(model, Mapping) and isinstance(model.get("id"), str):
            fields["model"] = model["id"]
        return [InfoUpdate(fields)] if fields else []

    def _codex(self, payload: Mapping[str, Any]) -> list[AdapterEvent]:
        kind = _text(payload, "type", required=True)
        if kind != "agent-turn-complete":
            return []  # a type a later Codex may add: nothing we know to do
        thread = _text(payload, "thread-id")
        messages = payload.get("input-messages")
        if isinstance(messages, list) and any(
            isinstance(m, str) and m.startswith(_CODEX_TITLE_PROMPT) for m in messages
        ):
            return []
        events: list[AdapterEvent] = []
        if thread and thread != self._codex_thread:
            self._codex_thread = thread
            events.append(InfoUpdate({"session_id": thread}))
        events.append(StateChange(AgentState.IDLE))
        return events


def decision_json(ask: PermissionAsk, allow: bool, message: str | None = None) -> dict[str, Any]:
    """What the deciding hook of ``ask`` prints to answer it: allow, or deny with
    ``message`` (the model reads it as the tool's error; the turn goes on)."""
    hook = ask.native.get("hook")
    if hook != "PermissionRequest":
        raise ProtocolError(f"not a request a hook can answer: {hook!r}")
    decision: dict[str, Any] = {"behavior": "allow" if allow else "deny"}
    if not allow:
        decision["message"] = message or "denied by agenthost"
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
