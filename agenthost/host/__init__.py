"""The per-agent supervisor process (see :mod:`agenthost.host.host`)."""

from agenthost.host.host import Host, HostConfig

__all__ = ["Host", "HostConfig"]
