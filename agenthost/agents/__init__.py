"""Agent adapters: how each agent CLI speaks (see :mod:`agenthost.agents.base`)."""

from __future__ import annotations

from agenthost.agents.base import Adapter, AdapterOptions
from agenthost.agents.claude import ClaudeAdapter
from agenthost.agents.codex import CodexAdapter
from agenthost.agents.demo import DemoAdapter
from agenthost.agents.lines import LinesAdapter
from agenthost.errors import ConfigError

ADAPTERS: dict[str, type[Adapter]] = {
    ClaudeAdapter.kind: ClaudeAdapter,
    CodexAdapter.kind: CodexAdapter,
    DemoAdapter.kind: DemoAdapter,
    LinesAdapter.kind: LinesAdapter,
}
DEFAULT_AGENT = DemoAdapter.kind


def make_adapter(kind: str, options: AdapterOptions | None = None) -> Adapter:
    """A new adapter for an agent kind; ConfigError for an unknown kind or options."""
    try:
        cls = ADAPTERS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown agent kind {kind!r}",
            hint="choose one of: " + ", ".join(sorted(ADAPTERS)),
        ) from None
    return cls(options)


__all__ = ["ADAPTERS", "DEFAULT_AGENT", "Adapter", "AdapterOptions", "make_adapter"]
