"""The daemon's side of the host factory against a scripted peer on a socket pair: what
it makes of answers, refusals, exit notices, garbage, silence and a closed socket.
(The real factory process is tests/integration/test_host_factory.py.)"""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from agenthost.errors import FactoryError
from agenthost.hostfactory.handle import Factory
from agenthost.hostfactory.messages import (
    Exited,
    Order,
    Refused,
    Started,
    decode_order,
    encode,
)

ORDER = Order(("--agent-id", "a1"), {"A": "b"}, "/", "/dev/null", "agenthost serve")


@dataclass
class Peer:
    """The factory's end, driven by the test; ``process`` stands for the factory."""

    sock: socket.socket
    process: subprocess.Popen[bytes]

    async def order(self) -> Order:
        data = await asyncio.get_running_loop().sock_recv(self.sock, 1 << 20)
        return decode_order(data)

    async def say(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)


@pytest.fixture
def stand_in() -> Iterator[subprocess.Popen[bytes]]:
    """A process that stands for the factory: to watch, and to kill."""
    process = subprocess.Popen(["sleep", "1000"])
    yield process
    process.kill()
    process.wait()


@pytest_asyncio.fixture
async def pair(stand_in: subprocess.Popen[bytes]) -> AsyncIterator[tuple[Factory, Peer]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.setblocking(False)
    factory = Factory(stand_in.pid, ours, stand_in, answer_timeout=0.5)
    factory.attach()
    try:
        yield factory, Peer(theirs, stand_in)
    finally:
        stand_in.kill()  # (close() waits for the factory to end)
        factory.close()
        theirs.close()


@pytest.mark.asyncio
async def test_answers_come_back_in_order_and_exits_resolve_their_futures(
    pair: tuple[Factory, Peer],
) -> None:
    factory, peer = pair
    first = asyncio.ensure_future(factory.start_host(ORDER))
    second = asyncio.ensure_future(factory.start_host(ORDER))
    assert await peer.order() == ORDER and await peer.order() == ORDER
    await peer.say(encode(Started(101)))
    await peer.say(encode(Started(102)))
    (pid1, exit1), (pid2, exit2) = await first, await second
    assert (pid1, pid2) == (101, 102)
    await peer.say(encode(Exited(102, -9)))
    await peer.say(encode(Exited(999, 0)))  # not ours: ignored
    assert await asyncio.wait_for(exit2, 5) == -9
    assert not exit1.done()


@pytest.mark.asyncio
async def test_a_refusal_is_a_factory_error_and_the_factory_stays(
    pair: tuple[Factory, Peer],
) -> None:
    factory, peer = pair
    refused = asyncio.ensure_future(factory.start_host(ORDER))
    await peer.order()
    await peer.say(encode(Refused("cannot fork a host: out of memory")))
    with pytest.raises(FactoryError, match="out of memory"):
        await refused
    assert factory.gone is None


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "garbage", [b"not json", b"[]", b'{"started": -1}', b'{"what": 1}', b"\xff"]
)
async def test_garbage_from_the_factory_is_skipped(
    pair: tuple[Factory, Peer], garbage: bytes
) -> None:
    factory, peer = pair
    started = asyncio.ensure_future(factory.start_host(ORDER))
    await peer.order()
    await peer.say(garbage)
    await peer.say(encode(Started(7)))
    assert (await started)[0] == 7
    assert factory.gone is None


@pytest.mark.asyncio
async def test_a_closed_socket_fails_what_waits_and_what_comes(
    pair: tuple[Factory, Peer],
) -> None:
    factory, peer = pair
    waiting = asyncio.ensure_future(factory.start_host(ORDER))
    await peer.order()
    peer.sock.close()
    with pytest.raises(FactoryError, match="closed its socket"):
        await waiting
    assert factory.gone is not None
    with pytest.raises(FactoryError):
        await factory.start_host(ORDER)


@pytest.mark.asyncio
async def test_the_end_of_the_factory_process_is_noticed(pair: tuple[Factory, Peer]) -> None:
    factory, peer = pair
    waiting = asyncio.ensure_future(factory.start_host(ORDER))
    await peer.order()
    peer.process.kill()  # its socket stays open here: the pidfd tells
    with pytest.raises(FactoryError, match="ended"):
        await waiting
    assert peer.process.returncode is not None  # reaped


@pytest.mark.asyncio
async def test_a_factory_that_does_not_answer_is_killed(pair: tuple[Factory, Peer]) -> None:
    factory, peer = pair
    with pytest.raises(FactoryError, match="did not answer"):
        await factory.start_host(ORDER)
    assert await asyncio.get_running_loop().run_in_executor(None, peer.process.wait, 10) == -9
