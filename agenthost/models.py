"""The records and payloads of the host protocol, as pydantic v2 models. Sans-IO.

Received data (from peers) is validated against these models at the edge. Records that
grow additive fields in minor versions keep unknown fields (``extra="allow"``);
request payloads ignore them. All models are frozen.

Each model's validator and serializer are built when it is first used
(``defer_build``): a host validates only the requests it receives and encodes its
events without models, so building all of them at import was most of an exec'd
host's start-up CPU. A process that forks hosts builds them first
(:func:`build_all`), so that the hosts share them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from agenthost.governance.budget import USD_MAX, usd_limit

# re-exported: the names were defined here before they moved to a module of their own
from agenthost.names import FINAL_STATES as FINAL_STATES
from agenthost.names import MESSAGE_SINCE as MESSAGE_SINCE
from agenthost.names import TERMINAL_COLS, TERMINAL_ROWS, TERMINAL_SIGNALS, MessageType
from agenthost.names import AgentState as AgentState
from agenthost.names import EventType as EventType
from agenthost.timefmt import format_datetime


def _to_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


Timestamp = Annotated[
    datetime,
    AfterValidator(_to_utc),
    PlainSerializer(format_datetime, return_type=str, when_used="json"),
    # What the published JSON Schema says (``agenthost schema``): without it, the
    # serializer's ``str`` would lose the format.
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A UTC datetime that serializes as RFC 3339 with a ``Z`` suffix."""

UsdLimit = Annotated[
    float,
    Strict(),
    AfterValidator(usd_limit),  # the one rule (NaN, infinities, negatives refused)
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": USD_MAX}),
]
"""A budget's USD limit (``host.budget``'s ``usd``, a spawn's ``budget_usd``)."""


class PeerModel(BaseModel):
    """Data received from peers: frozen; unknown fields ignored (forward compatible)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class OpenModel(BaseModel):
    """Records that grow additive fields in minor versions: unknown fields are kept."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)


class HistoryEntry(OpenModel):
    """One chat history entry: a user message, assistant text, a tool call or result."""

    role: str
    """``user``, ``assistant``, ``tool``, (1.3) ``permission``: a permission
    request's decision (``content`` says who decided and why; the additive field
    ``decision`` has the ``permission_response`` event's decision), or (1.4)
    ``governance``: a budget crossed or changed, a pause, a resume (the additive field
    ``governance`` has the ``governance`` event's record)."""
    content: str | None = None
    tool_name: str | None = None
    tool_input: str | None = None
    """A short readable summary of the tool input (the command, the path)."""
    tool_result: str | None = None
    timestamp: Timestamp
    tool_use_id: str | None = None
    is_error: bool | None = None
    input: dict[str, Any] | None = None
    """The full tool input object (additive)."""
    offset: int | None = None
    """The stream offset of the ``chat_entry`` event that carried this entry."""

    def __str__(self) -> str:
        """One readable line: ``assistant: Hello``, ``tool Bash: ls``, ``tool Bash
        result: 1``, prefixed with ``#offset`` when the entry has one (``repr`` keeps
        every field)."""
        text = _entry_text(self)
        return text if self.offset is None else f"#{self.offset} {text}"


def _entry_text(entry: HistoryEntry) -> str:
    if entry.role == "governance":  # (1.4) already "<action> by <actor>: <reason>"
        return f"governance: {entry.content or ''}"
    if entry.role == "permission":  # (1.3) a decision: who allowed what, and why
        what = f" ({entry.tool_input})" if entry.tool_input else ""
        return f"permission {entry.tool_name or 'tool'}{what}: {entry.content or ''}"
    if entry.tool_result is not None:
        what = "error" if entry.is_error else "result"
        who = " ".join(part for part in (entry.role, entry.tool_name, what) if part)
        return f"{who}: {entry.tool_result}"
    if entry.tool_name is not None:
        return f"{entry.role} {entry.tool_name}: {entry.tool_input or ''}"
    return f"{entry.role}: {entry.content or ''}"


class AgentInfo(OpenModel):
    """What a host knows about its agent. Additive fields appear as the agent reports them."""

    id: str
    project: str = ""
    state: str
    pid: int = 0
    worktree: str = ""
    started_at: Timestamp
    task: str | None = None
    description: str | None = None
    backend: str | None = None
    command: list[str] | None = None
    exit_code: int | None = None
    signal: str | None = None
    ended_at: Timestamp | None = None
    stop_requested: bool | None = None
    """True when the agent ended after a stop was requested (``host.stop``, SIGTERM to
    the host), even when the stop had to kill it."""
    last_error: str | None = None
    start_error: str | None = None
    """(1.4) Why the agent could not be started at all (its program was not found or
    is not executable, its directory is gone): it never ran, and ``run`` and ``serve
    --detach`` report the start as failed."""
    session_id: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    usage: dict[str, Any] | None = None
    turns: int | None = None
    pending_requests: int | None = None
    """How many permission requests wait for an answer (1.1)."""
    budget: Budget | None = None
    """(1.4) The agent's budget and what it spent, when it has one."""
    paused_until: Timestamp | None = None
    """(1.4) In state ``paused``: when the host resumes the agent (the usage limit's
    reset time, and a margin)."""
    paused_reason: str | None = None
    """(1.4) In state ``paused``: the limit the agent hit, in its own words."""
    last_event_at: Timestamp | None = None
    """When the host published the agent's newest stream event: its last activity
    (what it said or did, a state it entered). Additive; hosts before it leave it out."""
    sandbox: str | None = None
    """(1.6) The agent's sandbox profile (``strict``, ``net``, ``none``:
    docs/sandbox.md); absent when it runs unconfined."""
    terminal: TerminalSize | None = None
    """(1.7) The size of a terminal agent's pseudo-terminal (``--agent pty``); absent
    for other agents."""
    forked_from: str | None = None
    """The agent this one was forked from (``agenthost fork``). Additive; absent for an
    agent that was not forked, and from hosts before it."""


class TerminalSize(OpenModel):
    """(1.7) A pseudo-terminal's size in character cells."""

    cols: int
    rows: int


class Budget(OpenModel):
    """(1.4) What an agent may spend (``usd``, ``tokens``; None: no limit) and what it
    spent, as its turns reported it. ``exceeded`` says which limit was crossed and by
    what; sends are refused (``budget_exceeded``) while it is set."""

    usd: float | None = None
    tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    exceeded: str | None = None


class PermissionOption(OpenModel):
    """(1.2) One answer an agent offers to its permission request (ACP's options)."""

    id: str
    name: str = ""
    kind: str
    """``allow_once``, ``allow_always``, ``reject_once`` or ``reject_always``."""


class PermissionRequest(OpenModel):
    """A question the agent asked and waits on: may it use this tool with this input?

    It stays pending (``host.pending``, the attach response) until a client answers it
    with ``host.respond`` or the agent withdraws it, whoever is attached meanwhile.
    """

    request_id: str
    tool_name: str
    tool_input: str = ""
    """A short readable summary of the input (the command, the path)."""
    input: dict[str, Any] = Field(default_factory=dict)
    tool_use_id: str | None = None
    created_at: Timestamp
    options: list[PermissionOption] | None = None
    """(1.2) The answers the agent offers, when it names them (ACP agents); a
    ``host.respond`` may pick one by ``option_id``."""

    def approval_text(self) -> str:
        """What a person is asked to approve, whole: the command of the tool's input (an
        argument list quoted as a shell reads it), else the summary ``tool_input``.
        (The summary is cut to a few hundred characters and put on one line; the
        input is what the agent will run. The page's conversation.js has the same.)"""
        from agenthost.approval import approval_text

        return approval_text(self.tool_input, self.input)


class PermissionDecision(OpenModel):
    """How a permission request ended: ``allow``, ``deny`` or ``cancelled``."""

    request_id: str
    behavior: str
    message: str | None = None
    actor: str | None = None
    """(1.3) Who decided: ``policy``, ``timeout``, ``host`` (the agent exited), or the
    answering client's ``actor`` (``terminal``, ``web:<token>``, ``link``...)."""
    reason: str | None = None
    """(1.3) Why, in words (the rule that matched, the time limit, a person)."""
    remember: str | None = None
    """(1.3) ``session`` when the answer also allowed the same for the session."""


class HostInfo(OpenModel):
    """The host process itself."""

    pid: int
    version: str
    protocol_version: str
    started_at: Timestamp
    socket_path: str
    journal: dict[str, Any] | None = None
    """1.1: the journal's path, sync policy, oldest offset, epoch (and error, if any)."""


class GovernanceRecord(OpenModel):
    """(1.4) A governance decision: ``action`` (``budget_exceeded``,
    ``budget_changed``, ``paused``, ``resumed``), who decided (``actor``: ``host``,
    ``cli``...) and why (``reason``); additive fields carry the numbers (``spent_usd``,
    ``usd``, ``until``...)."""

    action: str
    actor: str
    reason: str = ""


class StreamEvent(OpenModel):
    """A numbered event of an agent's stream."""

    kind: Literal["event"] = "event"
    type: str
    agent_id: str
    offset: int
    timestamp: Timestamp
    data: str | None = None
    stream: str | None = None
    """``stdout`` or ``stderr`` for ``output`` events."""
    continued: bool | None = None
    """True on an ``output`` chunk of an over-long line that continues in the next event."""
    escaped: bool | None = None
    """True on an ``output`` event whose bytes were not valid UTF-8: each invalid byte
    appears in ``data`` as a ``\\xNN`` escape."""
    state: str | None = None
    chat_entry: HistoryEntry | None = None
    error: str | None = None
    result: dict[str, Any] | None = None
    request: PermissionRequest | None = None
    """The request of a ``permission_request`` event."""
    decision: PermissionDecision | None = None
    """The outcome of a ``permission_response`` event."""
    governance: GovernanceRecord | None = None
    """(1.4) What a ``governance`` event records."""
    data_b64: str | None = None
    """(1.7) A ``terminal`` event's bytes in base64, when they are not valid UTF-8
    (else they are in ``data``)."""
    cols: int | None = None
    """(1.7) A ``terminal_size`` event's width."""
    rows: int | None = None
    """(1.7) A ``terminal_size`` event's height."""

    def __str__(self) -> str:
        """One readable line: ``#12 chat_entry assistant: Hello``, ``#13 state idle``
        (``repr`` keeps every field)."""
        detail = _event_detail(self)
        head = f"#{self.offset} {self.type}"
        return f"{head} {detail}" if detail else head


def _event_detail(event: StreamEvent) -> str:
    if event.chat_entry is not None:
        return _entry_text(event.chat_entry)
    if event.state is not None:
        return event.state
    if event.error is not None:
        return event.error
    if event.request is not None:
        r = event.request
        return f"{r.tool_name}: {r.tool_input} (request {r.request_id})"
    if event.decision is not None:
        d = event.decision
        return f"{d.behavior} {d.request_id}" + (f": {d.message}" if d.message else "")
    if event.governance is not None:
        g = event.governance
        return f"{g.action} by {g.actor}: {g.reason}"
    if event.result is not None:
        outcome = "failed" if event.result.get("is_error") is True else "done"
        subtype = event.result.get("subtype")
        return f"{outcome} ({subtype})" if isinstance(subtype, str) else outcome
    if event.data is not None:
        return f"{event.stream}: {event.data}" if event.stream == "stderr" else event.data
    if event.data_b64 is not None:
        return f"({len(event.data_b64) * 3 // 4} bytes)"
    if event.cols is not None and event.rows is not None:
        return f"{event.cols}x{event.rows}"
    return ""


# The envelope of every service's responses (agenthost.wire.codec encodes them); its
# docstring is the published schema's description.
class Response(PeerModel):
    """A decoded response envelope."""

    kind: Literal["response"] = "response"
    type: str = ""
    id: str | int | None = None
    success: bool
    error: str | None = None
    code: str | None = None
    payload: dict[str, Any] | None = None


# request payloads: strict types, so ``"5"`` or ``true`` is not an offset.


class EmptyRequest(PeerModel):
    """Payload of requests that take none (ping, status, list, detach)."""


class AttachRequest(PeerModel):
    """``host.attach``: ``offset`` is the last offset the client has (0 = from the oldest)."""

    offset: StrictInt = Field(default=0, ge=0)
    snapshot: StrictBool = False
    """(1.7) A terminal agent: start from its screen as of now (the response's
    ``screen``), then the events after it; ``offset`` is then ignored."""


class HistoryRequest(PeerModel):
    """``host.history``: the most recent ``limit`` entries (0 = all kept).

    1.1: with ``before`` (the newest ``limit`` entries older than that offset) or
    ``after`` (the oldest ``limit`` entries newer than it) the page comes from the
    journal, so the whole conversation can be paged through; ``limit`` 0 means 100.
    """

    limit: StrictInt = Field(default=0, ge=0)
    before: StrictInt | None = Field(default=None, ge=0)
    after: StrictInt | None = Field(default=None, ge=0)


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _replace_lone_surrogates(text: str) -> str:
    # JSON can carry a lone surrogate ("\ud83d": half an emoji, from a client that cut
    # a string in the middle of a pair). It is not text: it cannot be encoded for the
    # agent's stdin (the lines adapter failed with an internal error). It becomes
    # U+FFFD, as in every frame the host writes, so the agent gets what clients see.
    try:
        text.encode()
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text


class SendRequest(PeerModel):
    """``host.send``: text for the agent.

    ``key`` (additive) makes a retried send idempotent: a second send with a key the
    host has already recorded is not applied again and answers with the first offset.
    A lone surrogate in ``input`` becomes U+FFFD.
    """

    input: Annotated[StrictStr, AfterValidator(_replace_lone_surrogates)]
    key: StrictStr | None = Field(default=None, max_length=200)
    origin: dict[StrictStr, StrictStr] | None = Field(default=None, max_length=20)
    """(1.8, additive) Who sent it when a person did not: the daemon's schedules and
    webhooks (``source``, ``name``, ``run_id``...). The host records a ``governance``
    event (``action`` ``triggered``) just before the message; a host that predates it
    ignores the field and records the message alone."""


INPUT_LIMIT: Final = 1 << 20
"""Characters of one ``host.input`` (a paste is sent in pieces of this)."""


class InputRequest(PeerModel):
    """``host.input`` (1.7): bytes for a terminal agent's terminal, as typed: ``data``
    (text, sent as UTF-8) or ``data_b64`` (any bytes), exactly one."""

    data: StrictStr | None = Field(default=None, max_length=INPUT_LIMIT)
    data_b64: StrictStr | None = Field(default=None, max_length=INPUT_LIMIT)

    @model_validator(mode="after")
    def _one_of(self) -> InputRequest:
        if (self.data is None) == (self.data_b64 is None):
            raise ValueError("give exactly one of data and data_b64")
        return self


class ResizeRequest(PeerModel):
    """``host.resize`` (1.7): the size of the client's terminal, in cells."""

    cols: StrictInt = Field(ge=TERMINAL_COLS[0], le=TERMINAL_COLS[1])
    rows: StrictInt = Field(ge=TERMINAL_ROWS[0], le=TERMINAL_ROWS[1])


def _terminal_signal(name: str) -> str:
    if name not in TERMINAL_SIGNALS:
        raise ValueError(f"not a signal host.signal sends: {', '.join(TERMINAL_SIGNALS)}")
    return name


SignalName = Annotated[
    StrictStr,
    AfterValidator(_terminal_signal),
    WithJsonSchema({"type": "string", "enum": list(TERMINAL_SIGNALS)}),
]
"""What ``host.signal`` may send (:data:`agenthost.names.TERMINAL_SIGNALS`)."""


class SignalRequest(PeerModel):
    """``host.signal`` (1.7): a signal for the terminal's foreground process group."""

    signal: SignalName


class ScreenRequest(PeerModel):
    """``host.screen`` (1.7): the screen now, or as of ``offset`` (still journaled)."""

    offset: StrictInt | None = Field(default=None, ge=1)


class StopRequest(PeerModel):
    """``host.stop``: SIGTERM the agent's group, SIGKILL after ``timeout`` seconds.

    ``timeout`` 0 or absent means the default of 30 s (as in the reference client);
    ``force`` sends SIGKILL at once.
    """

    force: StrictBool = False
    timeout: float = Field(default=0, ge=0, le=86400, allow_inf_nan=False, strict=True)
    reason: StrictStr = ""


# response payloads


class PingResponse(OpenModel):
    version: str
    protocol_version: str
    min_protocol_version: str = "1.0"
    uptime: str
    uptime_seconds: float = 0.0
    started_at: Timestamp


class StatusResponse(OpenModel):
    host: HostInfo
    agent: AgentInfo


class ListResponse(OpenModel):
    agents: list[AgentInfo]


class AttachResponse(OpenModel):
    agent_id: str
    stream_offset: int
    oldest_offset: int = 1
    truncated: bool = False
    epoch: str = ""
    pending: list[PermissionRequest] = Field(default_factory=list)
    screen: Screen | None = None
    """(1.7) With ``snapshot``: the screen the events that follow continue from."""
    """Permission requests waiting for an answer (1.1), whatever the replay holds."""


class ScreenCursor(OpenModel):
    """(1.7) Where the cursor is (0-based cell), and whether it is shown."""

    col: int
    row: int
    visible: bool = True


class Screen(OpenModel):
    """(1.7) A terminal agent's screen as of ``offset``: the events up to it painted
    on a terminal of ``cols`` x ``rows``."""

    offset: int
    cols: int
    rows: int
    cursor: ScreenCursor
    lines: list[str]
    """The visible rows as plain text, trailing spaces removed (for phones, search)."""
    dump: str
    """Escape sequences that paint this screen and its modes (alternate screen,
    cursor keys, bracketed paste, mouse) on a fresh terminal of this size."""
    alternate: bool = False
    title: str | None = None


class ResizeResponse(OpenModel):
    """``host.resize`` (1.7): the terminal's size now (a fixed size ignores requests)."""

    cols: int
    rows: int


class SignalResponse(OpenModel):
    """``host.signal`` (1.7): whether a process group received it."""

    sent: bool


class HistoryResponse(OpenModel):
    agent_id: str
    entries: list[HistoryEntry]
    offset: int
    total: int = 0
    has_more: bool | None = None
    """1.1, paged requests: whether more entries lie beyond this page."""


class SendResponse(OpenModel):
    offset: int | None = None
    """The offset of the recorded ``user`` chat entry; None from a host that does not
    report it (protocol 1.0 as first published): the input was still sent."""
    duplicate: bool = False


class StopResponse(OpenModel):
    stopped: bool
    exit_code: int | None = None
    signal: str | None = None
    graceful: bool
    duration: str = ""
    duration_seconds: float = 0.0
    final_state: str


class RespondRequest(PeerModel):
    """``host.respond`` (1.1): answer a pending permission request.

    ``updated_input`` (allow only) replaces the tool's input; ``message`` tells the
    agent why (deny).
    """

    request_id: StrictStr = Field(min_length=1, max_length=200)
    behavior: Literal["allow", "deny"]
    message: StrictStr | None = Field(default=None, max_length=10_000)
    updated_input: dict[str, Any] | None = None
    option_id: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    """(1.2) One of the request's ``options``, whose kind agrees with ``behavior``
    (``allow_*`` with allow); without it the agent's "once" answer is chosen."""
    actor: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    """(1.3) Who answers, for the record: ``terminal``, ``cli``, ``web:<token name>``,
    ``link``, ``acp``... (``client`` when absent)."""
    remember: Literal["session"] | None = None
    """(1.3) ``session``: allow this tool (and this exact command, if it has one) for
    the rest of the agent's session without asking (allow only)."""


class BudgetRequest(PeerModel):
    """``host.budget`` (1.4): set the agent's budget. A limit left out is unchanged;
    ``clear`` removes limits. Raising a crossed limit above what was spent lets sends
    through again."""

    usd: UsdLimit | None = None
    tokens: StrictInt | None = Field(default=None, ge=0, le=10**15)
    clear: list[Literal["usd", "tokens"]] = Field(default_factory=list, max_length=2)
    actor: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    """Who changed it, for the record (``cli`` when absent)."""


class BudgetResponse(OpenModel):
    """``host.budget`` (1.4): the budget now."""

    budget: Budget


class ResumeResponse(OpenModel):
    """``host.resume`` (1.4): resume a ``paused`` agent now. ``resumed`` is False when it
    was not paused (nothing done); ``state`` is its state after the request."""

    resumed: bool
    state: str


class InterruptResponse(OpenModel):
    """``host.interrupt`` (1.1): ``method`` is how: ``control`` (a request the agent
    understands) or ``signal`` (SIGINT to its process group)."""

    sent: bool
    method: str
    deferred: bool | None = None
    """True when the agent could not take it yet and the adapter sends it shortly."""


class PendingResponse(OpenModel):
    requests: list[PermissionRequest]


class RespondResponse(OpenModel):
    request_id: str
    behavior: str


REQUEST_PAYLOADS: Final[dict[MessageType, type[PeerModel]]] = {
    MessageType.PING: EmptyRequest,
    MessageType.STATUS: EmptyRequest,
    MessageType.LIST: EmptyRequest,
    MessageType.ATTACH: AttachRequest,
    MessageType.DETACH: EmptyRequest,
    MessageType.HISTORY: HistoryRequest,
    MessageType.SEND: SendRequest,
    MessageType.STOP: StopRequest,
    MessageType.INTERRUPT: EmptyRequest,
    MessageType.PENDING: EmptyRequest,
    MessageType.RESPOND: RespondRequest,
    MessageType.BUDGET: BudgetRequest,
    MessageType.RESUME: EmptyRequest,
    MessageType.INPUT: InputRequest,
    MessageType.RESIZE: ResizeRequest,
    MessageType.SIGNAL: SignalRequest,
    MessageType.SCREEN: ScreenRequest,
}

RESPONSE_PAYLOADS: Final[dict[MessageType, type[BaseModel] | None]] = {
    MessageType.PING: PingResponse,
    MessageType.STATUS: StatusResponse,
    MessageType.LIST: ListResponse,
    MessageType.ATTACH: AttachResponse,
    MessageType.DETACH: None,
    MessageType.HISTORY: HistoryResponse,
    MessageType.SEND: SendResponse,
    MessageType.STOP: StopResponse,
    MessageType.INTERRUPT: InterruptResponse,
    MessageType.PENDING: PendingResponse,
    MessageType.RESPOND: RespondResponse,
    MessageType.BUDGET: BudgetResponse,
    MessageType.RESUME: ResumeResponse,
    MessageType.INPUT: None,
    MessageType.RESIZE: ResizeResponse,
    MessageType.SIGNAL: SignalResponse,
    MessageType.SCREEN: Screen,
}


def build_all() -> None:
    """Build now every model of this module (each is otherwise built when first used)."""
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, BaseModel):
            if value.__module__ == __name__:
                value.model_rebuild()
