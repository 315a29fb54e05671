"""Codex's own sandbox, and how it meets agenthost's. Sans-IO (no file is read).

Codex confines the commands it runs itself (``--agent-opt sandbox=``, default
``workspace-write``): on Linux it re-runs its own binary as ``codex-linux-sandbox``,
which wraps the command in bubblewrap and then applies seccomp. Two things follow,
both described in docs/sandbox.md:

- Inside agenthost's sandbox Codex's cannot work (bubblewrap needs a new user
  namespace, which our seccomp filter refuses), and it would confine nothing ours does
  not: :func:`inside_sandbox` turns it off there, leaving the approval policy as it is.
- Outside ours, Codex finds its helper by a name on its PATH that it puts in a
  directory of CODEX_HOME, and it refuses to make that directory when CODEX_HOME is in
  the temporary directory. With a system bubblewrap older than 0.9 (no ``--argv0``;
  Debian 12 has 0.8) every sandboxed command then fails with ``bwrap: execvp
  codex-linux-sandbox: No such file or directory``. :func:`helper_alias_problem` says
  so before the first command does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Final

from agenthost.errors import ConfigError

SANDBOX_MODES: Final = ("read-only", "workspace-write", "danger-full-access")
UNCONFINED: Final = "danger-full-access"
"""The mode that runs commands without Codex's sandbox (agenthost's bounds them)."""


def inside_sandbox(params: Mapping[str, str]) -> dict[str, str]:
    """The ``--agent-opt`` settings of a Codex that runs inside agenthost's sandbox:
    ``params`` with Codex's own sandbox off (``sandbox=danger-full-access``), whatever
    mode was asked for; ``approval_policy`` and everything else unchanged.

    A mode that is not one of Codex's is still a ConfigError, as it is outside.
    """
    asked = params.get("sandbox")
    if asked is not None and asked not in SANDBOX_MODES:
        raise ConfigError(
            f"sandbox must be one of {', '.join(SANDBOX_MODES)}, not {asked!r}",
            hint="inside agenthost's sandbox Codex's own is off in any case",
        )
    return {**params, "sandbox": UNCONFINED}


def helper_alias_problem(env: Mapping[str, str], sandbox: str) -> str | None:
    """Why Codex's sandbox may fail every command in this environment, or None.

    ``env`` is the agent's environment; ``sandbox`` the mode asked for. Codex compares
    the paths as given (no symlink resolved): so does this.
    """
    if sandbox == UNCONFINED:
        return None  # no helper is run
    codex_home = env.get("CODEX_HOME") or ""
    if not codex_home:
        home = env.get("HOME") or ""
        if not home:
            return None  # Codex cannot find its home either: it will say so itself
        codex_home = posixpath.join(home, ".codex")
    temp = env.get("TMPDIR") or "/tmp"
    if not (posixpath.isabs(codex_home) and _within(codex_home, temp)):
        return None
    return (
        f"Codex's sandbox may fail every command: CODEX_HOME ({codex_home}) is in the "
        f"temporary directory ({temp}), where Codex does not make its codex-linux-sandbox "
        "helper, which a bubblewrap older than 0.9 needs; move CODEX_HOME, give Codex "
        "another TMPDIR, or install bubblewrap 0.9 or later"
    )


def _within(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or below it, component by component."""
    path, parent = posixpath.normpath(path), posixpath.normpath(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")
