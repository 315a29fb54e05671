"""What each agent kind gets inside its sandbox (no I/O): the parts of ``$HOME`` bound
in, and the hosts its model API needs in the ``strict`` profile.

``$HOME`` is an empty tmpfs in every sandbox; a kind's own configuration and session
directories are bound read-write (a resumed session needs them), git's configuration
read-only. A directory named by the agent's environment wins over the default place
(``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``), as it does for the agent itself. The model API
is the kind's public one, plus the host of any base URL the agent's environment sets
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...): what the agent will connect to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Final
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class HomeBind:
    """A path the agent's kind needs: ``path`` under ``$HOME`` (``~/.codex``) unless
    ``env`` names a variable whose value is the path instead."""

    path: str
    writable: bool
    directory: bool = True
    env: str | None = None
    create: bool = False
    """Create it (an empty directory) when it is missing, so the agent's writes land
    outside the sandbox and last (its sessions)."""
    programs: tuple[str, ...] = ()
    """Create it all the same when the agent's program is one of these (by name): an
    ACP agent's kind does not say which agent it is, its program does."""

    def creates(self, program: str) -> bool:
        """Whether this directory is made when missing, for an agent running ``program``
        (the path or name of its command's first word)."""
        return self.create or PurePath(program).name in self.programs


@dataclass(frozen=True, slots=True)
class KindNeeds:
    """One agent kind's needs."""

    binds: tuple[HomeBind, ...] = ()
    api_hosts: tuple[str, ...] = ()
    base_url_vars: tuple[str, ...] = field(default=())


GIT: Final = (
    HomeBind(".gitconfig", writable=False, directory=False),
    HomeBind(".config/git", writable=False),
)
BASE_URL_VARS: Final = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_API_BASE_URL",
)
"""Variables an agent takes its model API's address from (any kind may use any)."""

NEEDS: Final[Mapping[str, KindNeeds]] = {
    "claude": KindNeeds(
        binds=(
            HomeBind(".claude", writable=True, env="CLAUDE_CONFIG_DIR", create=True),
            HomeBind(".claude.json", writable=True, directory=False),
            *GIT,
        ),
        api_hosts=("api.anthropic.com",),
    ),
    "codex": KindNeeds(
        binds=(HomeBind(".codex", writable=True, env="CODEX_HOME", create=True), *GIT),
        api_hosts=("api.openai.com", "chatgpt.com"),
    ),
    # ACP agents: the common ones' own directories (Gemini CLI, Claude's and Codex's
    # ACP adapters use Claude Code's and Codex's), made for the one that runs: its
    # sessions are there, and `--resume` loads them from there after the sandbox ended
    "acp": KindNeeds(
        binds=(
            HomeBind(".gemini", writable=True, programs=("gemini",)),
            HomeBind(
                ".claude", writable=True, env="CLAUDE_CONFIG_DIR", programs=("claude-agent-acp",)
            ),
            HomeBind(".claude.json", writable=True, directory=False),
            HomeBind(".codex", writable=True, env="CODEX_HOME", programs=("codex-acp",)),
            *GIT,
        ),
        api_hosts=(),
    ),
}
DEFAULT_NEEDS: Final = KindNeeds(binds=GIT)
"""A kind not listed (demo, lines): git's configuration only, no API."""


def needs(kind: str) -> KindNeeds:
    """What agents of ``kind`` need."""
    return NEEDS.get(kind, DEFAULT_NEEDS)


def api_hosts(kind: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The hosts (``name`` or ``name:port``) the agent's model API is reached at: its
    kind's, and the host of every base URL its environment sets."""
    hosts = list(needs(kind).api_hosts)
    for var in BASE_URL_VARS:
        value = env.get(var, "").strip()
        if not value:
            continue
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            continue  # not a URL: the agent will fail on it, not reach anything
        if parts.scheme not in ("http", "https") or not parts.hostname:
            continue
        host = parts.hostname
        if ":" in host:
            host = f"[{host}]"
        hosts.append(f"{host}:{port}" if port is not None else host)
    return tuple(dict.fromkeys(hosts))
