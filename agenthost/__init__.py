"""agenthost: keep coding agents alive and reachable.

One supervisor process, the host, per agent: it owns the agent subprocess, numbers
everything the agent prints as stream events, keeps the newest in a ring buffer and
serves a versioned JSON protocol on its own Unix socket. This package is the host, its
CLI, and the client library::

    from agenthost import Client
"""

from __future__ import annotations

from agenthost._version import __version__

TYPE_CHECKING = False  # (typing is not imported at run time: the CLI's fast path)
if TYPE_CHECKING:
    from typing import Any

# The public names are loaded on first use (PEP 562): ``agenthost serve`` imports
# ``agenthost.host`` through this package and must not pay for the client, and a
# script that only needs ``agenthost.errors`` should not import asyncio.
_EXPORTS: dict[str, str] = {
    "AsyncClient": "agenthost.client",
    "Client": "agenthost.client",
    "DiscoveredHost": "agenthost.client",
    "Subscription": "agenthost.client",
    "SyncSubscription": "agenthost.client",
    "discover_hosts": "agenthost.client",
    "discover_hosts_async": "agenthost.client",
    "probe_host": "agenthost.client",
    "probe_host_async": "agenthost.client",
    "Follow": "agenthost.follow",
    "Gap": "agenthost.follow",
    "Position": "agenthost.follow",
    "SyncFollow": "agenthost.follow",
    "AgentHostError": "agenthost.errors",
    "AgentNotRunning": "agenthost.errors",
    "Busy": "agenthost.errors",
    "ConfigError": "agenthost.errors",
    "ErrorCode": "agenthost.errors",
    "Forbidden": "agenthost.errors",
    "FrameTooLarge": "agenthost.errors",
    "HostAlreadyRunning": "agenthost.errors",
    "HostNotFound": "agenthost.errors",
    "InternalError": "agenthost.errors",
    "InvalidAgentId": "agenthost.errors",
    "InvalidPayload": "agenthost.errors",
    "NotConnected": "agenthost.errors",
    "ProtocolError": "agenthost.errors",
    "RemoteError": "agenthost.errors",
    "RemoteUnusable": "agenthost.errors",
    "RequestTimeout": "agenthost.errors",
    "UnknownRequest": "agenthost.errors",
    "UnknownType": "agenthost.errors",
    "VersionUnsupported": "agenthost.errors",
    "MIN_PROTOCOL_VERSION": "agenthost.protocol",
    "PROTOCOL_VERSION": "agenthost.protocol",
    "AgentInfo": "agenthost.protocol",
    "AgentState": "agenthost.protocol",
    "AttachResponse": "agenthost.protocol",
    "HistoryEntry": "agenthost.protocol",
    "HistoryResponse": "agenthost.protocol",
    "HostInfo": "agenthost.protocol",
    "InterruptResponse": "agenthost.protocol",
    "PermissionDecision": "agenthost.protocol",
    "PermissionRequest": "agenthost.protocol",
    "PingResponse": "agenthost.protocol",
    "RespondResponse": "agenthost.protocol",
    "SendResponse": "agenthost.protocol",
    "StatusResponse": "agenthost.protocol",
    "StopResponse": "agenthost.protocol",
    "StreamEvent": "agenthost.protocol",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agenthost.client import (
        AsyncClient,
        Client,
        DiscoveredHost,
        Subscription,
        SyncSubscription,
        discover_hosts,
        discover_hosts_async,
        probe_host,
        probe_host_async,
    )
    from agenthost.errors import (
        AgentHostError,
        AgentNotRunning,
        Busy,
        ConfigError,
        ErrorCode,
        Forbidden,
        FrameTooLarge,
        HostAlreadyRunning,
        HostNotFound,
        InternalError,
        InvalidAgentId,
        InvalidPayload,
        NotConnected,
        ProtocolError,
        RemoteError,
        RemoteUnusable,
        RequestTimeout,
        UnknownRequest,
        UnknownType,
        VersionUnsupported,
    )
    from agenthost.follow import Follow, Gap, Position, SyncFollow
    from agenthost.protocol import (
        MIN_PROTOCOL_VERSION,
        PROTOCOL_VERSION,
        AgentInfo,
        AgentState,
        AttachResponse,
        HistoryEntry,
        HistoryResponse,
        HostInfo,
        InterruptResponse,
        PermissionDecision,
        PermissionRequest,
        PingResponse,
        RespondResponse,
        SendResponse,
        StatusResponse,
        StopResponse,
        StreamEvent,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agenthost' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "MIN_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "AgentHostError",
    "AgentInfo",
    "AgentNotRunning",
    "AgentState",
    "AsyncClient",
    "AttachResponse",
    "Busy",
    "Client",
    "ConfigError",
    "DiscoveredHost",
    "ErrorCode",
    "Forbidden",
    "Follow",
    "FrameTooLarge",
    "Gap",
    "HistoryEntry",
    "HistoryResponse",
    "HostAlreadyRunning",
    "HostInfo",
    "HostNotFound",
    "InterruptResponse",
    "PermissionDecision",
    "PermissionRequest",
    "RespondResponse",
    "InternalError",
    "InvalidAgentId",
    "InvalidPayload",
    "NotConnected",
    "PingResponse",
    "Position",
    "ProtocolError",
    "RemoteError",
    "RemoteUnusable",
    "RequestTimeout",
    "SendResponse",
    "StatusResponse",
    "StopResponse",
    "StreamEvent",
    "Subscription",
    "SyncFollow",
    "SyncSubscription",
    "UnknownRequest",
    "UnknownType",
    "VersionUnsupported",
    "__version__",
    "discover_hosts",
    "discover_hosts_async",
    "probe_host",
    "probe_host_async",
]
