"""The wire layer that every agenthost service and client stands on.

* :mod:`~agenthost.wire.framing` and :mod:`~agenthost.wire.codec`: sans-IO framing with
  its limits, the request/response envelope, versions;
* :mod:`~agenthost.wire.peer`: who is at the other end of a Unix socket.

Nothing here knows a message of the host or of the daemon: each service brings its
message table. Sans-IO modules of this package import neither asyncio nor socket.
"""
