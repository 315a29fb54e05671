"""The daemon protocol: ``daemon.*`` messages on ``<home>/daemon.sock``. Sans-IO.

The daemon speaks the hosts' envelope and framing (:mod:`agenthost.protocol`,
:mod:`agenthost.wire.framing`): one JSON object per line, requests
``{"type", "id"?, "payload"?, "protocol_version"?}``, responses
``{"kind": "response", "type", "id", "success", "error"?, "code"?, "payload"?}``, the
same error codes and the same 1 MiB request limit. Only the message types differ;
they are listed in :class:`DaemonMessageType` and documented in ``docs/daemon.md``.

A ``daemon.watch`` stream carries two kinds of frames after the response:

* the hosts' own events (``"kind": "event"``), unchanged: each already names its
  ``agent_id`` and carries its host's ``offset``;
* the daemon's notices (``"kind": "notice"``): what happened to a host (attached,
  gone, restarting, ...). Notices have no offset; clients ignore types they do not know.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
)

from agenthost.automation.model import (
    RunRequest,
    RunResponse,
    RunsRequest,
    RunsResponse,
    ScheduleInfo,
    ScheduleListResponse,
    ScheduleRequest,
    ScheduleSpec,
)
from agenthost.daemon.spec import ForkSpec as ForkSpec
from agenthost.daemon.spec import RestartPolicy as RestartPolicy
from agenthost.daemon.spec import SpawnSpec as SpawnSpec
from agenthost.daemon.spec import agent_id_value
from agenthost.errors import ProtocolError
from agenthost.models import OpenModel, PeerModel, Timestamp
from agenthost.protocol import (
    AgentState,
    EmptyRequest,
    EventType,
    Request,
    Response,
    StopResponse,
    StreamEvent,
)
from agenthost.timefmt import now_rfc3339
from agenthost.wire.codec import dump_line
from agenthost.wire.table import MessageTable

DAEMON_PROTOCOL_VERSION: Final = "1.0"
"""The version of the ``daemon.*`` message set (``MAJOR.MINOR``). The envelope's own
``protocol_version`` is checked exactly as hosts check it."""


class DaemonMessageType(StrEnum):
    """Request types the daemon serves."""

    PING = "daemon.ping"
    SPAWN = "daemon.spawn"
    LIST = "daemon.list"
    STOP = "daemon.stop"
    FORGET = "daemon.forget"
    WATCH = "daemon.watch"
    UNWATCH = "daemon.unwatch"
    SWITCH = "daemon.switch"
    """(1.7) Open a structured agent's own TUI on its session, or return from it."""
    RUN = "daemon.run"
    """(1.8) Start a run now (a webhook's delivery): send to an agent, or start one."""
    RUNS = "daemon.runs"
    """(1.8) The newest runs of schedules and webhooks."""
    SCHEDULE_ADD = "daemon.schedule.add"
    """(1.8) Add (or replace) a cron schedule of runs."""
    SCHEDULE_LIST = "daemon.schedule.list"
    """(1.8) The schedules, each with its last run and next due time."""
    SCHEDULE_RM = "daemon.schedule.rm"
    """(1.8) Remove a schedule (its runs stay in the record)."""
    SCHEDULE_RUN = "daemon.schedule.run"
    """(1.8) Start a schedule's run now, out of its times."""


class NoticeType(StrEnum):
    """Notices of a ``daemon.watch`` stream."""

    HOST_ATTACHED = "host_attached"
    """The daemon (re)attached to a host: ``epoch``, ``from_offset``, ``stream_offset``,
    ``truncated`` (events after ``from_offset`` were evicted before the attach)."""
    HOST_GONE = "host_gone"
    """The host process is gone: ``status`` (exited, lost, stopped) and ``reason``."""
    AGENT_EXITED = "agent_exited"
    """The agent exited (its host may linger): ``exit_code``, ``signal``, ``state``."""
    AGENT_SPAWNED = "agent_spawned"
    """A new host runs the agent: ``host_pid``, ``restarts``."""
    AGENT_RESTARTING = "agent_restarting"
    """A restart is scheduled: ``attempt``, ``delay`` (seconds)."""
    AGENT_FAILED = "agent_failed"
    """The restart policy gave up: ``reason``."""
    GAP = "gap"
    """Events the daemon never received (evicted from the host's ring before it could
    read them): ``after`` and ``before`` bound the missing offsets, exclusive."""


class AgentStatus(StrEnum):
    """What the daemon knows about an agent's host (``status`` of :class:`DaemonAgent`).

    The agent's own state (running, idle, done, ...) is ``state``.
    """

    SPAWNING = "spawning"
    RUNNING = "running"
    """The host is alive and the daemon follows its stream."""
    UNREACHABLE = "unreachable"
    """The host is alive (its lock is held) but does not answer; the daemon retries."""
    EXITED = "exited"
    """The agent exited; its host may still linger."""
    RESTARTING = "restarting"
    """Waiting for the restart policy's backoff before a new host is spawned."""
    STOPPED = "stopped"
    """Stopped through the daemon: never restarted."""
    LOST = "lost"
    """The host is gone and the daemon did not see the agent's end (killed, or it ended
    while the daemon was down)."""
    FAILED = "failed"
    """The restart policy gave up (limit reached, or the host cannot be started)."""
    INCOMPATIBLE = "incompatible"
    """The host speaks a protocol major version the daemon cannot follow."""
    QUEUED = "queued"
    """(1.4) Waiting for a free place under ``--max-agents`` (``--queue``)."""


ENDED_STATUSES: Final = frozenset(
    {AgentStatus.EXITED, AgentStatus.STOPPED, AgentStatus.FAILED, AgentStatus.LOST}
)
"""Statuses of an agent whose run is over (its host may still linger after an exit):
spawning its id again starts it again; it may be forgotten once its host is gone."""


class AgentRequest(PeerModel):
    """A request about one agent."""

    agent_id: StrictStr

    _check_id = field_validator("agent_id")(agent_id_value)


class ForgetRequest(AgentRequest):
    """``daemon.forget``: remove an agent that does not run from the registry."""

    purge: StrictBool = False
    """Also delete the agent's journal (never a live host's)."""


class DaemonStopRequest(AgentRequest):
    """``daemon.stop``: stop the agent's host (``host.stop``) and never restart it."""

    force: bool = Field(default=False, strict=True)
    timeout: float = Field(default=0, ge=0, le=86400, strict=True, allow_inf_nan=False)
    reason: StrictStr = ""


class SwitchRequest(AgentRequest):
    """``daemon.switch`` (1.7): run a structured Claude Code or Codex agent as a terminal
    agent in its CLI's own TUI on the same session (``tui``), or return to the
    structured agent, resuming the session the TUI reported last (``structured``)."""

    to: Literal["tui", "structured"]
    timeout: float = Field(default=30, ge=0, le=86400, strict=True, allow_inf_nan=False)
    """Seconds the host being left has to stop gracefully before SIGKILL."""


class WatchCursor(PeerModel):
    """Where a watcher is in one agent's stream: its last offset in ``epoch``."""

    epoch: StrictStr = ""
    offset: StrictInt = Field(default=0, ge=0)


class WatchRequest(PeerModel):
    """``daemon.watch``: the merged stream of the named agents (all when absent).

    ``since`` maps agent ids to the watcher's position: events after it are replayed
    from the daemon's buffer when the epoch matches, else from the oldest it keeps.
    Agents not in ``since`` replay from the oldest kept too; ``live_only`` skips every
    replay.
    """

    agents: list[StrictStr] | None = None
    since: dict[StrictStr, WatchCursor] = Field(default_factory=dict)
    live_only: bool = Field(default=False, strict=True)


# --- responses -----------------------------------------------------------------------------


class OlderHost(OpenModel):
    """A host that runs an older agenthost than the daemon."""

    agent_id: str
    version: str
    protocol_version: str


class ReconcileReport(OpenModel):
    """What the start-up reconcile found and did."""

    started_at: Timestamp
    seconds: float = 0.0
    """From the start of the scan until every live host was reattached."""
    found: int = 0
    """Hosts directory entries (sockets or lock files) and registry agents examined."""
    reattached: dict[str, int] = Field(default_factory=dict)
    """Agent id -> the offset the daemon attached from (its recorded offset, or 0 for a
    new epoch)."""
    adopted: list[str] = Field(default_factory=list)
    """Live hosts the registry did not know (started with ``serve``), now followed."""
    woken: list[str] = Field(default_factory=list)
    """Live hosts without a socket file, sent SIGUSR1 to re-create it."""
    stale_removed: list[str] = Field(default_factory=list)
    lost: list[str] = Field(default_factory=list)
    unreachable: list[str] = Field(default_factory=list)
    incompatible: list[str] = Field(default_factory=list)
    older: list[OlderHost] = Field(default_factory=list)
    restarting: list[str] = Field(default_factory=list)


class DaemonPingResponse(OpenModel):
    version: str
    protocol_version: str
    min_protocol_version: str = "1.0"
    pid: int
    uptime: str
    uptime_seconds: float = 0.0
    started_at: Timestamp
    agents: int = 0
    host_scope: str = "session"
    """How hosts are started: ``session`` (own session) or ``systemd`` (own scope)."""
    limits: dict[str, Any] | None = None
    """(1.4) ``max_agents``, ``queue``, ``idle_stop`` (seconds), as the daemon was
    started with (null values: no limit)."""
    reconcile: ReconcileReport | None = None


class DaemonAgent(OpenModel):
    """What the daemon knows about one agent (an entry of ``daemon.list``)."""

    agent_id: str
    status: str
    managed: bool = True
    """True when the daemon spawned it; False for a host it found and adopted."""
    state: str = ""
    host_pid: int = 0
    agent_pid: int = 0
    epoch: str = ""
    last_offset: int = 0
    restarts: int = 0
    exit_code: int | None = None
    signal: str | None = None
    ended_at: Timestamp | None = None
    last_error: str | None = None
    session_id: str | None = None
    host_version: str | None = None
    host_protocol_version: str | None = None
    older_version: bool = False
    next_restart_at: Timestamp | None = None
    branch: str | None = None
    """(1.4) The branch of the agent's worktree (``run --worktree``)."""
    worktree: str | None = None
    """(1.4) The path of the agent's worktree, which ``forget`` removes."""
    stop_reason: str | None = None
    """(1.4) Why the daemon stopped it (``idle``: ``--idle-stop``), when it did."""
    queued_at: Timestamp | None = None
    """(1.4) When its spawn was queued (status ``queued``)."""
    tui: bool = False
    """(1.7) The agent runs its CLI's own TUI (``daemon.switch``): ``spec`` is the
    terminal agent's, ``structured_spec`` the one it returns to when the TUI ends."""
    structured_spec: SpawnSpec | None = None
    """(1.7) With ``tui``: the structured agent's spec (without its session)."""
    forked_from: str | None = None
    """The agent it was forked from (``agenthost fork``), when it was."""
    created_at: Timestamp
    updated_at: Timestamp
    spec: SpawnSpec | None = None


class DaemonListResponse(OpenModel):
    agents: list[DaemonAgent]


class SpawnResponse(OpenModel):
    agent_id: str
    host_pid: int
    socket_path: str
    log_path: str
    unit: str | None = None
    """The systemd scope the host runs in, when the daemon runs under systemd."""
    queued: bool = False
    """(1.4) The daemon runs ``--max-agents`` agents and queues (``--queue``): the host
    starts when one ends (``host_pid`` 0 until then)."""


class DaemonStopResponse(StopResponse):
    agent_id: str
    previous_status: str | None = None
    """(1.4) The daemon's status of the agent when the stop came: ``queued`` means it
    was taken out of the queue (it never started), ``restarting`` that its restart was
    called off."""


class ForgetResponse(OpenModel):
    agent_id: str
    forgotten: bool
    """The registry knew the agent (and no longer does)."""
    purged: bool = False
    """Its journal was deleted (``purge``; False when there was none)."""
    worktree: str | None = None
    """(1.4) The agent's worktree (``run --worktree``), when it had one."""
    worktree_removed: bool | None = None
    """(1.4) Whether the worktree was removed (its branch always stays)."""
    worktree_kept_reason: str | None = None
    """(1.4) Why it was kept: uncommitted changes, or git refused."""
    previous_status: str | None = None
    """(1.4) The daemon's status of the agent when it was forgotten (``queued``: it was
    taken out of the queue and never started)."""


class SwitchResponse(OpenModel):
    """``daemon.switch``: the host that now runs the agent (sent once it answers)."""

    agent_id: str
    to: str
    """``tui`` or ``structured``: what runs now."""
    session_id: str | None = None
    """The session the new host resumes."""
    switched: bool = True
    """False when the agent was in that mode already (nothing was done)."""
    host_pid: int = 0
    socket_path: str = ""
    command: list[str] = Field(default_factory=list)
    """The agent's command line in its new host (the TUI's: ``claude --resume ...``)."""


class WatchStart(OpenModel):
    """Where the replay of one agent starts in a ``daemon.watch`` response."""

    epoch: str
    stream_offset: int
    """The last offset the daemon has seen."""
    oldest_offset: int
    """The oldest offset in the daemon's buffer (``stream_offset + 1`` when empty)."""
    from_offset: int
    """Replay starts after this offset."""
    truncated: bool = False
    """Events after the watcher's position are no longer in the daemon's buffer."""


class WatchResponse(OpenModel):
    agents: dict[str, WatchStart]


class Notice(OpenModel):
    """A daemon notice on a watch stream."""

    kind: Literal["notice"] = "notice"
    type: str
    agent_id: str = ""
    timestamp: Timestamp


class ScheduleRemoved(OpenModel):
    name: str
    removed: bool


DAEMON_REQUEST_PAYLOADS: Final[dict[DaemonMessageType, type[BaseModel]]] = {
    DaemonMessageType.PING: EmptyRequest,
    DaemonMessageType.SPAWN: SpawnSpec,
    DaemonMessageType.LIST: EmptyRequest,
    DaemonMessageType.STOP: DaemonStopRequest,
    DaemonMessageType.FORGET: ForgetRequest,
    DaemonMessageType.WATCH: WatchRequest,
    DaemonMessageType.UNWATCH: EmptyRequest,
    DaemonMessageType.SWITCH: SwitchRequest,
    DaemonMessageType.RUN: RunRequest,
    DaemonMessageType.RUNS: RunsRequest,
    DaemonMessageType.SCHEDULE_ADD: ScheduleSpec,
    DaemonMessageType.SCHEDULE_LIST: EmptyRequest,
    DaemonMessageType.SCHEDULE_RM: ScheduleRequest,
    DaemonMessageType.SCHEDULE_RUN: ScheduleRequest,
}

DAEMON_RESPONSE_PAYLOADS: Final[dict[DaemonMessageType, type[BaseModel] | None]] = {
    DaemonMessageType.PING: DaemonPingResponse,
    DaemonMessageType.SPAWN: SpawnResponse,
    DaemonMessageType.LIST: DaemonListResponse,
    DaemonMessageType.STOP: DaemonStopResponse,
    DaemonMessageType.FORGET: ForgetResponse,
    DaemonMessageType.WATCH: WatchResponse,
    DaemonMessageType.UNWATCH: None,
    DaemonMessageType.SWITCH: SwitchResponse,
    DaemonMessageType.RUN: RunResponse,
    DaemonMessageType.RUNS: RunsResponse,
    DaemonMessageType.SCHEDULE_ADD: ScheduleInfo,
    DaemonMessageType.SCHEDULE_LIST: ScheduleListResponse,
    DaemonMessageType.SCHEDULE_RM: ScheduleRemoved,
    DaemonMessageType.SCHEDULE_RUN: RunResponse,
}

DaemonFrame = Response | StreamEvent | Notice
"""What a client of the daemon receives."""

DAEMON_MESSAGES: Final[MessageTable[DaemonMessageType, DaemonFrame]] = MessageTable(
    service="daemon",
    peer="the daemon",
    version=DAEMON_PROTOCOL_VERSION,
    types=DaemonMessageType,
    requests=DAEMON_REQUEST_PAYLOADS,
    responses=DAEMON_RESPONSE_PAYLOADS,
    frames={"response": Response, "event": StreamEvent, "notice": Notice},
    logger="agenthost.daemon.protocol",
    values={
        "event_type": EventType,
        "agent_state": AgentState,
        "notice_type": NoticeType,
        "agent_status": AgentStatus,
    },
)
"""The daemon's messages: its requests, their payloads and responses, and the frames of
its clients (responses, the hosts' events, its notices)."""


def validate_daemon_payload(request: Request) -> tuple[DaemonMessageType, BaseModel]:
    """The request's daemon message type and its validated payload.

    Raise :class:`~agenthost.protocol.RequestError` (``unknown_type`` or
    ``invalid_payload``), like :func:`agenthost.protocol.validate_payload` for hosts.
    """
    return DAEMON_MESSAGES.validate(request)


def encode_notice(ntype: NoticeType, agent_id: str, **fields: Any) -> bytes:
    """A notice frame (with its newline); ``None`` fields are left out."""
    obj: dict[str, Any] = {
        "kind": "notice",
        "type": str(ntype),
        "agent_id": agent_id,
        "timestamp": now_rfc3339(),
    }
    obj.update((k, v) for k, v in fields.items() if v is not None)
    return dump_line(obj)


def decode_daemon_frame(frame: bytes) -> DaemonFrame:
    """Decode a frame the daemon sent: a response, a host event or a notice.

    As liberal as the hosts' decoder (:meth:`~agenthost.wire.table.MessageTable.decode_frame`:
    escaped lone surrogates, a host event of protocol 1.0), except that a ``kind`` this
    version does not know is an error here; a client that should skip those uses
    ``DAEMON_MESSAGES.decode_frame``, which gives None for them.
    """
    message = DAEMON_MESSAGES.decode_frame(frame)
    if message is None:
        raise ProtocolError("malformed frame from the daemon: a frame of an unknown kind")
    return message
