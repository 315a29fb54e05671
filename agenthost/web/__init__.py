"""The web gateway (``agenthost web``): an HTTP API, Server-Sent Events and a page for
a browser or a phone, in front of the hosts and the daemon of a home (and of remote
machines), as a client of them like any other (``docs/web.md``)."""
