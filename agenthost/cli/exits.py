"""The exit statuses of the ``agenthost`` command, and how an error is reported.

Shared by the click commands (:func:`agenthost.cli.common.fail`) and the fast path
(:mod:`agenthost.cli.fast`): neither click nor pydantic is imported here.
"""

from __future__ import annotations

from enum import IntEnum

from agenthost.errors import (
    AgentCannotStart,
    AgentHostError,
    AgentNotRunning,
    BudgetExceeded,
    Busy,
    ConfigError,
    Forbidden,
    HostAlreadyRunning,
    HostNotFound,
    LimitReached,
    NotConnected,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    UnknownRequest,
    WorktreeError,
)


class Exit(IntEnum):
    """Exit statuses of the ``agenthost`` command (stable, documented in docs/cli.md)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NO_HOST = 3
    AGENT_NOT_RUNNING = 4
    PROTOCOL = 5
    BUSY = 6
    FORBIDDEN = 7
    TIMEOUT = 8
    UNKNOWN_REQUEST = 9
    AGENT_FAILED = 10
    """attach/wait: the agent ended in state ``error``."""
    REMOTE = 11
    """``--remote``: the machine could not be reached (ssh failed) or has no agenthost."""
    OVER_BUDGET = 12
    """The agent is over its budget: the send was refused (``agenthost budget``)."""
    CANNOT_START = 13
    """``serve``, ``run``: the agent's program is not installed (not on PATH), not
    executable, or could not be spawned; nothing runs."""
    WORKTREE = 14
    """``run --worktree``: the daemon could not make the agent's worktree (a branch
    checked out elsewhere, git refused, the setup failed); nothing runs."""


def exit_code_for(exc: AgentHostError) -> Exit:
    """The exit status for an error (most specific class first)."""
    for cls, code in (
        (AgentCannotStart, Exit.CANNOT_START),
        (WorktreeError, Exit.WORKTREE),
        (UnknownRequest, Exit.UNKNOWN_REQUEST),
        (BudgetExceeded, Exit.OVER_BUDGET),
        (LimitReached, Exit.BUSY),
        (RemoteError, Exit.REMOTE),
        (HostNotFound, Exit.NO_HOST),
        (NotConnected, Exit.NO_HOST),
        (AgentNotRunning, Exit.AGENT_NOT_RUNNING),
        (HostAlreadyRunning, Exit.BUSY),
        (Busy, Exit.BUSY),
        (Forbidden, Exit.FORBIDDEN),
        (RequestTimeout, Exit.TIMEOUT),
        (ConfigError, Exit.USAGE),
        (ProtocolError, Exit.PROTOCOL),
    ):
        if isinstance(exc, cls):
            return code
    return Exit.ERROR


def error_report(exc: AgentHostError, hint: str | None, *, as_json: bool) -> tuple[str, bool]:
    """The text that reports ``exc`` (with ``hint``), and whether it goes to stderr.

    With ``--json`` the error is a JSON object on stdout: ``reason`` names the exit
    status (``no_host``, ``timeout``, ...); ``code`` is the host's wire error code,
    present only when the host itself refused the request.
    """
    code = exit_code_for(exc)
    if as_json:
        from agenthost.cli.views import json_text

        body: dict[str, object] = {
            "ok": False,
            "error": exc.message,
            "reason": code.name.lower(),
            "exit_code": int(code),
        }
        if exc.remote:
            body["code"] = str(exc.code)
        if hint:
            body["hint"] = hint
        return json_text(body), False
    from agenthost.textsafe import LINES, escape

    # a host's or a remote's words may quote an agent's (e.g. its answer options)
    lines = [f"agenthost: error: {escape(exc.message, LINES)}"]
    if hint:
        lines.append(f"agenthost: hint: {escape(hint, LINES)}")
    return "\n".join(lines), True
