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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agenthost.errors import ConfigError

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


def _port(text: str, raw: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"invalid port in remote {raw!r}", hint="a port is 1-65535")
    return int(text)
