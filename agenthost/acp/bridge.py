"""A hosted agent served to an ACP editor: the translation, without I/O.

:class:`Bridge` is the ACP *agent* an editor talks to (``agenthost acp ID``): one
session, whose id is the agent id, bridged to the agent's host. It is fed what the
editor writes (:meth:`Bridge.feed`) and what the host's stream gives (:meth:`attached`,
:meth:`event`, :meth:`gap`, from a follow), and answers with :data:`Effect` values for
the I/O around it (:mod:`agenthost.acp.editor`) to carry out: lines for the editor, a
follow of the host's stream to start, host requests (send, interrupt, respond, status)
whose outcomes come back through :meth:`sent`, :meth:`failed` and :meth:`listed`.

The order of what the editor receives is the stream's: a ``session/load`` (or
``session/new``) is answered once the replay of its attach is written, each update
carries the offset of the event it came from (``_meta.agenthost``), and events that
arrive while one of the editor's prompts is being sent wait for the send's answer, so
that its own message is recognised (by its offset) and not echoed back. docs/acp.md
describes the behaviour for editors.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from agenthost.acp import jsonrpc, schema
from agenthost.acp.effects import (
    Effect,
    Interrupt,
    ListSessions,
    Respond,
    Send,
    StartFollow,
    Write,
)
from agenthost.acp.jsonrpc import RequestId
from agenthost.acp.params import BadParams, is_int, optional, prompt_text, resume_after
from agenthost.acp.updates import UpdateMapper, chunk, permission_tool_call, stop_reason
from agenthost.linesplit import Fragment, LineSplitter
from agenthost.timefmt import format_datetime

if TYPE_CHECKING:
    from agenthost.position import Gap
    from agenthost.protocol import AgentInfo, PermissionRequest, StreamEvent

MAX_LINE: Final = 8 << 20
"""The longest message accepted from the editor (bytes); a longer one is refused
without being kept whole."""
TURN_ENDS: Final = frozenset({"idle", "done", "error"})
OWN_MAX: Final = 1024  # offsets of our own prompts remembered

DEFAULT_OPTIONS: Final = (
    {"optionId": "allow", "name": "Allow", "kind": schema.ALLOW_ONCE},
    {"optionId": "deny", "name": "Deny", "kind": schema.REJECT_ONCE},
)
"""What the editor may answer to a request whose agent names no options of its own."""


@dataclass
class _Prompt:
    rid: RequestId
    offset: int | None = None  # of its user message, once the send answered
    cancelled: bool = False
    result: dict[str, Any] | None = None  # the turn's last result event
    error: str = ""  # the turn's last error event


@dataclass(frozen=True)
class _Ask:
    rid: RequestId  # our session/request_permission
    kinds: dict[str, str]  # optionId -> kind
    own: bool  # the options are the agent's (respond with option_id)


@dataclass
class _Opening:
    rid: RequestId
    method: str


@dataclass
class _Attach:
    head: int
    pending: list[PermissionRequest] = field(default_factory=list)


class Bridge:
    """One editor's ACP session on agent ``agent_id``'s host. See the module docstring."""

    def __init__(self, agent_id: str, *, version: str, max_line: int = MAX_LINE) -> None:
        self.agent_id = agent_id
        self.version = version
        self.client_capabilities: dict[str, Any] = {}
        """What the editor said it can do (``initialize``)."""
        self.epoch = ""
        self.offset = 0
        """The stream position of the last event handled (what the editor has seen)."""
        self.open = False
        """A session/load or session/new was answered."""
        self._lines = LineSplitter(max_line)
        self._max_line = max_line
        self._discarding = False  # inside a line over the limit
        self._mapper = UpdateMapper()
        self._calls = jsonrpc.Calls()
        self._opening: _Opening | None = None
        self._replay: _Attach | None = None  # the attach whose replay is being written
        self._asks: dict[str, _Ask] = {}  # host request id -> the editor's open question
        self._dismissed: set[str] = set()  # requests the editor closed without an answer
        self._prompt: _Prompt | None = None
        self._held: list[Callable[[], list[Effect]]] | None = None  # while a prompt is sent
        self._own: dict[int, None] = {}  # offsets of our prompts' messages
        self._updated_at: datetime | None = None

    # --- from the editor ------------------------------------------------------------

    def feed(self, data: bytes) -> list[Effect]:
        """Bytes the editor wrote: what to do about the messages they complete."""
        out: list[Effect] = []
        for line in self._lines.feed(data):
            out += self._line(line)
        return out

    def end_of_input(self) -> list[Effect]:
        """The editor closed its end: a last line without a newline is still read."""
        out: list[Effect] = []
        for line in self._lines.flush():
            out += self._line(line)
        return out

    def _line(self, line: bytes) -> list[Effect]:
        if isinstance(line, Fragment):
            if self._discarding:
                return []
            self._discarding = True
            reason = f"message longer than {self._max_line} bytes"
            return [Write(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, reason))]
        if self._discarding:  # the end of the long line
            self._discarding = False
            return []
        if not line.strip():
            return []
        msg = jsonrpc.parse(line)
        if isinstance(msg, jsonrpc.Invalid):
            return [Write(jsonrpc.error(msg.id, msg.code, msg.reason))]
        if isinstance(msg, jsonrpc.Response):
            return self._answer(msg)
        if isinstance(msg, jsonrpc.Notification):
            return self._notification(msg)
        handler = self._METHODS.get(msg.method)
        if handler is None:
            message = f"method not found: {msg.method}"
            return [Write(jsonrpc.error(msg.id, jsonrpc.METHOD_NOT_FOUND, message))]
        try:
            return handler(self, msg)
        except BadParams as exc:
            return [Write(jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, str(exc)))]

    def _initialize(self, req: jsonrpc.Request) -> list[Effect]:
        version = req.params.get("protocolVersion")
        if not is_int(version) or version < 0:
            raise BadParams("protocolVersion must be a non-negative integer")
        caps = optional(req.params, "clientCapabilities", dict)
        self.client_capabilities = caps or {}
        answer = {
            "protocolVersion": schema.PROTOCOL_VERSION,  # the only one we speak
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "sessionCapabilities": {"list": {}},
            },
            "agentInfo": {"name": "agenthost", "title": "agenthost", "version": self.version},
            "authMethods": [],
        }
        return [Write(jsonrpc.result(req.id, answer))]

    def _authenticate(self, req: jsonrpc.Request) -> list[Effect]:
        return [Write(jsonrpc.result(req.id, {}))]  # no method is offered: nothing to do

    def _new(self, req: jsonrpc.Request) -> list[Effect]:
        optional(req.params, "cwd", str)
        optional(req.params, "mcpServers", list)
        return self._start(req, StartFollow(from_head=True))

    def _load(self, req: jsonrpc.Request) -> list[Effect]:
        session = self._session_id(req)
        if session is None:
            return [Write(self._unknown_session(req))]
        optional(req.params, "mcpServers", list)
        return self._start(req, StartFollow(after=resume_after(req.params)))

    def _start(self, req: jsonrpc.Request, follow: StartFollow) -> list[Effect]:
        if self._opening is not None:
            message = f"a {self._opening.method} is in progress"
            return [Write(jsonrpc.error(req.id, jsonrpc.INVALID_REQUEST, message))]
        out: list[Effect] = [self._withdraw(r) for r in list(self._asks)]
        self._dismissed.clear()
        self._mapper.reset()
        self._replay = None
        if self._held is not None:
            self._held.clear()  # what the previous follow gave is not this one's
        self._opening = _Opening(req.id, req.method)
        out.append(follow)
        return out

    def _list(self, req: jsonrpc.Request) -> list[Effect]:
        return [ListSessions(req.id, optional(req.params, "cwd", str))]

    def _prompt_request(self, req: jsonrpc.Request) -> list[Effect]:
        if self._session_id(req) is None:
            return [Write(self._unknown_session(req))]
        text = prompt_text(req.params.get("prompt"))
        if not self.open:
            message = "no session is open: send session/load or session/new first"
            return [Write(jsonrpc.error(req.id, jsonrpc.INVALID_REQUEST, message))]
        if self._prompt is not None:
            message = "a prompt is running in this session: wait for its answer, or cancel it"
            return [Write(jsonrpc.error(req.id, jsonrpc.INVALID_REQUEST, message))]
        self._prompt = _Prompt(req.id)
        if self._held is None:
            self._held = []
        return [Send(req.id, text)]

    _METHODS: Final[dict[str, Callable[[Bridge, jsonrpc.Request], list[Effect]]]] = {
        schema.INITIALIZE: _initialize,
        schema.AUTHENTICATE: _authenticate,
        schema.SESSION_NEW: _new,
        schema.SESSION_LOAD: _load,
        schema.SESSION_LIST: _list,
        schema.SESSION_PROMPT: _prompt_request,
    }

    def _notification(self, note: jsonrpc.Notification) -> list[Effect]:
        prompt = self._prompt
        if prompt is None or prompt.cancelled:
            return []
        if note.method == schema.SESSION_CANCEL:
            if note.params.get("sessionId") != self.agent_id:
                return []
        elif note.method != schema.CANCEL_REQUEST or note.params.get("requestId") != prompt.rid:
            return []  # notifications we do not know are ignored
        prompt.cancelled = True  # the prompt answers "cancelled" when the turn ends
        return [Interrupt()]

    def _answer(self, response: jsonrpc.Response) -> list[Effect]:
        """The editor's answer to one of our permission questions."""
        settled = self._calls.settle(response)
        if settled is None:
            return []
        request_id = settled[1]
        ask = self._asks.get(request_id)
        if ask is None or ask.rid != response.id:
            return []  # withdrawn meanwhile: a late answer
        del self._asks[request_id]
        outcome = response.result.get("outcome") if isinstance(response.result, dict) else None
        option = outcome.get("optionId") if isinstance(outcome, dict) else None
        kind = ask.kinds.get(option) if isinstance(option, str) else None
        if response.error is not None or kind is None:
            # cancelled, or no answer we can read: the request stays pending for others
            self._dismissed.add(request_id)
            return []
        behavior: Literal["allow", "deny"] = "allow" if kind.startswith("allow") else "deny"
        return [Respond(request_id, behavior, option if ask.own else None)]

    # --- from the host --------------------------------------------------------------

    def attached(
        self,
        *,
        epoch: str,
        head: int,
        position: int,
        new_epoch: bool,
        pending: list[PermissionRequest],
        structured: bool,
    ) -> list[Effect]:
        """A follow attached to stream ``epoch`` whose last offset is ``head``; events
        after ``position`` follow (those up to ``head`` are its replay); ``pending``
        are the host's open permission requests at that moment."""
        return self._in_order(
            lambda: self._attached(epoch, head, position, new_epoch, pending, structured)
        )

    def _attached(
        self,
        epoch: str,
        head: int,
        position: int,
        new_epoch: bool,
        pending: list[PermissionRequest],
        structured: bool,
    ) -> list[Effect]:
        if new_epoch and self.epoch and epoch != self.epoch:
            # another stream: its offsets say nothing of the old one's
            self._mapper.reset()
            self._own.clear()
            if self._prompt is not None and self._prompt.offset is not None:
                self._prompt.offset = 0
        self.epoch = epoch
        self.offset = position
        self._mapper.structured = structured
        self._replay = _Attach(head, list(pending))
        return self._replayed() if position >= head else []

    def event(self, event: StreamEvent) -> list[Effect]:
        """An event of the followed stream."""
        return self._in_order(lambda: self._event(event))

    def _event(self, event: StreamEvent) -> list[Effect]:
        self.offset = event.offset
        self._updated_at = event.timestamp
        out: list[Effect] = []
        entry = event.chat_entry
        if not (entry is not None and entry.role == "user" and event.offset in self._own):
            out += [self._update(u, event.offset) for u in self._mapper.updates(event)]
        if self._replay is None:  # live: the editor is asked what is asked now
            out += self._permission(event)
        out += self._turn(event)
        if self._replay is not None and event.offset >= self._replay.head:
            out += self._replayed()
        return out

    def gap(self, gap: Gap) -> list[Effect]:
        """Events the follow could not give (see :class:`agenthost.position.Gap`)."""
        return self._in_order(lambda: self._gap(gap))

    def _gap(self, gap: Gap) -> list[Effect]:
        last = gap.before - 1
        if gap.reason == "new_epoch":
            text = "[agenthost: the host's stream was started anew; showing it from its start]"
        else:
            text = f"[agenthost: {gap}; they are not shown]"
        self.offset = max(self.offset, last)
        out: list[Effect] = [self._update(chunk(schema.AGENT_MESSAGE_CHUNK, text), last)]
        if self._replay is not None and last >= self._replay.head:
            out += self._replayed()
        return out

    def _in_order(self, step: Callable[[], list[Effect]]) -> list[Effect]:
        if self._held is not None:  # a prompt is being sent: after its answer
            self._held.append(step)
            return []
        return step()

    def _release(self) -> list[Effect]:
        held, self._held = self._held, None
        out: list[Effect] = []
        for step in held or ():
            out += step()
        return out

    def _replayed(self) -> list[Effect]:
        """The replay of an attach is written: answer the session/load or new that
        asked for it, and bring the editor's questions in line with the host's."""
        replay, self._replay = self._replay, None
        out: list[Effect] = []
        opening, self._opening = self._opening, None
        if opening is not None:
            if opening.method == schema.SESSION_NEW:
                answer: Any = {"sessionId": self.agent_id, "_meta": self._meta(self.offset)}
            else:
                answer = None
            out.append(Write(jsonrpc.result(opening.rid, answer)))
            self.open = True
        pending = {r.request_id: r for r in replay.pending} if replay is not None else {}
        out += [self._withdraw(r) for r in list(self._asks) if r not in pending]
        for request_id, request in pending.items():
            if request_id not in self._asks and request_id not in self._dismissed:
                out.append(self._ask(request))
        return out

    def _permission(self, event: StreamEvent) -> list[Effect]:
        if event.type == "permission_request" and event.request is not None:
            request_id = event.request.request_id
            if request_id not in self._asks and request_id not in self._dismissed:
                return [self._ask(event.request)]
        elif event.type == "permission_response" and event.decision is not None:
            request_id = event.decision.request_id
            self._dismissed.discard(request_id)
            if request_id in self._asks:
                return [self._withdraw(request_id)]  # answered elsewhere first
        return []

    def _ask(self, request: PermissionRequest) -> Write:
        options = [
            {"optionId": o.id, "name": o.name or o.kind, "kind": o.kind}
            for o in request.options or ()
            if o.kind in schema.OPTION_KINDS
        ]
        own = bool(options)
        if not own:
            options = [dict(o) for o in DEFAULT_OPTIONS]
        params = {
            "sessionId": self.agent_id,
            "toolCall": permission_tool_call(request),
            "options": options,
        }
        rid, line = self._calls.issue(schema.REQUEST_PERMISSION, params, request.request_id)
        kinds = {o["optionId"]: o["kind"] for o in options}
        self._asks[request.request_id] = _Ask(rid, kinds, own)
        return Write(line)

    def _withdraw(self, request_id: str) -> Write:
        ask = self._asks.pop(request_id)
        return Write(jsonrpc.notification(schema.CANCEL_REQUEST, {"requestId": ask.rid}))

    def _turn(self, event: StreamEvent) -> list[Effect]:
        prompt = self._prompt
        if prompt is None or prompt.offset is None or event.offset <= prompt.offset:
            return []
        if event.type == "result" and event.result is not None:
            prompt.result = event.result
        elif event.type == "error" and event.error:
            prompt.error = event.error
        elif event.type == "state" and event.state in TURN_ENDS:
            self._prompt = None
            if event.state == "error" and not prompt.cancelled:
                why = prompt.error or "the agent ended in state error"
                return [Write(jsonrpc.error(prompt.rid, jsonrpc.INTERNAL_ERROR, why))]
            answer = {"stopReason": stop_reason(prompt.result, cancelled=prompt.cancelled)}
            return [Write(jsonrpc.result(prompt.rid, answer))]
        return []

    # --- outcomes of host requests --------------------------------------------------

    def sent(self, rid: RequestId, offset: int | None) -> list[Effect]:
        """The host recorded prompt ``rid``'s message at ``offset`` (None: an old host
        that does not say)."""
        prompt = self._prompt
        out: list[Effect] = []
        if prompt is not None and prompt.rid == rid:
            if offset is not None:
                self._own[offset] = None
                if len(self._own) > OWN_MAX:
                    del self._own[next(iter(self._own))]
            if self._mapper.structured:
                prompt.offset = self.offset if offset is None else offset
            else:  # no turns: the prompt is done once the agent has it
                self._prompt = None
                out.append(Write(jsonrpc.result(rid, {"stopReason": schema.END_TURN})))
        return out + self._release()

    def failed(self, rid: RequestId, message: str) -> list[Effect]:
        """A host request made for the editor's request ``rid`` failed (e.g. no host
        runs): the editor is told why."""
        out: list[Effect] = [Write(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, message))]
        if self._prompt is not None and self._prompt.rid == rid:
            self._prompt = None
            out += self._release()
        return out

    def follow_failed(self, message: str) -> list[Effect]:
        """The follow of a session/load or new ended before it attached."""
        opening, self._opening = self._opening, None
        if opening is None:
            return []
        return [Write(jsonrpc.error(opening.rid, jsonrpc.INTERNAL_ERROR, message))]

    def listed(self, rid: RequestId, cwd: str | None, agent: AgentInfo) -> list[Effect]:
        """``session/list`` ``rid``'s answer, from the host's status."""
        sessions = []
        if cwd is None or _same_dir(cwd, agent.worktree):
            when = self._updated_at or agent.ended_at or agent.started_at
            sessions.append(
                {
                    "sessionId": self.agent_id,
                    "cwd": agent.worktree or "/",
                    "title": agent.task or agent.description or self.agent_id,
                    "updatedAt": format_datetime(when),
                }
            )
        return [Write(jsonrpc.result(rid, {"sessions": sessions}))]

    # --- helpers --------------------------------------------------------------------

    def _update(self, update: dict[str, Any], offset: int) -> Write:
        params = {"sessionId": self.agent_id, "update": update, "_meta": self._meta(offset)}
        return Write(jsonrpc.notification(schema.SESSION_UPDATE, params))

    def _meta(self, offset: int) -> dict[str, Any]:
        return {schema.META_KEY: {"offset": offset, "epoch": self.epoch}}

    def _session_id(self, req: jsonrpc.Request) -> str | None:
        """The request's sessionId if it is this bridge's; None for another."""
        session = req.params.get("sessionId")
        if not isinstance(session, str):
            raise BadParams("sessionId must be a string")
        return session if session == self.agent_id else None

    def _unknown_session(self, req: jsonrpc.Request) -> bytes:
        message = f"unknown session {req.params.get('sessionId')!r}: this is agent {self.agent_id}"
        return jsonrpc.error(req.id, jsonrpc.RESOURCE_NOT_FOUND, message)


def _same_dir(a: str, b: str) -> bool:
    return posixpath.normpath(a) == posixpath.normpath(b)
