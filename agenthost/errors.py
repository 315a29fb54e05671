"""The one exception tree of agenthost.

Every error agenthost raises derives from :class:`AgentHostError`. Errors that cross
the wire carry a stable ``code`` (see :class:`ErrorCode`); a client turns an error
response back into the matching class with :func:`error_from_code`, so a script can
``except AgentNotRunning`` whether the error was detected locally or by the host.

OS errors are translated where they happen (``raise HostNotFound(...) from exc``);
nothing above the transport layer catches :class:`OSError`.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable error codes of the wire protocol (``code`` in an error response)."""

    BAD_REQUEST = "bad_request"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_PAYLOAD = "invalid_payload"
    FRAME_TOO_LARGE = "frame_too_large"
    VERSION_UNSUPPORTED = "version_unsupported"
    AGENT_NOT_RUNNING = "agent_not_running"
    FORBIDDEN = "forbidden"
    BUSY = "busy"
    INTERNAL = "internal"
    UNKNOWN_REQUEST = "unknown_request"  # 1.1: host.respond to no pending request
    BUDGET_EXCEEDED = "budget_exceeded"  # 1.4: a send to an agent over its budget
    LIMIT_REACHED = "limit_reached"  # 1.4: a daemon at --max-agents refuses a spawn
    CANNOT_START = "cannot_start"  # 1.4: the agent's program is missing (daemon.spawn)
    WORKTREE_FAILED = "worktree_failed"  # 1.4: git or the setup refused a worktree


class AgentHostError(Exception):
    """Root of every error raised by agenthost.

    ``hint`` is an optional sentence telling the user what to do next.
    """

    code: ErrorCode = ErrorCode.INTERNAL
    remote: bool = False
    """True when the error came from a host's error response (``code`` is then the
    wire code it sent); False when it was detected on this side."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


# --- local configuration and usage -------------------------------------------------


class ConfigError(AgentHostError):
    """Invalid local input: an agent id, a path, a command line option."""

    code = ErrorCode.INVALID_PAYLOAD


class InvalidAgentId(ConfigError):
    """An agent id that is empty, too long, or could escape the hosts directory."""


class UntrustedFile(ConfigError):
    """A file of the home that decides something (config.toml, a token store, a key,
    a database, a lock) and is not the user's own to trust: owned by another uid,
    writable by its group or others (a secret: readable by them), a symbolic link, or
    not a regular file. The message names the file, what is wrong and how to fix it;
    nothing of the file is used."""


class AgentCannotStart(ConfigError):
    """(1.4) The agent's program cannot be started: it is not installed (not on the
    PATH searched, or where an ``AGENTHOST_*_BIN`` variable says), not executable, or
    its working directory is gone. The message says what is missing and how to install
    it (hints do not cross the wire). Refused before anything starts when it can be
    seen then (``serve``, ``run``, a daemon's spawn or restart); a host whose agent
    could not be spawned all the same is a failed start too."""

    code = ErrorCode.CANNOT_START


class SandboxError(AgentHostError):
    """An agent cannot be confined as asked: the machine cannot give the sandbox (no
    bubblewrap, user namespaces disabled), or its settings are wrong. The message says
    what is missing and how to fix it; nothing runs unconfined instead."""

    code = ErrorCode.CANNOT_START


class SandboxUnavailable(AgentCannotStart, SandboxError):
    """(1.6) ``--sandbox`` asked for a confinement this machine cannot give: no
    bubblewrap, user namespaces turned off (the message names the sysctl), no
    libseccomp, or a profile that is not built here. Refused before anything starts;
    an agent never runs unconfined by surprise. The message says what is missing."""


class WorktreeError(ConfigError):
    """(1.4) The daemon could not give an agent its worktree (``run --worktree``): the
    branch is checked out elsewhere, the path is taken, git refused, or the setup
    command failed. The message says what git (or the setup) said."""

    code = ErrorCode.WORKTREE_FAILED


class ForkRefused(ConfigError):
    """``agenthost fork``: this agent cannot be forked (its kind has no fork, it has no
    session yet, or ``--at`` names no point of its conversation)."""


class HostAlreadyRunning(AgentHostError):
    """``serve`` for an agent whose host is alive (its lock is held)."""

    code = ErrorCode.BUSY


class InvalidAllowEntry(SandboxError, ConfigError):
    """An entry of a sandbox's network allow list (``sandbox.allow_hosts``) that is not
    a host name, a ``*.domain``, or an IP literal, with an optional ``:port`` or ``:*``;
    the message names the entry and what is wrong with it."""

    code = ErrorCode.INVALID_PAYLOAD


# --- talking to a host --------------------------------------------------------------


class HostNotFound(AgentHostError):
    """No host answers for this agent (no socket, or nobody listening on it)."""

    code = ErrorCode.AGENT_NOT_RUNNING


class NotConnected(AgentHostError):
    """The client is not connected, or the connection was lost."""

    code = ErrorCode.INTERNAL


class RequestTimeout(AgentHostError):
    """The host did not answer within the request timeout."""

    code = ErrorCode.INTERNAL


class ProtocolError(AgentHostError):
    """A frame or a request that breaks the protocol (malformed, wrong shape, too big).

    Raised by the sans-IO protocol layer on bad input and by the client on an error
    response carrying one of the protocol codes.
    """

    code = ErrorCode.BAD_REQUEST

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        if code is not None:
            self.code = code


class UnknownType(ProtocolError):
    """A request whose ``type`` the host does not know."""

    code = ErrorCode.UNKNOWN_TYPE


class InvalidPayload(ProtocolError):
    """A request payload of the wrong shape, type or range."""

    code = ErrorCode.INVALID_PAYLOAD


class FrameTooLarge(ProtocolError):
    """A frame longer than the frame limit."""

    code = ErrorCode.FRAME_TOO_LARGE


class VersionUnsupported(ProtocolError):
    """The peer speaks a protocol major version we cannot serve."""

    code = ErrorCode.VERSION_UNSUPPORTED


class AgentNotRunning(AgentHostError):
    """The operation needs a running agent process and there is none."""

    code = ErrorCode.AGENT_NOT_RUNNING


class Forbidden(AgentHostError):
    """The peer is not allowed to talk to this host (another uid)."""

    code = ErrorCode.FORBIDDEN


def foreign_server(service: str, path: object, pid: int, uid: int, own_uid: int) -> Forbidden:
    """What a client says of a ``service`` socket at ``path`` served by another user
    (``uid``, process ``pid``) before it sends anything (every client of ours)."""
    return Forbidden(
        f"the {service} socket {path} is served by uid {uid} (pid {pid}), not by this "
        f"user (uid {own_uid}): refusing to talk to it",
        hint="another user can write to that home; use a --home only you can write to",
    )


class Busy(AgentHostError):
    """The host cannot take this now (e.g. the agent's stdin queue is full)."""

    code = ErrorCode.BUSY


class UnknownRequest(AgentHostError):
    """``host.respond`` names no pending permission request (answered, withdrawn, or
    never asked); a ``daemon.schedule.*`` request names no schedule."""

    code = ErrorCode.UNKNOWN_REQUEST


class BudgetExceeded(AgentHostError):
    """(1.4) The agent spent its budget (``--budget-usd``, ``--budget-tokens``): the
    host interrupted it and refuses sends until the budget is raised
    (``agenthost budget ID --usd X``)."""

    code = ErrorCode.BUDGET_EXCEEDED


class LimitReached(AgentHostError):
    """(1.4) The daemon runs as many agents as it may (``--max-agents``) and does not
    queue: the spawn is refused."""

    code = ErrorCode.LIMIT_REACHED


class ResourceLimitUnsupported(ConfigError):
    """(1.4) A memory or CPU limit was asked for where the daemon cannot enforce one
    (no systemd user manager, no delegated cgroup v2 subtree with the controller); the
    message says what is missing. Never ignored silently."""


class LinkRefused(Forbidden):
    """An approval link that is not honoured; ``why`` says which check failed:
    ``malformed``, ``forged``, ``expired``, ``used`` (followed before), ``answered``
    (the request was answered another way first) or ``gone`` (the agent or its request
    is no longer there)."""

    def __init__(self, message: str, *, why: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.why = why


class HookRefused(AgentHostError):
    """A webhook delivery refused (``POST /hooks/NAME``): ``status`` is the HTTP
    status of the answer (401 no or a forged signature, 404 no such hook, 413 too
    large, 400 not a JSON object, 422 a field the template names is missing) and
    ``reason`` its stable code. Never crosses the host protocol."""

    code = ErrorCode.FORBIDDEN

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class InternalError(AgentHostError):
    """A bug or an unexpected condition in the host."""

    code = ErrorCode.INTERNAL


class RemoteError(NotConnected):
    """A remote machine (``--remote``) could not be reached: ``ssh`` failed (the
    machine, the network, the keys) or ``agenthost`` does not run there. The message
    names the remote and what failed."""


class RemoteUnusable(RemoteError):
    """A remote that will fail the same way on every attempt: ``agenthost`` is not
    installed there (or too old), or ``ssh`` cannot be run here. Unlike a dropped
    link, not worth retrying."""


# --- the daemon ---------------------------------------------------------------------


class DaemonNotRunning(HostNotFound):
    """No daemon answers on ``<home>/daemon.sock``."""


class DaemonAlreadyRunning(HostAlreadyRunning):
    """``agenthost daemon`` for a home whose daemon lock another daemon holds."""


class DaemonStartError(AgentHostError):
    """A daemon started in the background exited or did not get ready; the message
    ends with the end of its log."""


class RegistryError(AgentHostError):
    """The daemon's registry (``<home>/daemon.db``) cannot be opened, read or written."""

    code = ErrorCode.INTERNAL


class FactoryError(AgentHostError):
    """The host factory is gone, or sent or was sent a message that is not one of
    its own (the daemon then starts hosts by exec)."""

    code = ErrorCode.INTERNAL


_BY_CODE: dict[ErrorCode, type[AgentHostError]] = {
    ErrorCode.BAD_REQUEST: ProtocolError,
    ErrorCode.UNKNOWN_TYPE: UnknownType,
    ErrorCode.INVALID_PAYLOAD: InvalidPayload,
    ErrorCode.FRAME_TOO_LARGE: FrameTooLarge,
    ErrorCode.VERSION_UNSUPPORTED: VersionUnsupported,
    ErrorCode.AGENT_NOT_RUNNING: AgentNotRunning,
    ErrorCode.FORBIDDEN: Forbidden,
    ErrorCode.BUSY: Busy,
    ErrorCode.INTERNAL: InternalError,
    ErrorCode.UNKNOWN_REQUEST: UnknownRequest,
    ErrorCode.BUDGET_EXCEEDED: BudgetExceeded,
    ErrorCode.LIMIT_REACHED: LimitReached,
    ErrorCode.CANNOT_START: AgentCannotStart,
    ErrorCode.WORKTREE_FAILED: WorktreeError,
}


def error_from_code(code: str | None, message: str) -> AgentHostError:
    """Build the exception matching a wire error ``code`` (unknown codes: InternalError)."""
    try:
        key = ErrorCode(code) if code is not None else ErrorCode.INTERNAL
    except ValueError:
        unknown = InternalError(f"{message} (code {code!r})")
        unknown.remote = True
        return unknown
    cls = _BY_CODE[key]
    error = cls(message, code=key) if issubclass(cls, ProtocolError) else cls(message)
    error.remote = True
    return error
