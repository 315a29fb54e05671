"""The Agent Client Protocol (ACP, agentclientprotocol.com), both directions.

ACP is JSON-RPC 2.0 over an agent's stdio between an editor (the client) and an agent.
agenthost speaks it twice: as the client of an ACP agent it hosts (the ``acp`` adapter,
:mod:`agenthost.agents.acp`), and as an agent to editors, bridging them to any hosted
agent (``agenthost acp ID``). This package holds what both share, without I/O: the
JSON-RPC messages (:mod:`agenthost.acp.jsonrpc`) and the names of the schema's values
that agenthost uses (:mod:`agenthost.acp.schema`).

Why our own few definitions rather than the official SDK: the adapter is sans-IO (lines
in, events and bytes out) and runs in every ACP host, where the SDK's import costs about
0.45 s and 40 MB (273 pydantic models) and its connection wants to own the asyncio
streams. The tests use the SDK as an independent ACP peer.
"""
