"""The ``codex`` adapter: OpenAI's Codex CLI through ``codex app-server``. Sans-IO.

``codex app-server`` speaks JSON-RPC 2.0 over stdio, one object per line. The adapter
is its client: ``initialize``, then one thread (``thread/start`` in the worktree, or
``thread/resume``), then one ``turn/start`` per user message. Codex would fold a message
sent during a turn into that turn (it "steers" it, dropping the partial answer), so
such messages, and those sent before the thread is ready, are held and each gets its
own turn when the previous one completes. docs/agents.md has the full mapping of
Codex's notifications and requests to events and history.

Codex numbers its own requests from 0, overlapping our ids, so a message is told apart
by its shape: ``method`` + ``id`` is a request to answer, ``id`` alone a response to one
of ours, ``method`` alone a notification.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from agenthost._version import __version__
from agenthost.acp import jsonrpc
from agenthost.agents.base import (
    DEFERRED,
    Adapter,
    AdapterEvent,
    AdapterOptions,
    Chat,
    Deferred,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    UsageLimited,
    Write,
    turn_failed,
    turn_interrupted,
)
from agenthost.agents.codexsandbox import SANDBOX_MODES, helper_alias_problem, inside_sandbox
from agenthost.agents.programs import Program
from agenthost.agents.streamjson import (
    clip,
    compact,
    content_text,
    obj,
    remember,
    summarize_tool_input,
)
from agenthost.errors import ConfigError, InvalidPayload
from agenthost.protocol import AgentState

BINARY_ENV: Final = "AGENTHOST_CODEX_BIN"
APPROVAL_POLICIES: Final = ("untrusted", "on-request", "never")
DEFAULT_PARAMS: Final = {"approval_policy": "on-request", "sandbox": "workspace-write"}
# --agent-opt key -> thread/start (and thread/resume) field
THREAD_PARAMS: Final = {
    "approval_policy": "approvalPolicy",
    "sandbox": "sandbox",
    "model": "model",
    "model_provider": "modelProvider",
    "developer_instructions": "developerInstructions",
}

# Codex's approval requests (v2) -> the tool name they are shown under. Any other
# request (v1 approvals, user input, MCP elicitations...) is refused at once.
_PERMISSIONS_APPROVAL: Final = "item/permissions/requestApproval"
_APPROVALS: Final = {
    "item/commandExecution/requestApproval": "shell",
    "item/fileChange/requestApproval": "apply_patch",
    _PERMISSIONS_APPROVAL: "permissions",
}
# request fields that are not the question (agenthost answers only accept/decline)
_NOT_INPUT: Final = frozenset(
    {"threadId", "turnId", "itemId", "startedAtMs", "environmentId", "availableDecisions"}
)
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_PARTIAL_MAX: Final = 100_000  # deltas of a streamed answer kept, to close it on a cut


_THREAD_METHODS: Final = ("thread/start", "thread/resume", "thread/fork")
"""The requests that give the host its thread (a failure leaves it without one)."""


class CodexAdapter(Adapter):
    """``codex app-server`` (plus any arguments after ``--``), one thread per host."""

    kind = "codex"
    passthrough: ClassVar[bool] = False
    structured: ClassVar[bool] = True
    max_line_bytes: ClassVar[int] = 8 << 20
    resumable: ClassVar[bool] = True
    forkable: ClassVar[bool] = True
    program: ClassVar[Program] = Program("Codex", BINARY_ENV)
    known_params: ClassVar[frozenset[str]] = frozenset({*THREAD_PARAMS, "effort"})

    def __init__(self, options: AdapterOptions | None = None) -> None:
        super().__init__(options)
        self.params = {**DEFAULT_PARAMS, **self.options.params}
        for key, allowed in (("approval_policy", APPROVAL_POLICIES), ("sandbox", SANDBOX_MODES)):
            if self.params[key] not in allowed:
                raise ConfigError(
                    f"{key} must be one of {', '.join(allowed)}, not {self.params[key]!r}",
                    hint=f"e.g. --agent-opt {key}={allowed[1]}",
                )
        self.thread_id: str | None = None
        self._ids = 0
        self._calls: dict[int, str] = {}  # our request id -> method
        self._phase = "initialize"  # request in flight: initialize, thread; or ready, failed
        self._failed_step = "initialize"
        self._held: deque[str] = deque()
        self._turn_active = False
        self._turn_call: int | None = None  # id of the turn/start in flight
        self._turn_id: str | None = None
        self._interrupt_wanted = False
        self._failure_reported = False  # the running turn's failure is out already
        self._asks: dict[str, PermissionAsk] = {}  # open approval requests
        self._tools: dict[str, tuple[str, str, dict[str, Any]]] = {}  # item id -> call
        self._partial: dict[str, list[str]] = {}  # agentMessage id -> deltas so far
        self._usage_total: dict[str, int] = {}
        self._usage_base: dict[str, int] = {}  # the total when the current turn started
        self._turns = 0
        self._fragment_bytes = 0

    # --- what the host asks ------------------------------------------------------------

    def build_command(self, command: Sequence[str]) -> list[str]:
        return [os.environ.get(BINARY_ENV) or "codex", "app-server", *command]

    def initial_state(self) -> AgentState:
        # busy with the handshake; idle once the thread is ready
        return AgentState.RUNNING

    def startup(self) -> list[AdapterEvent]:
        # the host hands its agent its own environment (plus what --env adds)
        problem = helper_alias_problem(os.environ, self.params["sandbox"])
        note = [ErrorNote(problem)] if problem else []
        return [*note, self._handshake_request()]

    @classmethod
    def inside_sandbox(cls, params: Mapping[str, str]) -> dict[str, str]:
        """Codex's own sandbox off (``sandbox=danger-full-access``), the approval policy
        unchanged: see :func:`agenthost.agents.codexsandbox.inside_sandbox`."""
        return inside_sandbox(params)

    def send(self, text: str) -> list[AdapterEvent]:
        """Start a turn with ``text``, or hold it until the thread is ready and idle."""
        if self._phase == "ready" and not self._turn_active:
            return [self._start_turn(text), StateChange(AgentState.RUNNING)]
        self._held.append(text)
        events: list[AdapterEvent] = [StateChange(AgentState.RUNNING)]
        if self._phase == "failed":  # try the handshake step that failed again
            self._phase = self._failed_step
            events.append(self._handshake_request())
        return events

    def encode_interrupt(self) -> bytes | Deferred:
        """``turn/interrupt`` for the running turn; ``b""`` when none runs.

        A turn whose id Codex has not told yet is interrupted as soon as it does.
        """
        if not self._turn_active:
            return b""
        if self._turn_id is None:
            self._interrupt_wanted = True
            return DEFERRED
        return self._interrupt().data

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
        option_id: str | None = None,
    ) -> bytes:
        """The JSON-RPC response to Codex's approval request.

        Codex's decisions carry no reason, so ``message`` is not passed on, and it
        cannot run a changed command or patch (``updated_input`` must be the original).
        """
        if updated_input is not None and updated_input != ask.input:
            raise InvalidPayload("codex cannot change what it asked about: allow or deny it")
        self._asks.pop(ask.request_id, None)
        result: dict[str, Any] = {"decision": "accept" if allow else "decline"}
        if ask.native.get("method") == _PERMISSIONS_APPROVAL:  # grant all asked, or nothing
            granted = ask.native.get("permissions") if allow else None
            result = {"permissions": granted or {}, "scope": "turn"}
        return _write(id=ask.native.get("rpc_id"), result=result).data

    # --- what Codex prints -------------------------------------------------------------

    def parse_fragment(self, chunk: str, continued: bool) -> list[AdapterEvent]:
        self._fragment_bytes += len(chunk)
        return [Output(chunk, continued=continued)]

    def parse_line(self, line: str) -> list[AdapterEvent]:
        events: list[AdapterEvent] = [Output(line)]
        if self._fragment_bytes:  # the end of a line too long to parse
            size, self._fragment_bytes = self._fragment_bytes + len(line), 0
            limit = self.max_line_bytes
            note = f"agent printed a line of about {size} characters, more than the {limit}"
            return [*events, ErrorNote(f"{note} bytes parsed; it is kept as raw output only")]
        stripped = line.strip()
        if not stripped:
            return events
        try:
            msg = json.loads(stripped, parse_constant=lambda _name: None)
        except (ValueError, RecursionError):
            events.append(ErrorNote(f"agent printed a line that is not JSON: {clip(stripped)}"))
            return events
        if not isinstance(msg, dict) or ("method" not in msg and "id" not in msg):
            events.append(ErrorNote(f"agent printed a line that is not JSON-RPC: {clip(line)}"))
            return events
        method, params = msg.get("method"), obj(msg.get("params"))
        if not isinstance(method, str):
            events.extend(self._response(msg))
        elif "id" in msg:
            events.extend(self._server_request(method, msg["id"], params))
        elif method == "error":  # whichever thread it concerns
            events.extend(self._error(params))
        elif method == "serverRequest/resolved":
            events.extend(self._resolved(params))
        else:
            handler = _NOTIFICATIONS.get(method)
            tid = params.get("threadId")
            if handler is not None and (tid is None or tid == self.thread_id):
                events.extend(handler(self, params))  # sub-agent threads: raw output only
        return events

    # --- our requests and their responses ----------------------------------------------

    def _request(self, method: str, params: dict[str, Any]) -> Write:
        self._ids += 1
        self._calls[self._ids] = method
        return _write(id=self._ids, method=method, params=params)

    def _handshake_request(self) -> Write:
        if self._phase == "initialize":
            client = {"name": "agenthost", "title": "agenthost", "version": __version__}
            return self._request("initialize", {"clientInfo": client, "capabilities": None})
        params: dict[str, Any] = {
            f: self.params[k] for k, f in THREAD_PARAMS.items() if k in self.params
        }
        params["cwd"] = self.options.worktree or None
        if self.options.resume:
            # the past turns are in the rollout already; a full copy would only be a
            # (possibly huge) line of raw output
            params.update(threadId=self.options.resume, excludeTurns=True)
            return self._request("thread/resume", params)
        if self.options.fork:  # a new thread on a copy of the parent's turns
            params.update(threadId=self.options.fork, excludeTurns=True)
            if self.options.fork_at:
                params["lastTurnId"] = self.options.fork_at  # inclusive: later turns left out
            return self._request("thread/fork", params)
        return self._request("thread/start", params)

    def _start_turn(self, text: str) -> Write:
        # a lone surrogate would make the whole line unreadable to Codex
        text = text.encode("utf-8", "replace").decode()
        item = {"type": "text", "text": text, "text_elements": []}
        params = {"threadId": self.thread_id, "input": [item]}
        if "effort" in self.params:
            params["effort"] = self.params["effort"]
        write = self._request("turn/start", params)
        self._turn_active, self._turn_call, self._turn_id = True, self._ids, None
        self._usage_base = dict(self._usage_total)
        return write

    def _interrupt(self) -> Write:
        self._interrupt_wanted = False
        params = {"threadId": self.thread_id, "turnId": self._turn_id}
        return self._request("turn/interrupt", params)

    def _response(self, msg: dict[str, Any]) -> list[AdapterEvent]:
        rid = msg.get("id")
        if not isinstance(rid, int) or isinstance(rid, bool) or rid not in self._calls:
            return []  # not ours, or answered already: raw output only
        method = self._calls.pop(rid)
        error = msg.get("error")
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else None
            note = ErrorNote(f"codex {method} failed: {text or compact(error)}")
            return [note, *self._request_failed(method, rid)]
        result = obj(msg.get("result"))
        if method == "initialize":
            self._phase = "thread"
            return [_write(method="initialized"), self._handshake_request()]
        if method in _THREAD_METHODS:
            return self._thread_ready(method, result)
        if method == "turn/start" and rid == self._turn_call:
            return self._turn_known(obj(result.get("turn")).get("id"))
        return []

    def _request_failed(self, method: str, rid: int) -> list[AdapterEvent]:
        if method == "turn/start" and rid == self._turn_call:
            self._end_turn()
            return self._next_turn()
        if method != "initialize" and method not in _THREAD_METHODS:
            return []
        # No thread: what is held cannot be delivered. The next send retries the step.
        self._failed_step = "initialize" if method == "initialize" else "thread"
        self._phase = "failed"
        events: list[AdapterEvent] = []
        if self._held:
            events.append(ErrorNote(f"{len(self._held)} message(s) not delivered: no thread"))
            self._held.clear()
        return [*events, StateChange(AgentState.IDLE)]

    def _thread_ready(self, method: str, result: dict[str, Any]) -> list[AdapterEvent]:
        tid = obj(result.get("thread")).get("id")
        if not isinstance(tid, str) or not tid:
            note = ErrorNote(f"codex {method} answered without a thread id")
            return [note, *self._request_failed(method, 0)]
        self.thread_id, self._phase = tid, "ready"
        info: dict[str, Any] = {"session_id": tid}
        model = result.get("model")
        if isinstance(model, str) and model:
            info["model"] = model
        return [InfoUpdate(info), *self._next_turn()]

    # --- turns -------------------------------------------------------------------------

    def _turn_known(self, turn_id: Any) -> list[AdapterEvent]:
        if not self._turn_active or self._turn_id is not None or not isinstance(turn_id, str):
            return []
        self._turn_id = turn_id
        return [self._interrupt()] if self._interrupt_wanted else []

    def _turn_started(self, params: dict[str, Any]) -> list[AdapterEvent]:
        return self._turn_known(obj(params.get("turn")).get("id"))

    def _error(self, params: dict[str, Any]) -> list[AdapterEvent]:
        turn_id = params.get("turnId")
        final = params.get("willRetry") is not True
        if final and self._turn_active and turn_id in (None, self._turn_id or turn_id):
            # the running turn failed for good: report it as every adapter does
            self._failure_reported = True
            error = obj(params.get("error"))
            return turn_failed(_error_text(error), _http_status(error))
        return [_error_note(params)]

    def _turn_completed(self, params: dict[str, Any]) -> list[AdapterEvent]:
        turn = obj(params.get("turn"))
        status = turn.get("status") if isinstance(turn.get("status"), str) else "unknown"
        # Codex never completes an answer it cut (interrupt, error): close it here.
        cut = [text for text in map("".join, self._partial.values()) if text]
        events: list[AdapterEvent] = [
            Chat({"role": "assistant", "content": text, "aborted": True}) for text in cut
        ]
        # questions of a turn that is over cannot be answered any more
        events += [PermissionDecided(r, "cancelled", "the turn ended") for r in self._asks]
        self._partial.clear()
        self._asks.clear()
        result: dict[str, Any] = {"subtype": status, "is_error": status != "completed"}
        error_obj = obj(turn.get("error"))
        if isinstance(turn.get("durationMs"), int | float):
            result["duration_ms"] = turn["durationMs"]
        usage = {k: v - self._usage_base.get(k, 0) for k, v in self._usage_total.items()}
        if any(usage.values()):  # not when Codex reported nothing for this turn
            result["usage"] = usage
        error = error_obj.get("message")
        if isinstance(error, str):
            result["error"] = error
        if self.thread_id:
            result["session_id"] = self.thread_id
        self._turns += 1
        if status == "interrupted":
            result["interrupted"] = True
            events += turn_interrupted()
        elif result["is_error"] and not self._failure_reported:
            text = _error_text(error_obj) if error_obj else f"turn {status}"
            events += turn_failed(text, _http_status(error_obj))
        if result["is_error"] and status != "interrupted" and _usage_limited(error_obj):
            # "try again at 12:32 AM": the host reads the time (agent's local clock)
            events.append(UsageLimited(None, _error_text(error_obj)))
        self._end_turn()
        info = InfoUpdate({"turns": self._turns})
        return [*events, TurnResult(result), info, *self._next_turn()]

    def _end_turn(self) -> None:
        self._turn_active, self._turn_call, self._turn_id = False, None, None
        self._interrupt_wanted = self._failure_reported = False

    def _next_turn(self) -> list[AdapterEvent]:
        if self._turn_active:
            return []
        if self._held and self._phase == "ready":
            return [self._start_turn(self._held.popleft())]
        return [StateChange(AgentState.IDLE)]

    def _token_usage(self, params: dict[str, Any]) -> list[AdapterEvent]:
        usage = obj(params.get("tokenUsage"))
        total = _snake_counts(usage.get("total"))
        if not total:
            return []
        if params.get("turnId") != self._turn_id:
            self._usage_base = total  # a restated total (e.g. on resume): not this turn's
        self._usage_total = total
        info: dict[str, Any] = {"usage": total}
        if isinstance(usage.get("modelContextWindow"), int):
            info["context_window"] = usage["modelContextWindow"]
        return [InfoUpdate(info)]

    # --- items -------------------------------------------------------------------------

    def _item_started(self, params: dict[str, Any]) -> list[AdapterEvent]:
        item = params.get("item")
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            return []
        item_id = item["id"]
        if item.get("type") == "agentMessage":
            remember(self._partial, item_id, [])
            return []
        call = _describe(item)
        if call is None:
            return []
        remember(self._tools, item_id, call)
        name, summary, tool_input = call
        entry = {"role": "tool", "tool_name": name, "tool_input": summary, "input": tool_input}
        return [Chat({**entry, "tool_use_id": item_id})]

    def _delta(self, params: dict[str, Any]) -> list[AdapterEvent]:
        item_id, delta = params.get("itemId"), params.get("delta")
        parts = self._partial.get(item_id) if isinstance(item_id, str) else None
        if parts is not None and isinstance(delta, str) and len(parts) < _PARTIAL_MAX:
            parts.append(delta)
        return []  # deltas stay raw output: the completed item carries the text

    def _item_completed(self, params: dict[str, Any]) -> list[AdapterEvent]:
        item = params.get("item")
        if not isinstance(item, dict):
            return []
        item_id = item.get("id")
        item_id = item_id if isinstance(item_id, str) else ""
        if item.get("type") == "agentMessage":
            self._partial.pop(item_id, None)
            text = item.get("text")
            if not isinstance(text, str) or not text:
                return []
            return [Chat({"role": "assistant", "content": text})]
        call = self._tools.pop(item_id, None) or _describe(item)
        if call is None:
            return []  # user messages (our sends), reasoning, plans...: not history
        entry: dict[str, Any] = {"role": "tool", "tool_name": call[0], **_outcome(item)}
        if item_id:
            entry["tool_use_id"] = item_id
        return [Chat(entry)]

    # --- requests from Codex -----------------------------------------------------------

    def _server_request(
        self, method: str, rpc_id: Any, params: dict[str, Any]
    ) -> list[AdapterEvent]:
        name = _APPROVALS.get(method)
        if name is None:
            # Unanswered, it would stall the turn for ever: refuse it at once.
            error = {"code": -32601, "message": f"agenthost cannot answer {method}"}
            note = ErrorNote(f"codex asked {method}, which agenthost cannot answer; refused")
            return [_write(id=rpc_id, error=error), note]
        item_id = params.get("itemId")
        item_id = item_id if isinstance(item_id, str) else None
        tool_input = {k: v for k, v in params.items() if k not in _NOT_INPUT}
        summary = _command_summary(params) if name == "shell" else ""
        known = self._tools.get(item_id or "")
        if name == "apply_patch" and known is not None:  # the request names no file
            summary, tool_input = known[1], {**known[2], **tool_input}
        reason = params.get("reason")
        ask = PermissionAsk(
            request_id=f"codex-{rpc_id}",
            tool_name=name,
            tool_input=summary or clip(reason if isinstance(reason, str) else name),
            input=tool_input,
            tool_use_id=item_id,
            native={"rpc_id": rpc_id, "method": method, "permissions": params.get("permissions")},
        )
        self._asks[ask.request_id] = ask
        return [ask]

    def _resolved(self, params: dict[str, Any]) -> list[AdapterEvent]:
        # Codex withdrew a question (an interrupt, the turn ended); ours are popped first
        request_id = f"codex-{params.get('requestId')}"
        if self._asks.pop(request_id, None) is None:
            return []
        return [PermissionDecided(request_id, "cancelled", "withdrawn by the agent")]


_NOTIFICATIONS: Final[dict[str, Callable[[CodexAdapter, dict[str, Any]], list[AdapterEvent]]]] = {
    "turn/started": CodexAdapter._turn_started,
    "turn/completed": CodexAdapter._turn_completed,
    "item/started": CodexAdapter._item_started,
    "item/completed": CodexAdapter._item_completed,
    "item/agentMessage/delta": CodexAdapter._delta,
    "thread/tokenUsage/updated": CodexAdapter._token_usage,
}


def _describe(item: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """(tool name, summary, input) of a tool item; None for items that are not tools."""
    kind = item.get("type")
    if kind == "commandExecution":
        keys = ("command", "cwd", "commandActions")
        return "shell", _command_summary(item), {k: item[k] for k in keys if k in item}
    if kind == "fileChange":
        changes = item.get("changes")
        changes = changes if isinstance(changes, list) else []
        paths = [str(c.get("path")) for c in changes if isinstance(c, dict)]
        return "apply_patch", clip(", ".join(paths)), {"changes": changes}
    if kind == "mcpToolCall":
        tool, args = str(item.get("tool")), item.get("arguments")
        args = args if isinstance(args, dict) else {"arguments": args}
        return f"mcp__{item.get('server')}__{tool}", summarize_tool_input(tool, args), args
    return None


def _outcome(item: dict[str, Any]) -> dict[str, Any]:
    """``tool_result`` and ``is_error`` (and ``exit_code``) of a completed tool item."""
    status = item.get("status")
    failed = status in ("failed", "declined")
    if item.get("type") == "commandExecution":
        out, code = item.get("aggregatedOutput"), item.get("exitCode")
        text = out.rstrip("\n") if isinstance(out, str) else ""
        outcome: dict[str, Any] = {"tool_result": text or (str(status) if failed else "")}
        if isinstance(code, int):
            outcome["exit_code"] = code
        return {**outcome, "is_error": failed or code not in (0, None)}
    if item.get("type") == "mcpToolCall":
        text = content_text(obj(item.get("result")).get("content"))
        error = obj(item.get("error")).get("message")
        return {"tool_result": error or text, "is_error": failed or error is not None}
    return {"tool_result": str(status), "is_error": failed}


def _command_summary(fields: dict[str, Any]) -> str:
    """The command as typed: ``/bin/bash -lc 'echo hi'`` reads ``echo hi``."""
    command = fields.get("command")
    if not isinstance(command, str):
        return clip(compact(command)) if command is not None else ""
    try:
        argv = shlex.split(command)
    except ValueError:  # unbalanced quotes: show it as it is
        return clip(command)
    shell = len(argv) == 3 and os.path.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc")
    return clip(argv[2] if shell else command)


def _error_note(params: dict[str, Any]) -> ErrorNote:
    error = obj(params.get("error"))
    retrying = " (will retry)" if params.get("willRetry") is True else ""
    return ErrorNote(f"codex error{retrying}: {_error_text(error)}", _http_status(error))


def _error_text(error: dict[str, Any]) -> str:
    """The message of a Codex error object, with its details when they add something."""
    message = error.get("message")
    text = message if isinstance(message, str) else "unknown error"
    details = error.get("additionalDetails")
    if isinstance(details, str) and details and details != text:
        text += f" ({details})"
    return clip(text, 2000)


def _usage_limited(error: dict[str, Any]) -> bool:
    """Whether a failed turn's error is Codex's usage limit (``codexErrorInfo``:
    ``usageLimitExceeded``, as a string or a key)."""
    info = error.get("codexErrorInfo")
    return info == "usageLimitExceeded" or (isinstance(info, dict) and "usageLimitExceeded" in info)


def _http_status(error: dict[str, Any]) -> int | None:
    """The HTTP status in a Codex error's ``codexErrorInfo``, e.g.
    ``{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}`` (often null)."""
    for detail in obj(error.get("codexErrorInfo")).values():
        status = obj(detail).get("httpStatusCode")
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def _snake_counts(counts: Any) -> dict[str, int]:
    """``{"inputTokens": 5}`` -> ``{"input_tokens": 5}``: the names Claude's usage uses."""
    if not isinstance(counts, dict):
        return {}
    return {
        re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v
        for k, v in counts.items()
        if isinstance(v, int) and not isinstance(v, bool)
    }


def _write(**message: Any) -> Write:
    """One JSON-RPC line for Codex's stdin (ASCII only: never a line Codex cannot
    decode, whatever a client sent)."""
    return Write(jsonrpc.encode(message))
