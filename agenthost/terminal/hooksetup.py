"""Set up a terminal agent's CLI to tell the host its state, for that agent only. Sans-IO.

Claude Code gets its hooks in ``--settings JSON`` (settings for this process, merged
over the user's own files, which are never written); Codex gets ``-c notify=[...]``
(a config override for this process). Both run ``python -P -m agenthost.terminal.hook
KIND``, which finds the host's hook socket and this run's token in the environment
(``AGENTHOST_HOOK_SOCKET``, ``AGENTHOST_HOOK_TOKEN``).

``-P`` keeps the agent's working directory off ``sys.path``: the hook runs in the
agent's worktree, where a file named ``agenthost/`` or ``json.py`` must not be imported.

Codex's own hooks (0.169.0 has them) are not used: the TUI asks a person to review and
trust every new hook at start-up (CODEX_FINDINGS.md), which only the user's own files
can pre-approve.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence

from agenthost.errors import ConfigError
from agenthost.terminal.hookevents import CLAUDE_ORDER

SOCKET_ENV = "AGENTHOST_HOOK_SOCKET"
TOKEN_ENV = "AGENTHOST_HOOK_TOKEN"

PROGRAMS = ("claude", "codex", "none")
"""The values of the pty adapter's ``--agent-opt hooks=...``."""

PERMISSION_TIMEOUT = 86400
"""Seconds Claude Code lets the PermissionRequest hook wait for the host (its default is
600 s; then it kills the hook and its own dialog stays, which is harmless, but a phone
answer after that would be lost). The TUI shows its dialog meanwhile: a person at the
terminal answers it there."""

QUICK_TIMEOUT = 10
"""Seconds for the hooks that only report (the host answers them at once)."""

CLAUDE_HOOKS: tuple[str, ...] = tuple(kind for kind in CLAUDE_ORDER if kind != "StatusLine")
"""The Claude Code hook events the settings install (the status line is not a hook)."""


def detect_program(argv: Sequence[str], forced: str | None = None) -> str:
    """``claude``, ``codex`` or ``none``: ``forced`` (the ``hooks`` option) when given,
    else from the basename of ``argv[0]``."""
    if forced is not None:
        if forced not in PROGRAMS:
            raise ConfigError(
                f"unknown hooks setting {forced!r}", hint="hooks=claude, hooks=codex or hooks=none"
            )
        return forced
    if not argv:
        return "none"
    name = os.path.basename(argv[0])
    return name if name in ("claude", "codex") else "none"


def hook_command(python: Sequence[str], kind: str) -> list[str]:
    """The argv of the hook command for ``kind``."""
    return [*python, "-P", "-m", "agenthost.terminal.hook", kind]


def claude_settings(python: Sequence[str], *, statusline: bool = False) -> dict[str, object]:
    """The ``--settings`` object: one command hook per event we listen to. With
    ``statusline``, the status line command too (it reports the session's cost, but it
    replaces the user's own status line, which then shows nothing)."""
    hooks: dict[str, object] = {}
    for kind in CLAUDE_HOOKS:
        timeout = PERMISSION_TIMEOUT if kind == "PermissionRequest" else QUICK_TIMEOUT
        command = shlex.join(hook_command(python, kind))
        hooks[kind] = [{"hooks": [{"type": "command", "command": command, "timeout": timeout}]}]
    settings: dict[str, object] = {"hooks": hooks}
    if statusline:
        command = shlex.join(hook_command(python, "StatusLine"))
        settings["statusLine"] = {"type": "command", "command": command}
    return settings


def _toml_array(words: Sequence[str]) -> str:
    # a JSON string is a TOML basic string (the same escapes, \uXXXX included)
    return "[" + ",".join(json.dumps(word) for word in words) + "]"


def hook_setup(
    program: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    socket_path: str,
    token: str,
    python: Sequence[str],
    *,
    statusline: bool = False,
    sandboxed: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """``argv`` and ``env`` of a terminal agent running ``program`` (see
    :func:`detect_program`), with the CLI's own settings that make it report to the
    host's hook socket. ``python`` is the interpreter's argv (agenthost importable).
    ``none`` returns them unchanged."""
    argv = list(argv)
    env = dict(env)
    if program == "none" or not argv:
        return argv, env
    if not token or not socket_path:
        raise ConfigError("hooks need a socket path and a token")
    if program == "claude":
        settings_obj = claude_settings(python, statusline=statusline)
        if sandboxed:  # its own sandbox cannot nest in ours (docs/sandbox.md)
            settings_obj["sandbox"] = {"enabled": False}
        settings = json.dumps(settings_obj)
        argv[1:1] = ["--settings", settings]
    elif program == "codex":
        argv[1:1] = ["-c", "notify=" + _toml_array(hook_command(python, "notify"))]
        if sandboxed:  # its own sandbox cannot nest in ours (docs/sandbox.md)
            argv[1:1] = ["-c", 'sandbox_mode="danger-full-access"']
    else:
        raise ConfigError(f"unknown hooks program {program!r}")
    env[SOCKET_ENV] = socket_path
    env[TOKEN_ENV] = token
    return argv, env
