"""The host factory: hosts forked from one pre-imported process.

:mod:`~agenthost.hostfactory.process` is the factory (forked by ``agenthost daemon``
before its event loop exists), :mod:`~agenthost.hostfactory.handle` the daemon's side
of it, :mod:`~agenthost.hostfactory.messages` what they say to each other. A host it
forks runs the same ``agenthost serve`` as an exec'd one; see docs/architecture.md.
"""
