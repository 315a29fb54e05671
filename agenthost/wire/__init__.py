"""The wire layer that every agenthost service and client stands on.

Sans-IO (no asyncio, no socket; tested in memory):

* :mod:`~agenthost.wire.framing`: newline-delimited frames with their size limit;
* :mod:`~agenthost.wire.codec`: the request/response envelope and versions;
* :mod:`~agenthost.wire.table`: a service's message table (request types, payload
  models, validation with its error text, the liberal decoding of what clients
  receive, the JSON Schema);
* :mod:`~agenthost.wire.connection`: the request side of a server connection (order,
  the pause policy, answers in pieces, half-close, shutdown);
* :mod:`~agenthost.wire.stream`: an attach cursor and the fan-out (replay, lagging,
  catch-up from the ring or the journal, drop).

With I/O:

* :mod:`~agenthost.wire.server`: one Unix socket server (private bind, peer check,
  accept back-off, hang-up watch, shutdown in order);
* :mod:`~agenthost.wire.client`: one client core (connect with retry, peer check,
  read loop, futures; responses never wait behind unread stream frames);
* :mod:`~agenthost.wire.peer`: who is at the other end of a Unix socket.

Nothing here knows a message of the host or of the daemon: each service brings its
message table. ``make lint`` checks both rules (``tests/layers.py``).
"""
