"""A watcher the hub drops while one of its backfills waits for a drain.

The hub forgets the watcher first (``watch`` becomes None), then aborts its connection;
when the connection is lost, its backfill tasks must end too: they wait for a drain
that can no longer come, and would hold the task, the connection and its transport for
the rest of the daemon's life. The real ``DaemonConnection``, ``Hub`` and ``Backfills``
in one event loop; only the daemon around them is a small stand-in.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from agenthost.daemon.backfill import Backfills
from agenthost.daemon.fanout import Held, Hub
from agenthost.daemon.protocol import WatchRequest
from agenthost.daemon.server import DaemonConnection

from hosttools import wait_until as until


class SliceSource:
    """Serves any range, three events at a time (a host that always has them)."""

    async def read(self, first: int, last: int) -> tuple[int, list[bytes]]:
        end = min(last, first + 2)
        return first, [b'{"offset":%d}\n' % o for o in range(first, end + 1)]


class Daemon:
    """What the connection calls back: the service's unwatch and resume."""

    def __init__(self, hub: Hub, backfills: Backfills) -> None:
        self.hub, self.backfills = hub, backfills

    def unwatch(self, conn: Any) -> None:
        self.hub.unwatch(conn)
        self.backfills.cancel(conn)

    def resume(self, conn: Any) -> None:
        self.hub.pump(conn)
        self.backfills.drained(conn)


def test_a_dropped_watcher_takes_its_backfills_with_its_connection() -> None:
    async def scenario() -> None:
        hub = Hub(buffer_events=10, buffer_bytes=1 << 20, max_queue=1 << 20)
        backfills = Backfills(hub)
        daemon = Daemon(hub, backfills)
        server = SimpleNamespace(
            dispatcher=daemon, forget=lambda conn: None, max_frame=1 << 20, max_queue=1 << 20
        )
        for agent in ("A", "B"):
            hub.attached(agent, "e1", 0)
        for offset in range(1, 31):  # A's buffer keeps 21..30: 1..20 need a backfill
            hub.publish("A", offset, b'{"a":%d}\n' % offset)
        for offset in range(1, 6):
            hub.publish("B", offset, b'{"b":%d}\n' % offset)

        conn = DaemonConnection(server)  # type: ignore[arg-type]
        conn.pause_writing()  # the client does not read: its transport is paused
        since = {a: {"epoch": "e1", "offset": 0} for a in ("A", "B")}
        filling = hub.watch(
            conn, WatchRequest.model_validate({"since": since}), 1, {"A": Held("e1", 1)}
        )
        assert filling == ["A"]
        backfills.start(conn, {"A": SliceSource()})
        await until(lambda: len(backfills.tasks(conn)) == 1, "the backfill to start")
        task = backfills.tasks(conn)[0]

        for offset in range(6, 30):  # B floods: the lagging watcher falls out of B's buffer
            hub.publish("B", offset, b'{"b":%d}\n' % offset)
        assert conn not in hub.watchers and conn.watch is None and conn.closed
        conn.connection_lost(None)  # what the loop reports after the abort

        await until(task.done, "the backfill to end with its connection")
        assert task.cancelled() and backfills.tasks(conn) == []

    asyncio.run(scenario())
