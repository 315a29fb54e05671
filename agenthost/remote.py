"""Where a remote machine is: :class:`Remote`, parsed from ``[USER@]HOST[:PORT]``.

Clients reach agents on other machines through the user's own ``ssh`` (no listening
port of ours): ``ssh -o BatchMode=yes [-p PORT] [USER@]HOST agenthost bridge ...``
joins the remote command's stdio to a host's (or the daemon's) socket there, and the
protocol is the same bytes end to end (``docs/remote.md``). This module is the part
without I/O: the value a ``--remote`` option and ``remote=`` arguments take, and the
command line that reaches it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agenthost.errors import (
    AgentHostError,
    ConfigError,
    Forbidden,
    HostNotFound,
    RemoteError,
    RemoteUnusable,
)

SSH_ENV: Final = "AGENTHOST_SSH"
"""Overrides the ``ssh`` program (a path, or a command with arguments)."""
REMOTE_COMMAND_ENV: Final = "AGENTHOST_REMOTE_COMMAND"
"""Overrides how ``agenthost`` is run on the remote (default ``agenthost``: found on
the remote's PATH), e.g. ``~/.local/bin/agenthost`` or ``env AGENTHOST_HOME=/srv/a
agenthost``. Words are passed to the remote shell as they are."""

_USER_RE: Final = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$")
_HOST_RE: Final = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?$")
_IPV6_RE: Final = re.compile(r"^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*$")
_FORM: Final = "give [USER@]HOST[:PORT]"


@dataclass(frozen=True, slots=True)
class Remote:
    """A machine reached over SSH: ``host``, with an optional ``user`` and ``port``.

    ``host`` may be a name of the user's ``~/.ssh/config`` (its settings apply), a DNS
    name or an address (IPv6 in brackets: ``[::1]:2222``).
    """

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        """The remote as written: ``user@host:port`` (what the ``machine`` column shows)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = f"{self.user}@{host}" if self.user else host
        return f"{text}:{self.port}" if self.port is not None else text

    @property
    def destination(self) -> str:
        """The ``[user@]host`` argument of ``ssh``."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def ssh_argv(
        self, remote_args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> list[str]:
        """The command line that runs ``agenthost *remote_args`` on the remote.

        ``ssh`` (or ``$AGENTHOST_SSH``) with ``-o BatchMode=yes`` (never a password
        prompt: keys or an agent only), ``-p PORT`` when given, ``--`` before the
        destination, and the remote command as one shell-quoted string (the remote's
        shell splits it); ``$AGENTHOST_REMOTE_COMMAND`` replaces ``agenthost``.
        """
        env = os.environ if env is None else env
        ssh = shlex.split(env.get(SSH_ENV, "").strip() or "ssh")
        program = env.get(REMOTE_COMMAND_ENV, "").strip() or "agenthost"
        argv = [*ssh, "-o", "BatchMode=yes", "-e", "none", "-T"]
        if self.port is not None:
            argv += ["-p", str(self.port)]
        command = " ".join([program, *(shlex.quote(a) for a in remote_args)])
        return [*argv, "--", self.destination, command]


def parse_remote(text: str) -> Remote:
    """``[USER@]HOST[:PORT]`` as a :class:`Remote`; raise ConfigError for anything else
    (an empty part, a port outside 1-65535, characters no host name has, an option
    in disguise such as ``-oProxyCommand=...``)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("empty remote", hint=_FORM)
    raw = text.strip()
    user: str | None = None
    rest = raw
    if "@" in raw:
        user, _, rest = raw.rpartition("@")
        if not _USER_RE.fullmatch(user):
            raise ConfigError(f"invalid user in remote {raw!r}", hint=_FORM)
    port: int | None = None
    if rest.startswith("["):  # an IPv6 address: [::1] or [::1]:2222
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or not _IPV6_RE.fullmatch(host) or (tail and not tail.startswith(":")):
            raise ConfigError(f"invalid host in remote {raw!r}", hint=_FORM)
        if tail:
            port = _port(tail[1:], raw)
    else:
        host, colon, port_text = rest.partition(":")
        if colon:
            port = _port(port_text, raw)
        if not _HOST_RE.fullmatch(host):
            raise ConfigError(f"invalid host in remote {raw!r}", hint=_FORM)
    return Remote(host=host, user=user, port=port)


def as_remote(value: Remote | str | None) -> Remote | None:
    """A ``remote=`` argument as a :class:`Remote` (a string is parsed: ConfigError for
    garbage); None stays None."""
    if value is None or isinstance(value, Remote):
        return value
    return parse_remote(value)


def _port(text: str, raw: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"invalid port in remote {raw!r}", hint="a port is 1-65535")
    return int(text)


# --- why a connection over ssh ended (pure: the exit status and stderr in, an error out)

SSH_FAILED: Final = 255
"""The exit status of ``ssh`` itself failing (no route, refused, auth, host key)."""
NOT_FOUND_STATUSES: Final = frozenset({126, 127})
"""What a POSIX shell exits with for a command it cannot find (127) or run (126)."""
NO_HOST_STATUS: Final = 3
"""``agenthost``'s exit status when no host (or no daemon) answers (``Exit.NO_HOST``)."""
FORBIDDEN_STATUS: Final = 7
"""``agenthost``'s exit status for a socket served by another user (``Exit.FORBIDDEN``)."""
STDERR_KEPT: Final = 16 << 10
"""Bytes of an ssh process's stderr kept for its error message (the tail)."""
_LINE_MAX: Final = 300
_CONTROL_RE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ERROR_PREFIX: Final = "agenthost: error: "
_HINT_PREFIX: Final = "agenthost: hint: "


@dataclass(frozen=True, slots=True)
class RemoteStderr:
    """What a remote command said on stderr, read for an error message: ``error`` (the
    last ``agenthost: error:`` line, else the last line), ``hint`` (the last
    ``agenthost: hint:`` line) and ``text`` (every line, cleaned)."""

    error: str
    hint: str | None
    text: str


def read_stderr(raw: bytes) -> RemoteStderr:
    """The lines of a (possibly cut, possibly garbled) stderr, without control
    characters and each at most a few hundred characters."""
    text = raw[-STDERR_KEPT:].decode("utf-8", "replace")
    lines = [
        _CONTROL_RE.sub("", line).strip()[:_LINE_MAX]
        for line in text.replace("\r", "\n").split("\n")
    ]
    lines = [line for line in lines if line]
    errors = [line[len(_ERROR_PREFIX) :] for line in lines if line.startswith(_ERROR_PREFIX)]
    hints = [line[len(_HINT_PREFIX) :] for line in lines if line.startswith(_HINT_PREFIX)]
    error = errors[-1] if errors else (lines[-1] if lines else "")
    return RemoteStderr(error=error, hint=hints[-1] if hints else None, text="\n".join(lines))


def not_installed(remote: Remote, detail: str = "") -> RemoteError:
    """The error for a remote without ``agenthost`` (where $AGENTHOST_REMOTE_COMMAND
    points)."""
    return RemoteUnusable(
        f"agenthost is not installed on {remote} (or not on its PATH; set {REMOTE_COMMAND_ENV})",
        hint=f"the remote said: {detail}" if detail else None,
    )


def cannot_run(remote: Remote, program: str, why: str) -> RemoteError:
    """The error for an ssh program that cannot be started here."""
    return RemoteUnusable(
        f"cannot run {program!r} to reach {remote}: {why}",
        hint=f"install OpenSSH's client, or set {SSH_ENV}",
    )


def for_good(error: AgentHostError) -> bool:
    """Whether ``error`` will be the same on another attempt: agenthost missing (or too
    old) on the remote, or ssh not runnable here; unlike a dropped link, not worth
    retrying."""
    return isinstance(error, RemoteUnusable)


def _ssh_hint(remote: Remote, text: str) -> str:
    if "Host key verification failed" in text:
        port = f"-p {remote.port} " if remote.port is not None else ""
        return f"its host key is not known here: connect once with `ssh {port}{remote.destination}`"
    if "Permission denied" in text:
        return (
            "it refused every key offered (no password is ever asked): add your public key "
            "to its ~/.ssh/authorized_keys, or load the key into an ssh-agent"
        )
    return (
        "check that `ssh` reaches it without a password (BatchMode: keys or an agent), "
        f"or set {SSH_ENV}"
    )


def exit_error(
    remote: Remote,
    status: int | None,
    stderr: bytes,
    *,
    target: str,
    not_found: Callable[..., AgentHostError] = HostNotFound,
) -> AgentHostError | None:
    """What the exit of ``ssh ... agenthost ...`` says about a connection that ended.

    ``status`` is ssh's exit status (None: still running; negative: killed by that
    signal); ``target`` names what was asked for (``"agent 'a1'"``, ``"the daemon"``);
    ``not_found`` makes the error for the remote's "no host answers" exit (e.g.
    DaemonNotRunning). Return None when the exit says nothing (still running, status 0,
    killed by a signal): the connection was simply lost.
    """
    if status is None or status <= 0:
        return None
    said = read_stderr(stderr)
    if status == SSH_FAILED:
        return RemoteError(
            f"ssh to {remote} failed: {said.error or 'no message (exit status 255)'}",
            hint=_ssh_hint(remote, said.text),
        )
    if status in NOT_FOUND_STATUSES or "command not found" in said.text:
        return not_installed(remote, said.error)
    if status == NO_HOST_STATUS:
        return not_found(
            f"no host answers for {target} on {remote}: {said.error}"
            if said.error
            else f"no host answers for {target} on {remote}",
            hint=said.hint,
        )
    if status == FORBIDDEN_STATUS:
        return Forbidden(f"{remote}: {said.error}", hint=said.hint)
    if "No such command 'bridge'" in said.text:
        return RemoteUnusable(
            f"the agenthost on {remote} has no `bridge` command",
            hint="upgrade agenthost there (--remote needs the same version on both sides)",
        )
    return RemoteError(
        f"agenthost on {remote} failed (exit status {status}): {said.error or 'no message'}",
        hint=said.hint,
    )
