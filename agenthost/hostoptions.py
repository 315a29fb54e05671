"""The options a host is started with: one object for every way a host starts.

``agenthost serve`` builds a :class:`HostOptions` from its command line; the foreground
host turns it into its ``HostConfig``, while ``serve --detach`` and the daemon's spawner
turn it back into a command line with :meth:`HostOptions.to_argv` (and the agent's
environment into the host's with :meth:`HostOptions.to_env`). The defaults here are the
``serve`` defaults. A round trip (options, argv, ``serve``'s parser, options) is tested,
so the three paths cannot drift apart.

Neutral ground: the daemon imports this module, so it imports nothing of ``host/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agenthost.agentenv import pack
from agenthost.agents import DEFAULT_AGENT
from agenthost.journal.writer import JournalConfig
from agenthost.pyargv import module_argv
from agenthost.terminal.sizes import format_size

DEFAULT_JOURNAL: Final = JournalConfig()


@dataclass(frozen=True)
class HostOptions:
    """What ``agenthost serve`` takes, parsed. Sizes are bytes, times seconds.

    ``env`` (the agent's extra environment) never goes on the host's command line,
    which any user can read: it travels in the host's environment (:meth:`to_env`).
    """

    agent_id: str
    home: Path
    agent: str = DEFAULT_AGENT
    """The adapter kind (``demo``, ``lines``, ``claude``, ``codex``)."""
    command: tuple[str, ...] = ()
    cwd: Path | None = None
    """The agent's working directory; the host's own when None."""
    env: Mapping[str, str] = field(default_factory=dict)
    project: str = ""
    task: str | None = None
    description: str | None = None
    agent_opts: Mapping[str, str] = field(default_factory=dict)
    """Settings of the agent's adapter (``--agent-opt KEY=VALUE``)."""
    resume: str | None = None
    fork: str | None = None
    """(``--fork``) Start on a copy of this session (``agenthost fork``)."""
    fork_at: str | None = None
    """(``--fork-at``) With ``fork``: the point the copy ends at, in the agent's name."""
    forked_from: str | None = None
    """(``--forked-from``) The agent it was forked from, for its status (restarts too)."""
    linger: float = 600.0
    stop_timeout: float = 10.0
    ring_size: int = 1000
    ring_bytes: int = 16 << 20
    client_buffer: int = 16 << 20
    journal: JournalConfig | None = DEFAULT_JOURNAL
    """None: no journal (``--no-journal``)."""
    log_level: str = "info"
    budget_usd: float | None = None
    """(``--budget-usd``) Interrupt the agent, and refuse sends, once its turns
    reported this much cost; None: no limit."""
    budget_tokens: int | None = None
    """(``--budget-tokens``) The same for the tokens its turns reported."""
    sandbox: str | None = None
    """(``--sandbox``) The agent's sandbox profile (``strict``, ``net``, ``none``,
    ``off``); None: as the home's ``[sandbox]`` says (off by default)."""
    size: tuple[int, int] | None = None
    """(``--size COLSxROWS``) A terminal agent's fixed size; None: its clients'."""

    def to_argv(self) -> list[str]:
        """The arguments of ``agenthost serve`` that give these options back.

        Options at their default are left out (a short ``ps`` line); ``--agent`` is
        always there, to tell hosts apart at a glance. The command comes after ``--``.
        """
        args = ["--agent-id", self.agent_id, "--home", str(self.home), "--agent", self.agent]
        if self.cwd is not None:
            args += ["--cwd", str(self.cwd)]
        if self.project:
            args += ["--project", self.project]
        for flag, text in (
            ("--task", self.task),
            ("--description", self.description),
            ("--resume", self.resume),
            ("--fork", self.fork),
            ("--fork-at", self.fork_at),
            ("--forked-from", self.forked_from),
        ):
            if text is not None:
                args += [flag, text]
        for key, value in sorted(self.agent_opts.items()):
            args += ["--agent-opt", f"{key}={value}"]
        if self.budget_usd is not None:
            args += ["--budget-usd", repr(self.budget_usd)]
        if self.budget_tokens is not None:
            args += ["--budget-tokens", str(self.budget_tokens)]
        if self.sandbox is not None:
            args += ["--sandbox", self.sandbox]
        if self.size is not None:
            args += ["--size", format_size(self.size)]
        defaults = DEFAULTS
        for flag, number, default in (
            ("--linger", self.linger, defaults.linger),
            ("--stop-timeout", self.stop_timeout, defaults.stop_timeout),
            ("--ring-size", self.ring_size, defaults.ring_size),
            ("--ring-bytes", self.ring_bytes, defaults.ring_bytes),
            ("--client-buffer", self.client_buffer, defaults.client_buffer),
        ):
            if number != default:
                args += [flag, repr(number)]
        args += _journal_args(self.journal)
        if self.log_level != defaults.log_level:
            args += ["--log-level", self.log_level]
        return [*args, "--", *self.command]

    def to_env(self) -> dict[str, str]:
        """What to add to the host's environment so that it hands ``env`` to its agent."""
        return pack(self.env)

    def command_line(self) -> list[str]:
        """The whole command that starts this host with this Python."""
        return module_argv("agenthost", "serve", *self.to_argv())


DEFAULTS: Final = HostOptions(agent_id="", home=Path())
"""The defaults of every option (``serve --help`` shows them)."""


def _journal_args(journal: JournalConfig | None) -> list[str]:
    if journal is None:
        return ["--no-journal"]
    args = []
    if journal.sync != DEFAULT_JOURNAL.sync:
        args += ["--journal-sync", journal.sync.value]
    for flag, number, default in (
        ("--journal-sync-interval", journal.sync_interval, DEFAULT_JOURNAL.sync_interval),
        ("--journal-max-bytes", journal.max_bytes, DEFAULT_JOURNAL.max_bytes),
        ("--journal-max-age", journal.max_age, DEFAULT_JOURNAL.max_age),
        ("--journal-segment-bytes", journal.segment_bytes, DEFAULT_JOURNAL.segment_bytes),
    ):
        if number != default:
            args += [flag, repr(number)]
    return args
