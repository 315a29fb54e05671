"""The ``acp`` adapter: any agent that speaks the Agent Client Protocol. Sans-IO.

``serve --agent acp -- CMD ARGS...`` runs CMD (e.g. ``gemini --acp``,
``claude-agent-acp``, ``codex-acp``) and is its ACP client over stdio (JSON-RPC 2.0,
one object per line): ``initialize`` (``authenticate`` with ``--agent-opt
auth=METHOD``), then one session (``session/new`` in the worktree; with ``--resume
SID`` ``session/resume`` where the agent offers it, else ``session/load``), then
``session/set_mode`` with ``--agent-opt mode=ID``, then one ``session/prompt`` per user
message. ACP 1 has no way for an agent to take a prompt while another one runs, so a
message sent during a turn (or before the session exists) is held and gets its own
prompt when the turn ends.

What the agent sends is mapped by :mod:`agenthost.agents.acpupdates` (session
updates) and here (its requests: permission questions become pending requests, its
``fs/*`` and ``terminal/*`` calls :class:`ClientCall` events the host performs).
docs/agents.md has the whole mapping.

A session loaded with ``session/load`` replays its history as ``session/update``
notifications, before the load's answer or (Gemini) after it: they were recorded when
they happened, so until the first prompt after a load, updates stay raw output and
record no chat entry.

``--resume`` is best effort: when the agent can neither resume nor load a session, or
refuses to, the host says so (an ``error`` event) and starts a new session.

``--fork SID`` (``agenthost fork``) opens the session with ``session/fork`` (unstable in
the ACP schema) where the agent offers it (``sessionCapabilities.fork``). It is not best
effort: an agent that does not offer it, or refuses, gets no session (an ``error``
event says why), since a fresh one would not be the fork that was asked for. A point
(``--fork-at``) is refused: ACP's fork copies the whole session.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from agenthost._version import __version__
from agenthost.acp import jsonrpc, schema
from agenthost.agents.acpupdates import SessionUpdates, text_or, usage_counts
from agenthost.agents.base import (
    DEFERRED,
    Adapter,
    AdapterEvent,
    AdapterOptions,
    CallFailed,
    ClientCall,
    Deferred,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    Write,
    given_command,
    turn_failed,
    turn_interrupted,
)
from agenthost.agents.streamjson import clip, obj
from agenthost.errors import ConfigError, InvalidPayload
from agenthost.protocol import AgentState

CLIENT_CAPABILITIES: Final = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
}
"""What agenthost advertises: the host performs these calls, in the worktree."""
OPEN_MAX: Final = 1000
"""Permission requests and client calls of the agent open at once, at most: more are
refused at once (an agent gone wild must not grow the host's memory)."""
_CANCELLED: Final = {"outcome": {"outcome": "cancelled"}}
_FAILED_STOPS: Final = {
    schema.REFUSAL: "the agent refused to continue (stop reason: refusal)",
    schema.MAX_TOKENS: "the model reached its output token limit (stop reason: max_tokens)",
    schema.MAX_TURN_REQUESTS: (
        "the turn reached the agent's limit of model requests (stop reason: max_turn_requests)"
    ),
}
# environment values a user may mean "yes" with; Claude's ACP adapter refuses to run
# as root unless IS_SANDBOX is exactly "1"
_TRUTHY: Final = frozenset({"1", "yes", "true", "on", "y"})


_OPENING: Final = (
    schema.SESSION_NEW,
    schema.SESSION_LOAD,
    schema.SESSION_RESUME,
    schema.SESSION_FORK,
)
"""The requests whose answer opens the agent's session."""


class AcpAdapter(Adapter):
    """An ACP agent: the command after ``--``, one session per host."""

    kind = "acp"
    passthrough: ClassVar[bool] = False
    structured: ClassVar[bool] = True
    max_line_bytes: ClassVar[int] = 8 << 20
    resumable: ClassVar[bool] = True
    forkable: ClassVar[bool] = True
    known_params: ClassVar[frozenset[str]] = frozenset({"auth", "mode"})

    def __init__(self, options: AdapterOptions | None = None) -> None:
        super().__init__(options)
        if self.options.fork_at is not None:
            raise ConfigError("an ACP agent's fork copies the whole session: no --fork-at")
        self.session_id: str | None = None
        self.agent_capabilities: dict[str, Any] = {}
        self.agent_info: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []
        self.updates = SessionUpdates()
        self._calls = jsonrpc.Calls()
        self._phase = "initialize"  # request in flight; or "ready", "failed"
        self._failed_step = "initialize"
        self._replaying = False  # after a session/load, until the first prompt
        self._resume_failed = False  # --resume was tried: new sessions from now on
        self._held: deque[str] = deque()
        self._turn: int | None = None  # id of the session/prompt in flight
        self._interrupt_wanted = False  # before the prompt was sent: drop it
        self._cancelled = False  # session/cancel sent for the running prompt
        self._asks: dict[str, PermissionAsk] = {}  # open permission requests
        self._withdrawn: list[str] = []  # asks answered "cancelled" by an interrupt
        self._client_calls: dict[str, jsonrpc.RequestId] = {}  # call id -> rpc id
        self._call_ids = 0
        self._turns = 0
        self._fragment_bytes = 0

    # --- what the host asks ------------------------------------------------------------

    def build_command(self, command: Sequence[str]) -> list[str]:
        return given_command(self.kind, command, "gemini --acp")

    def environment(self) -> dict[str, str]:
        """``IS_SANDBOX=1`` in place of another "yes" (``IS_SANDBOX=yes`` makes Claude's
        ACP adapter refuse to run as root); an explicit ``--env`` still wins."""
        value = os.environ.get("IS_SANDBOX")
        if value is not None and value.strip().lower() in _TRUTHY and value != "1":
            return {"IS_SANDBOX": "1"}
        return {}

    def initial_state(self) -> AgentState:
        return AgentState.RUNNING  # busy with the handshake; idle once the session exists

    def startup(self) -> list[AdapterEvent]:
        return [self._step()]

    def send(self, text: str) -> list[AdapterEvent]:
        """Prompt with ``text``, or hold it until the session is ready and idle."""
        if self._phase == "ready" and self._turn is None and not self._held:
            return [StateChange(AgentState.RUNNING), *self._prompt(text)]
        self._held.append(text)
        events: list[AdapterEvent] = [StateChange(AgentState.RUNNING)]
        if self._phase == "failed":  # try the step that failed again
            events += self._retry()
        return events

    def encode_interrupt(self) -> bytes | Deferred:
        """``session/cancel`` for the running prompt, and the answer ``cancelled`` to
        every open permission request (ACP wants it; Gemini waits for it). ``b""`` when
        nothing runs; :data:`DEFERRED` when the prompt is not sent yet: it is dropped
        (reported as an interrupted turn) once the session is ready."""
        if self._turn is None:
            if not self._held:
                return b""
            self._interrupt_wanted = True
            return DEFERRED
        self._cancelled = True
        data = jsonrpc.notification(schema.SESSION_CANCEL, {"sessionId": self.session_id})
        for request_id, ask in list(self._asks.items()):
            data += jsonrpc.result(ask.native["rpc_id"], _CANCELLED)
            self._withdrawn.append(request_id)
        self._asks.clear()
        return data

    def after_interrupt(self) -> list[AdapterEvent]:
        """The requests the interrupt answered ``cancelled``, reported at once."""
        return self._decided_withdrawn()

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
        option_id: str | None = None,
    ) -> bytes:
        """The answer ``selected`` with ``option_id``, else the first option of kind
        ``allow_once`` (allow) or ``reject_once`` (deny), else ``allow_always`` /
        ``reject_always``. ACP answers carry no reason and no changed input."""
        if updated_input is not None and updated_input != ask.input:
            raise InvalidPayload("an ACP agent cannot change what it asked about")
        if self._asks.pop(ask.request_id, None) is None:
            raise InvalidPayload(
                f"request {ask.request_id!r} was withdrawn (the turn was cancelled)"
            )
        chosen = option_id or _choose(ask.options, allow)
        if chosen is None:  # no option of that kind: the only other answer ACP has
            return jsonrpc.result(ask.native["rpc_id"], _CANCELLED)
        outcome = {"outcome": {"outcome": "selected", "optionId": chosen}}
        return jsonrpc.result(ask.native["rpc_id"], outcome)

    def call_done(
        self, call_id: str, result: dict[str, Any] | None, error: CallFailed | None
    ) -> list[AdapterEvent]:
        """The answer to a client call the host performed (nothing if the agent
        withdrew the call meanwhile)."""
        rpc_id = self._client_calls.pop(call_id, None)
        if rpc_id is None:
            return []
        if error is None:
            return [Write(jsonrpc.result(rpc_id, result if result is not None else {}))]
        code = jsonrpc.INTERNAL_ERROR
        if error.not_found:
            code = jsonrpc.RESOURCE_NOT_FOUND
        elif error.bad_params:
            code = jsonrpc.INVALID_PARAMS
        return [Write(jsonrpc.error(rpc_id, code, error.message))]

    # --- what the agent prints ---------------------------------------------------------

    def parse_fragment(self, chunk: str, continued: bool) -> list[AdapterEvent]:
        self._fragment_bytes += len(chunk)
        return [Output(chunk, continued=continued)]

    def parse_line(self, line: str) -> list[AdapterEvent]:
        events: list[AdapterEvent] = [Output(line), *self._decided_withdrawn()]
        if self._fragment_bytes:  # the end of a line too long to parse
            size, self._fragment_bytes = self._fragment_bytes + len(line), 0
            note = f"agent printed a line of about {size} characters, more than the"
            limit = f"{self.max_line_bytes} bytes parsed; it is kept as raw output only"
            return [*events, ErrorNote(f"{note} {limit}")]
        if not line.strip():
            return events
        msg = jsonrpc.parse(line)
        if isinstance(msg, jsonrpc.Invalid):
            events.append(ErrorNote(f"agent printed {_invalid(msg)}: {clip(line)}"))
            if msg.id is not None:  # a request we can still answer
                events.append(Write(jsonrpc.error(msg.id, msg.code, msg.reason)))
        elif isinstance(msg, jsonrpc.Response):
            events.extend(self._response(msg))
        elif isinstance(msg, jsonrpc.Request):
            events.extend(self._agent_request(msg))
        elif msg.method == schema.SESSION_UPDATE:
            events.extend(self._session_update(msg.params))
        elif msg.method == schema.CANCEL_REQUEST:
            events.extend(self._cancel_request(msg.params))
        return events  # other notifications (extensions, later ACP): raw output only

    # --- our requests and their answers ------------------------------------------------

    def _request(self, method: str, params: dict[str, Any]) -> tuple[int, Write]:
        rid, data = self._calls.issue(method, params)
        return rid, Write(data)

    def _step(self) -> Write:
        """The request of the handshake step in ``_phase``."""
        phase, opts = self._phase, self.options.params
        if phase == "initialize":
            client = {"name": "agenthost", "title": "agenthost", "version": __version__}
            params: dict[str, Any] = {
                "protocolVersion": schema.PROTOCOL_VERSION,
                "clientCapabilities": CLIENT_CAPABILITIES,
                "clientInfo": client,
            }
            return self._request(schema.INITIALIZE, params)[1]
        if phase == "authenticate":
            return self._request(schema.AUTHENTICATE, {"methodId": opts["auth"]})[1]
        if phase == "mode":
            params = {"sessionId": self.session_id, "modeId": opts["mode"]}
            return self._request(schema.SESSION_SET_MODE, params)[1]
        params = {"cwd": self.options.worktree or os.getcwd(), "mcpServers": []}
        if phase == schema.SESSION_FORK:
            return self._request(phase, {"sessionId": self.options.fork, **params})[1]
        if phase in (schema.SESSION_RESUME, schema.SESSION_LOAD):
            self.session_id = self.options.resume  # its replay names it
            self._replaying = phase == schema.SESSION_LOAD
            return self._request(phase, {"sessionId": self.session_id, **params})[1]
        return self._request(schema.SESSION_NEW, params)[1]

    def _retry(self) -> list[AdapterEvent]:
        """The handshake again, from the step that failed."""
        if self._failed_step == "session":
            return self._open_session()
        self._phase = self._failed_step
        return [self._step()]

    def _open_session(self) -> list[AdapterEvent]:
        """The request that opens the session: resume, load, or new."""
        sessions = obj(self.agent_capabilities.get("sessionCapabilities"))
        self._phase = schema.SESSION_NEW
        if self.options.fork:
            if sessions.get("fork") is None:
                name = clip(str(self.agent_info.get("name") or "the agent"), 100)
                text = f"{name} does not offer session/fork: agenthost cannot fork its session"
                return [ErrorNote(text), *self._fail("session")]
            self._phase = schema.SESSION_FORK
            return [self._step()]
        if not self.options.resume or self._resume_failed:
            return [self._step()]
        if sessions.get("resume") is not None:
            self._phase = schema.SESSION_RESUME
        elif self.agent_capabilities.get("loadSession") is True:
            self._phase = schema.SESSION_LOAD
        else:
            self._resume_failed = True
            text = f"the agent cannot resume session {self.options.resume}: a new session starts"
            return [ErrorNote(text), self._step()]
        return [self._step()]

    def _response(self, msg: jsonrpc.Response) -> list[AdapterEvent]:
        settled = self._calls.settle(msg)
        if settled is None:
            return [ErrorNote(f"agent answered a request agenthost did not make (id {msg.id!r})")]
        method = settled[0]
        if method == schema.SESSION_PROMPT:
            return self._turn_ended(msg)
        if msg.error is not None:
            return self._step_failed(method, msg)
        result = obj(msg.result)
        if method == schema.INITIALIZE:
            return self._initialized(result)
        if method == schema.AUTHENTICATE:
            return self._open_session()
        if method in _OPENING:
            return self._session_ready(method, result)
        if method == schema.SESSION_SET_MODE:
            return [*self.updates.mode(self.options.params["mode"]), *self._ready()]
        return []

    def _initialized(self, result: dict[str, Any]) -> list[AdapterEvent]:
        version = result.get("protocolVersion")
        if version != schema.PROTOCOL_VERSION:
            ours = schema.PROTOCOL_VERSION
            text = (
                f"the agent speaks ACP version {clip(repr(version), 40)}; agenthost speaks {ours}"
            )
            return [ErrorNote(text), *self._fail("initialize")]
        self.agent_capabilities = obj(result.get("agentCapabilities"))
        self.agent_info = obj(result.get("agentInfo"))
        methods = result.get("authMethods")
        methods = methods if isinstance(methods, list) else []
        self.auth_methods = [m for m in methods if isinstance(m, dict)]
        info = {
            f"agent_{key}": self.agent_info[key]
            for key in ("name", "version", "title")
            if isinstance(self.agent_info.get(key), str)
        }
        # `agenthost fork` asks the parent's host before it tries
        if obj(self.agent_capabilities.get("sessionCapabilities")).get("fork") is not None:
            info["session_fork"] = True
        events: list[AdapterEvent] = [InfoUpdate(info)] if info else []
        if "auth" in self.options.params:
            self._phase = "authenticate"
            return [*events, self._step()]
        return [*events, *self._open_session()]

    def _session_ready(self, method: str, result: dict[str, Any]) -> list[AdapterEvent]:
        if method in (schema.SESSION_NEW, schema.SESSION_FORK):
            sid = result.get("sessionId")
            if not isinstance(sid, str) or not sid:
                note = ErrorNote(f"the agent answered {method} without a sessionId")
                return [note, *self._fail("session")]
            self.session_id = sid
        events: list[AdapterEvent] = [InfoUpdate({"session_id": self.session_id})]
        events += self.updates.session_modes(result.get("modes"))
        wanted = self.options.params.get("mode")
        if wanted is not None and self.updates.modes.get("current") != wanted:
            self._phase = "mode"
            return [*events, self._step()]
        return [*events, *self._ready()]

    def _ready(self) -> list[AdapterEvent]:
        self._phase = "ready"
        return self._next_turn()

    def _step_failed(self, method: str, msg: jsonrpc.Response) -> list[AdapterEvent]:
        text = f"the agent's {method} failed: {clip(msg.error_text, 2000)}{self._hint(msg)}"
        note = ErrorNote(text)
        if method == schema.SESSION_SET_MODE:  # the session works, in its own mode
            return [note, *self._ready()]
        if method in (schema.SESSION_LOAD, schema.SESSION_RESUME):
            self.session_id, self._replaying, self._resume_failed = None, False, True
            again = ErrorNote(
                f"could not resume session {self.options.resume}: a new session starts"
            )
            return [note, again, *self._open_session()]
        step = {schema.INITIALIZE: "initialize", schema.AUTHENTICATE: "authenticate"}
        return [note, *self._fail(step.get(method, "session"))]

    def _hint(self, msg: jsonrpc.Response) -> str:
        if obj(msg.error).get("code") != jsonrpc.AUTH_REQUIRED:
            return ""
        ids = [m["id"] for m in self.auth_methods if isinstance(m.get("id"), str)]
        offered = ", ".join(ids) or "none"
        return f" (authenticate with --agent-opt auth=METHOD; the agent offers: {offered})"

    def _fail(self, step: str) -> list[AdapterEvent]:
        """No session: what is held cannot be delivered. The next send retries ``step``."""
        self._failed_step, self._phase = step, "failed"
        events: list[AdapterEvent] = []
        if self._held:
            events.append(ErrorNote(f"{len(self._held)} message(s) not delivered: no session"))
            self._held.clear()
        self._interrupt_wanted = False
        return [*events, StateChange(AgentState.IDLE)]

    # --- turns -------------------------------------------------------------------------

    def _prompt(self, text: str) -> list[AdapterEvent]:
        """The ``session/prompt`` of ``text``, after what the agent said before it."""
        # a lone surrogate would make the whole line unreadable to the agent
        text = text.encode("utf-8", "replace").decode()
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        self._turn, write = self._request(schema.SESSION_PROMPT, params)
        self._replaying = False
        return [*self.updates.flush(), write]

    def _next_turn(self) -> list[AdapterEvent]:
        if self._turn is not None or self._phase != "ready":
            return []
        events: list[AdapterEvent] = []
        if self._interrupt_wanted and self._held:  # interrupted before it was sent
            self._interrupt_wanted = False
            self._held.popleft()
            events += [*turn_interrupted(), TurnResult(self._result(schema.CANCELLED))]
        if self._held:
            return [*events, *self._prompt(self._held.popleft())]
        return [*events, StateChange(AgentState.IDLE)]

    def _result(self, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "stop_reason": reason,
            "subtype": reason,
            "is_error": reason not in (schema.END_TURN, schema.CANCELLED),
            "interrupted": reason == schema.CANCELLED,
        }
        if self.session_id:
            result["session_id"] = self.session_id
        return result

    def _turn_ended(self, msg: jsonrpc.Response) -> list[AdapterEvent]:
        cancelled = self._cancelled
        self._turn, self._cancelled = None, False
        events: list[AdapterEvent] = self.updates.flush(aborted=cancelled)
        for request_id, ask in self._asks.items():  # questions of a turn that is over
            events += [Write(jsonrpc.result(ask.native["rpc_id"], _CANCELLED))]
            events += [PermissionDecided(request_id, "cancelled", "the turn ended")]
        self._asks.clear()
        self._turns += 1
        if msg.error is not None:
            text = f"the agent's turn failed: {clip(msg.error_text, 2000)}"
            result = {**self._result("error"), "is_error": True, "error": text}
            events += [*turn_failed(text), TurnResult(result)]
        else:
            answer = obj(msg.result)
            reason = answer.get("stopReason")
            if not isinstance(reason, str) or not reason:
                events.append(ErrorNote("the agent ended a turn without a stopReason"))
                reason = "unknown"
            result = self._result(reason)
            if reason not in schema.STOP_REASONS:
                result["is_error"] = True
            usage = usage_counts(answer.get("usage"))
            if usage:
                result["usage"] = usage
                events.append(InfoUpdate({"usage": usage}))
            if reason == schema.CANCELLED:
                events += turn_interrupted()
            elif reason in _FAILED_STOPS:
                events += turn_failed(_FAILED_STOPS[reason])
            elif result["is_error"] and reason != "unknown":
                events += turn_failed(f"the turn ended with stop reason {clip(reason, 80)}")
            events.append(TurnResult(result))
        return [*events, InfoUpdate({"turns": self._turns}), *self._next_turn()]

    def _decided_withdrawn(self) -> list[AdapterEvent]:
        """The questions an interrupt answered ``cancelled``, reported with the agent's
        next line (an interrupt returns bytes, not events)."""
        if not self._withdrawn:
            return []
        why = "the turn was cancelled"
        decided: list[AdapterEvent] = [
            PermissionDecided(r, "cancelled", why) for r in self._withdrawn
        ]
        self._withdrawn.clear()
        return decided

    # --- what the agent sends ----------------------------------------------------------

    def _session_update(self, params: dict[str, Any]) -> list[AdapterEvent]:
        sid = params.get("sessionId")
        if self.session_id is not None and sid != self.session_id:
            return [
                ErrorNote(
                    f"agent sent an update for another session ({clip(str(sid), 80)}): ignored"
                )
            ]
        update = params.get("update")
        if not isinstance(update, dict):
            return [ErrorNote("agent sent a session/update without an update object")]
        return self.updates.update(update, record=not self._replaying)

    def _agent_request(self, msg: jsonrpc.Request) -> list[AdapterEvent]:
        method, params = msg.method, msg.params
        known = method == schema.REQUEST_PERMISSION or method in schema.CLIENT_CALLS
        if not known:  # unanswered, it would stall the agent for ever: refuse it at once
            note = f"the agent asked {clip(method, 80)}, which agenthost does not implement"
            return _refuse(msg.id, jsonrpc.METHOD_NOT_FOUND, note + "; refused")
        sid = params.get("sessionId")
        if self.session_id is None or sid != self.session_id:
            text = f"agent sent {method} for an unknown session ({clip(str(sid), 80)})"
            return _refuse(msg.id, jsonrpc.INVALID_PARAMS, text)
        if len(self._asks) + len(self._client_calls) >= OPEN_MAX:
            text = f"more than {OPEN_MAX} requests of the agent open at once: {method} refused"
            return _refuse(msg.id, jsonrpc.INTERNAL_ERROR, text)
        if method == schema.REQUEST_PERMISSION:
            return self._permission(msg.id, params)
        self._call_ids += 1
        call_id = f"acp-call-{self._call_ids}"
        self._client_calls[call_id] = msg.id
        return [ClientCall(call_id, method, params)]

    def _permission(self, rpc_id: jsonrpc.RequestId, params: dict[str, Any]) -> list[AdapterEvent]:
        options = _options(params.get("options"))
        if not options:
            text = "agent sent session/request_permission without a valid option"
            return _refuse(rpc_id, jsonrpc.INVALID_PARAMS, text)
        request_id = f"acp-{rpc_id}"
        if request_id in self._asks:  # the same id twice: the first one stays
            text = f"agent asked permission twice with id {rpc_id!r}"
            return _refuse(rpc_id, jsonrpc.INVALID_REQUEST, text)
        call, events = self.updates.known_tool(obj(params.get("toolCall")))
        ask = PermissionAsk(
            request_id=request_id,
            tool_name=call.name,
            tool_input=call.summary(),
            input=call.input,
            tool_use_id=call.id or None,
            native={"rpc_id": rpc_id},
            options=options,
        )
        self._asks[request_id] = ask
        return [*self.updates.flush(), *events, ask]

    def _cancel_request(self, params: dict[str, Any]) -> list[AdapterEvent]:
        rpc_id = params.get("requestId")
        if isinstance(rpc_id, bool) or not isinstance(rpc_id, int | str):
            return []
        cancelled = jsonrpc.error(rpc_id, jsonrpc.REQUEST_CANCELLED, "cancelled by the agent")
        request_id = f"acp-{rpc_id}"
        if self._asks.pop(request_id, None) is not None:
            return [
                Write(cancelled),
                PermissionDecided(request_id, "cancelled", "withdrawn by the agent"),
            ]
        for call_id, open_id in list(self._client_calls.items()):
            if open_id == rpc_id:  # its result is not wanted any more
                del self._client_calls[call_id]
                return [Write(cancelled)]
        return []


def _options(raw: Any) -> tuple[dict[str, str], ...]:
    """The well-formed permission options, as ``{"id", "name", "kind"}``."""
    options = []
    for option in raw if isinstance(raw, list) else ():
        option = obj(option)
        option_id, kind = option.get("optionId"), option.get("kind")
        if isinstance(option_id, str) and option_id and kind in schema.OPTION_KINDS:
            options.append(
                {"id": option_id, "name": text_or(option.get("name"), option_id), "kind": kind}
            )
    return tuple(options)


def _choose(options: tuple[dict[str, str], ...], allow: bool) -> str | None:
    """The option that answers ``allow`` best: once, else always."""
    kinds = (
        (schema.ALLOW_ONCE, schema.ALLOW_ALWAYS)
        if allow
        else (schema.REJECT_ONCE, schema.REJECT_ALWAYS)
    )
    for kind in kinds:
        for option in options:
            if option["kind"] == kind:
                return option["id"]
    return None


def _refuse(rpc_id: jsonrpc.RequestId, code: int, text: str) -> list[AdapterEvent]:
    """An error answer to a request of the agent (never leave it waiting), and a note."""
    return [Write(jsonrpc.error(rpc_id, code, text)), ErrorNote(text)]


def _invalid(msg: jsonrpc.Invalid) -> str:
    if msg.code == jsonrpc.PARSE_ERROR:
        return "a line that is not JSON"
    return f"a line that is not JSON-RPC ({msg.reason})"
