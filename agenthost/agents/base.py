"""The adapter interface: how one agent CLI speaks. Sans-IO.

An adapter builds the agent's command line, turns each line the agent prints into
adapter events (which the host numbers and publishes), and formats user input for the
agent's stdin. It never touches a pipe: the host feeds it lines and writes what it
returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agenthost.agents.programs import Program
from agenthost.errors import ConfigError
from agenthost.protocol import AgentState


@dataclass(frozen=True, slots=True)
class Output:
    """A line (or a chunk of an over-long line) as the agent printed it."""

    data: str
    stream: str = "stdout"
    continued: bool = False
    escaped: bool = False


@dataclass(frozen=True, slots=True)
class Chat:
    """A chat history entry (HistoryEntry fields, without timestamp and offset)."""

    entry: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StateChange:
    """The agent's state changed."""

    state: AgentState


@dataclass(frozen=True, slots=True)
class InfoUpdate:
    """New values for additive AgentInfo fields (session_id, model, cost_usd, ...)."""

    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorNote:
    """Something the host must report as an ``error`` event (e.g. an unparseable line,
    a failed turn)."""

    message: str
    http_status: int | None = None
    """The HTTP status of the model API's answer, when the failure came from it."""
    turn_failed: bool = False
    """The note of a failed turn (:func:`turn_failed`), not something the host saw go
    wrong: clients show its text as the turn's outcome (``turn failed: TEXT``) and a
    death mid-turn is not mistaken for one."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The end of a turn: duration, cost, usage, as the agent reported them."""

    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """The agent asks whether it may use a tool with this input, and waits."""

    request_id: str
    tool_name: str
    tool_input: str
    """A short readable summary of the input."""
    input: dict[str, Any] = field(default_factory=dict)
    tool_use_id: str | None = None
    native: dict[str, Any] = field(default_factory=dict)
    """What the adapter needs to answer it later (kept by the host, not published)."""
    options: tuple[dict[str, str], ...] = ()
    """The answers the agent offers, when it names them (ACP agents): each ``{"id",
    "name", "kind"}`` with ``kind`` one of ``allow_once``, ``allow_always``,
    ``reject_once``, ``reject_always``. Published with the request; ``host.respond``
    may pick one by ``option_id``."""


@dataclass(frozen=True, slots=True)
class PermissionDecided:
    """A permission request ended: ``allow``, ``deny``, or ``cancelled`` (the agent
    withdrew it, or exited)."""

    request_id: str
    behavior: str
    message: str | None = None
    actor: str | None = None
    """Who decided (see :class:`agenthost.models.PermissionDecision`)."""
    reason: str | None = None
    remember: str | None = None


@dataclass(frozen=True, slots=True)
class Write:
    """Bytes the adapter wants written to the agent's stdin (not published).

    For agents that hold a conversation with their client: a handshake, the next
    queued message once a turn ends, an answer to a request of the agent.
    """

    data: bytes


@dataclass(frozen=True, slots=True)
class ClientCall:
    """The agent asks its client for something only I/O can do (ACP's ``fs/*`` and
    ``terminal/*`` methods): the host performs it, confined to the agent's working
    directory, and hands the outcome to :meth:`Adapter.call_done` (not published)."""

    call_id: str
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallFailed:
    """Why the host could not do a :class:`ClientCall`."""

    message: str
    not_found: bool = False
    """The file or terminal does not exist (ACP answers it with its own error code)."""
    bad_params: bool = False
    """The call's parameters were wrong (not the world): e.g. a relative path."""


@dataclass(frozen=True, slots=True)
class Governed:
    """(1.4) A governance decision the host made or applied, for the record: a budget
    crossed or changed, a pause for a usage limit, a resume. Published as a
    ``governance`` event and a ``governance`` history entry (the audit trail)."""

    action: str
    """What happened: ``budget_exceeded``, ``budget_changed``, ``paused``, ``resumed``."""
    actor: str
    """Who decided: ``host`` (a rule applied by the host), ``cli``, ``web:<name>``..."""
    reason: str
    """Why, in a sentence a person reads."""
    detail: dict[str, Any] = field(default_factory=dict)
    """The numbers behind it (spent, limit, reset time...), JSON values."""


@dataclass(frozen=True, slots=True)
class UsageLimited:
    """(1.4) The turn failed on a usage limit (published with the turn's failure): it
    resets at ``reset_at`` (a POSIX time) when the agent said so; ``text`` is its
    message. The host pauses the agent until then (:mod:`agenthost.host.pauses`)."""

    reset_at: float | None
    text: str


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    """(1.7) Bytes a terminal agent painted (a ``terminal`` event): never a cut UTF-8
    sequence, at most 64 KiB (:mod:`agenthost.terminal.chunks`)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class TerminalResized:
    """(1.7) The agent's terminal has this size from here on (``terminal_size``)."""

    cols: int
    rows: int


def given_command(kind: str, command: Sequence[str], example: str) -> list[str]:
    """The command after ``--`` of an agent kind that runs whatever it is given, or the
    ConfigError that says it needs one (``example``: what to put after ``--``)."""
    if not command:
        raise ConfigError(
            f"the {kind} agent needs a command",
            hint=f"put it after --, e.g. --agent {kind} -- {example} (with serve or run)",
        )
    return list(command)


AdapterEvent = (
    Output
    | TerminalOutput
    | TerminalResized
    | Chat
    | StateChange
    | InfoUpdate
    | ErrorNote
    | TurnResult
    | PermissionAsk
    | PermissionDecided
    | Write
    | ClientCall
    | Governed
    | UsageLimited
)


INTERRUPTED_TEXT = "turn interrupted"


def turn_failed(message: str, http_status: int | None = None) -> list[AdapterEvent]:
    """How every adapter reports a turn that failed: an ``error`` event with the message
    (and the API's HTTP status when known, and ``"turn_failed": true``), then the same
    text in history as an assistant entry with ``is_error`` (a role clients already
    know, not a new one)."""
    entry: dict[str, Any] = {"role": "assistant", "content": message, "is_error": True}
    if http_status is not None:
        entry["http_status"] = http_status
    return [ErrorNote(message, http_status, turn_failed=True), Chat(entry)]


def turn_interrupted() -> list[AdapterEvent]:
    """How every adapter reports a turn ended by an interrupt: not a failure, but a
    history entry saying so (the partial answer, if any, is already there)."""
    return [Chat({"role": "assistant", "content": INTERRUPTED_TEXT, "interrupted": True})]


class Deferred:
    """An interrupt the adapter accepted and will send as soon as it can."""

    __slots__ = ()


DEFERRED = Deferred()


@dataclass(frozen=True)
class AdapterOptions:
    """What a host tells its adapter about the agent it runs.

    ``params`` are adapter-specific settings (``serve --agent-opt KEY=VALUE``); an
    adapter rejects keys it does not know with a ConfigError.
    """

    worktree: str = ""
    resume: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    fork: str | None = None
    """Start on a copy of this session (another agent's: ``agenthost fork``), in a new
    session of the agent's own; the parent's session is left as it was."""
    fork_at: str | None = None
    """With ``fork``: copy the conversation only up to this point, in the agent's own
    name for it (Claude Code's assistant message uuid, Codex's turn id)."""


class Adapter:
    """Base class of agent adapters. Subclasses set ``kind`` and override what differs.

    The defaults describe a plain line-oriented program: every stdout line is an
    ``output`` event and input is written as one line.
    """

    kind: ClassVar[str] = "base"
    passthrough: ClassVar[bool] = True
    """True when every stdout line is only an ``output`` event (lets the host skip
    building adapter events on the hot path)."""
    max_line_bytes: ClassVar[int] = 1 << 20
    """Longer stdout lines are delivered in chunks (``continued`` output events)."""
    known_params: ClassVar[frozenset[str]] = frozenset()
    """The ``--agent-opt`` keys this adapter understands."""
    resumable: ClassVar[bool] = False
    """Whether ``--resume`` means something to this agent."""
    forkable: ClassVar[bool] = False
    """Whether the adapter can start on a copy of a session (``fork``)."""
    program: ClassVar[Program] = Program()
    """Who the agent's program is, for the message when it is not installed (the
    adapters of the CLIs we know name the product and their ``AGENTHOST_*_BIN``)."""
    terminal: ClassVar[bool] = False
    """Whether the agent runs in a pseudo-terminal owned by the host (``pty``): its
    output is ``terminal`` events, not lines (:mod:`agenthost.agents.pty`)."""
    structured: ClassVar[bool] = False
    """Whether the agent's output is structured (chat entries, turns, results) rather
    than plain lines: a client renders its events as a conversation, and its interrupt
    ends a turn instead of signalling the agent's processes."""

    def __init__(self, options: AdapterOptions | None = None) -> None:
        self.options = options or AdapterOptions()
        unknown = set(self.options.params) - self.known_params
        if unknown:
            known = ", ".join(sorted(self.known_params)) or "none"
            raise ConfigError(
                f"unknown option(s) for the {self.kind} agent: {', '.join(sorted(unknown))}",
                hint=f"this agent understands: {known}",
            )
        if self.options.resume is not None and not self.resumable:
            raise ConfigError(f"the {self.kind} agent cannot resume a session")
        if self.options.fork is not None and not self.forkable:
            raise ConfigError(f"the {self.kind} agent cannot fork a session")
        if self.options.fork is not None and self.options.resume is not None:
            raise ConfigError("a host either resumes a session or forks one, not both")
        if self.options.fork_at is not None and self.options.fork is None:
            raise ConfigError("a fork point (--fork-at) needs the session it is in (--fork)")

    @classmethod
    def inside_sandbox(cls, params: Mapping[str, str]) -> dict[str, str]:
        """The ``--agent-opt`` settings for an agent of this kind that runs inside
        agenthost's sandbox, from those asked for: an agent with a sandbox of its own
        turns it off there where it could not nest (docs/sandbox.md). By default
        they are unchanged."""
        return dict(params)

    def build_command(self, command: Sequence[str]) -> list[str]:
        """The argv to run, given what the user put after ``--``."""
        return list(command)

    def environment(self) -> dict[str, str]:
        """Extra environment variables for the agent."""
        return {}

    def initial_state(self) -> AgentState:
        """The state right after the agent process started."""
        return AgentState.RUNNING

    def parse_line(self, line: str) -> list[AdapterEvent]:
        """Events for one complete stdout line (newline removed)."""
        return [Output(line)]

    def parse_fragment(self, chunk: str, continued: bool) -> list[AdapterEvent]:
        """Events for a chunk of an over-long stdout line.

        ``continued`` is true on every chunk but the last one of the line.
        """
        return [Output(chunk, continued=continued)]

    def encode_input(self, text: str) -> bytes:
        """The bytes to write to the agent's stdin for a user message."""
        return text.encode() if text.endswith("\n") else (text + "\n").encode()

    def on_send(self, text: str) -> list[AdapterEvent]:
        """Events caused by sending ``text`` (after the user chat entry is recorded)."""
        return []

    def startup(self) -> list[AdapterEvent]:
        """Events right after the agent started (e.g. a ``Write`` of a handshake)."""
        return []

    def send(self, text: str) -> list[AdapterEvent]:
        """What a user message becomes: by default its encoded input, written at once,
        then :meth:`on_send`. An adapter may instead hold the message for later."""
        return [Write(self.encode_input(text)), *self.on_send(text)]

    def encode_interrupt(self) -> bytes | Deferred | None:
        """What to write to stdin to interrupt the current turn (``b""``: there is
        nothing to interrupt; :data:`DEFERRED`: the adapter will send it itself as soon
        as it can), or None: then the host sends SIGINT to the agent's process group
        (what Ctrl-C would do)."""
        return None

    def after_interrupt(self) -> list[AdapterEvent]:
        """Events right after the bytes of :meth:`encode_interrupt` were written, e.g.
        the permission requests the interrupt answered ``cancelled``."""
        return []

    def encode_permission_response(
        self,
        ask: PermissionAsk,
        allow: bool,
        message: str | None,
        updated_input: dict[str, Any] | None,
        option_id: str | None = None,
    ) -> bytes:
        """The stdin bytes that answer a permission request this adapter reported.

        ``option_id`` is one of ``ask.options`` (the host checked it, and that its kind
        agrees with ``allow``); None lets the adapter choose.
        """
        raise ConfigError(f"the {self.kind} agent does not ask for permissions")

    def call_done(
        self, call_id: str, result: dict[str, Any] | None, error: CallFailed | None
    ) -> list[AdapterEvent]:
        """Events once the host performed a :class:`ClientCall` of this adapter: its
        ``result``, or why it failed (e.g. the answer to write)."""
        return []
