"""agenthost: keep coding agents alive and reachable.

One supervisor process, the host, per agent: it owns the agent subprocess, numbers
everything the agent prints as stream events, keeps the newest in a ring buffer and
serves a versioned JSON protocol on its own Unix socket. This package is the host, its
CLI, and the client library::

    from agenthost import Client
"""

from agenthost._version import __version__
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
    RequestTimeout,
    UnknownType,
    VersionUnsupported,
)
from agenthost.protocol import (
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    AgentInfo,
    AgentState,
    AttachResponse,
    HistoryEntry,
    HistoryResponse,
    HostInfo,
    PingResponse,
    SendResponse,
    StatusResponse,
    StopResponse,
    StreamEvent,
)

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
    "FrameTooLarge",
    "HistoryEntry",
    "HistoryResponse",
    "HostAlreadyRunning",
    "HostInfo",
    "HostNotFound",
    "InternalError",
    "InvalidAgentId",
    "InvalidPayload",
    "NotConnected",
    "PingResponse",
    "ProtocolError",
    "RequestTimeout",
    "SendResponse",
    "StatusResponse",
    "StopResponse",
    "StreamEvent",
    "Subscription",
    "SyncSubscription",
    "UnknownType",
    "VersionUnsupported",
    "__version__",
    "discover_hosts",
    "discover_hosts_async",
    "probe_host",
    "probe_host_async",
]
