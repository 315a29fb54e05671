"""Agent adapters: how each agent CLI speaks (see :mod:`agenthost.agents.base`).

An adapter's module is imported only when a host of its kind starts (the Codex and
Claude Code adapters cost a lines host ~25 ms of start-up otherwise).
"""

from __future__ import annotations

import importlib

from agenthost.agents.base import Adapter, AdapterOptions
from agenthost.errors import ConfigError

_MODULES: dict[str, tuple[str, str]] = {
    "acp": ("agenthost.agents.acp", "AcpAdapter"),
    "claude": ("agenthost.agents.claude", "ClaudeAdapter"),
    "codex": ("agenthost.agents.codex", "CodexAdapter"),
    "demo": ("agenthost.agents.demo", "DemoAdapter"),
    "lines": ("agenthost.agents.lines", "LinesAdapter"),
    "pty": ("agenthost.agents.pty", "PtyAdapter"),
}

AGENT_KINDS: tuple[str, ...] = tuple(sorted(_MODULES))
"""Every agent kind ``serve --agent`` accepts."""

_SUMMARIES: dict[str, str] = {
    "acp": "any agent that speaks ACP, e.g. -- gemini --acp",
    "claude": "Claude Code",
    "codex": "Codex",
    "demo": "built in, no API key",
    "lines": "any command: a line in, lines out",
    "pty": "any program, full screen, in a terminal",
}


def kinds_help() -> str:
    """Every agent kind with what it is, for ``--agent``'s help (from the registry: a
    new kind cannot be left out)."""
    named = [f"{kind} ({_SUMMARIES.get(kind, 'see docs/agents.md')})" for kind in AGENT_KINDS]
    return ", ".join(named[:-1]) + " or " + named[-1]


DEFAULT_AGENT = "demo"


def adapter_modules() -> tuple[str, ...]:
    """The module of every agent kind (what the host factory imports once)."""
    return tuple(module for module, _ in _MODULES.values())


def adapter_class(kind: str) -> type[Adapter] | None:
    """The adapter class of an agent kind (its module imported now), or None."""
    target = _MODULES.get(kind)
    if target is None:
        return None
    cls: type[Adapter] = getattr(importlib.import_module(target[0]), target[1])
    return cls


def structured_output(kind: str | None) -> bool:
    """Whether agents of ``kind`` have structured output (see ``Adapter.structured``);
    False for an unknown kind. Imports only that kind's adapter module."""
    cls = adapter_class(kind) if kind else None
    return cls is not None and cls.structured


def make_adapter(kind: str, options: AdapterOptions | None = None) -> Adapter:
    """A new adapter for an agent kind; ConfigError for an unknown kind or options."""
    cls = adapter_class(kind)
    if cls is None:
        raise ConfigError(
            f"unknown agent kind {kind!r}",
            hint="choose one of: " + ", ".join(AGENT_KINDS),
        )
    return cls(options)


__all__ = [
    "AGENT_KINDS",
    "DEFAULT_AGENT",
    "Adapter",
    "AdapterOptions",
    "adapter_class",
    "adapter_modules",
    "kinds_help",
    "make_adapter",
    "structured_output",
]
