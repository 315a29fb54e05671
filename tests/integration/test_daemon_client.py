"""DaemonClient on the shared client core: a full listen backlog is waited for, and a
watch whose frames nobody reads never holds up a response."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from agenthost.daemon.client import FRAME_QUEUE, DaemonClient
from agenthost.daemon.protocol import WatchCursor
from agenthost.protocol import StreamEvent

from daemontools import daemon_world, flood_command
from hosttools import DEADLINE, RawConn, wait_for
from hosttools import wait_until as until


@contextlib.contextmanager
def full_backlog(path: Path) -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A socket that listens with a backlog of 0 and never accepts, filled with
    connections until the kernel answers EAGAIN."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(0)
    fillers: list[socket.socket] = []
    try:
        while True:
            sock = socket.socket(socket.AF_UNIX)
            sock.setblocking(False)
            fillers.append(sock)
            try:
                sock.connect(str(path))
            except BlockingIOError:
                fillers.pop().close()
                break
        yield server, fillers
    finally:
        for sock in fillers:
            sock.close()
        server.close()


def test_a_full_listen_backlog_is_waited_for_not_reported_as_no_daemon(home: Path) -> None:
    path = home / "daemon.sock"
    with full_backlog(path) as (server, _):

        async def main() -> None:
            client = DaemonClient(home, socket_path=path, connect_timeout=30)
            connecting = asyncio.ensure_future(client.connect())
            # EAGAIN used to fail at once with "no daemon answers"
            done, _ = await asyncio.wait({connecting}, timeout=0.3)
            assert not done, connecting.exception()
            server.setblocking(False)
            accepted = []
            with contextlib.suppress(BlockingIOError):
                while True:  # make room in the backlog: the client gets in
                    accepted.append(server.accept()[0])
            await asyncio.wait_for(connecting, 30)
            assert client.connected
            await client.close()
            for conn in accepted:
                conn.close()

        uvloop.run(main())


def test_connect_to_no_socket_still_says_no_daemon_at_once(home: Path) -> None:
    from agenthost.errors import DaemonNotRunning

    async def main() -> None:
        with pytest.raises(DaemonNotRunning, match="no daemon answers") as info:
            await DaemonClient(home, connect_timeout=30).connect()
        assert info.value.hint

    uvloop.run(asyncio.wait_for(main(), 5))


def test_a_watch_nobody_reads_never_holds_up_a_request_and_loses_nothing(home: Path) -> None:
    count = 20_000
    with daemon_world(home) as world:
        world.start_daemon()
        world.spawn("f1", flood_command("--count", str(count), "--rate", "0"))

        def head() -> tuple[int, str]:
            with RawConn(home / "hosts" / "f1.sock") as host:
                answer = host.request("host.attach", {"offset": 1 << 62})["payload"]
                return int(answer["stream_offset"]), str(answer["epoch"])

        wait_for(lambda: head()[0] > count, what="the flood journaled")
        last, epoch = head()

        async def main() -> list[int]:
            async with DaemonClient(home, request_timeout=30) as client:
                # from the start of the stream: a backfill of the host's journal
                await client.watch(["f1"], {"f1": WatchCursor(epoch=epoch, offset=0)})
                await until(lambda: client.frames_queued >= FRAME_QUEUE)
                await asyncio.wait_for(client.ping(), 5)  # nobody reads the watch
                seen: list[int] = []
                while not seen or seen[-1] < last:
                    frame = await client.next_frame(DEADLINE)
                    if isinstance(frame, StreamEvent):
                        seen.append(frame.offset)
                return seen

        seen = uvloop.run(asyncio.wait_for(main(), 120))
        assert seen == list(range(1, last + 1))
