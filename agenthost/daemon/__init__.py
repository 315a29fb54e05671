"""The daemon: the long-lived manager of many hosts.

Hosts outlive it by design: it can be killed, upgraded or restarted at will, and on
start it rediscovers every host, reattaches to each stream from the position it
recorded, and carries on (see ``docs/daemon.md``).

Modules: :mod:`~agenthost.daemon.protocol` (the ``daemon.*`` messages, sans-IO),
:mod:`~agenthost.daemon.registry` (SQLite), :mod:`~agenthost.daemon.discovery` and
:mod:`~agenthost.daemon.reconcile` (what is on disk, what to do about it),
:mod:`~agenthost.daemon.startup` (doing it), :mod:`~agenthost.daemon.follower` (one
host's stream), :mod:`~agenthost.daemon.supervisor` (every agent's life),
:mod:`~agenthost.daemon.commands` (spawn, stop, forget, backfill),
:mod:`~agenthost.daemon.policy` (restarts), :mod:`~agenthost.daemon.spawner` (starting
hosts), :mod:`~agenthost.daemon.fanout` (``daemon.watch``),
:mod:`~agenthost.daemon.server` (the socket), :mod:`~agenthost.daemon.service` (the
process), :mod:`~agenthost.daemon.client` (talking to it), :mod:`~agenthost.daemon.files`
(its paths).

Nothing is imported here, so ``import agenthost.daemon.client`` stays light.
"""
