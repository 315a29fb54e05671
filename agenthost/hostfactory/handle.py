"""The daemon's side of its host factory, on the daemon's event loop.

:class:`Factory` sends orders and awaits their answers (in order), keeps a future per
started host that the factory's exit notice resolves, and notices when the factory is
gone (its socket closes, or its process ends: a pidfd on the loop), after which every
order fails at once with :class:`~agenthost.errors.FactoryError` and the caller starts
hosts by exec instead. It never imports the host: the factory process does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import select
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import Final

import structlog

from agenthost.errors import FactoryError
from agenthost.hostfactory.messages import (
    MAX_MESSAGE,
    Exited,
    Order,
    Refused,
    Started,
    decode_reply,
    encode,
)
from agenthost.pyargv import module_argv

log = structlog.get_logger("agenthost.hostfactory")

ANSWER_TIMEOUT: Final = 2.0
"""Seconds the factory has to answer an order (it forks in a few ms); past them it is
killed and the host is exec'd."""

_EXIT_WAIT_MS: Final = 1000
"""How long closing waits for the factory to end after its socket closed."""


class Factory:
    """A running host factory; :meth:`attach` it to the loop before the first order."""

    def __init__(
        self,
        pid: int,
        sock: socket.socket,
        popen: subprocess.Popen[bytes] | None = None,
        *,
        answer_timeout: float = ANSWER_TIMEOUT,
    ) -> None:
        """``pid`` and ``sock``: what :func:`~agenthost.hostfactory.process.start_factory`
        returned (the factory is this process's child); ``popen`` if it was exec'd."""
        self.pid = pid
        self._sock = sock
        self._popen = popen
        self.answer_timeout = answer_timeout
        self._sock.setblocking(False)
        self._answers: collections.deque[asyncio.Future[int]] = collections.deque()
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._pidfd: int | None = None
        self._send_lock = asyncio.Lock()
        self.gone: str | None = None
        """Why the factory can take no more orders (None while it can)."""

    @classmethod
    def exec_new(cls) -> Factory:
        """Start a factory by exec (``python -P -m agenthost.hostfactory``): what a process
        that already runs a loop (or threads) can do instead of forking one. It takes
        orders at once; they wait in its socket while it imports."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.set_inheritable(False)
        try:
            popen = subprocess.Popen(
                module_argv("agenthost.hostfactory", "--fd", str(theirs.fileno())),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except OSError as exc:
            ours.close()
            raise FactoryError(f"cannot start a host factory: {exc}") from exc
        finally:
            theirs.close()
        return cls(popen.pid, ours, popen)

    def attach(self) -> None:
        """Start reading the factory's messages and watching its process (on the
        running loop)."""
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(), name="host-factory")
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # already gone and reaped: the reader sees EOF
            return
        loop.add_reader(self._pidfd, self._on_process_end)

    async def start_host(self, order: Order) -> tuple[int, asyncio.Future[int]]:
        """Have the factory fork a host for ``order``: its pid, and a future of its exit
        status. FactoryError if the factory refuses or is gone before it answers (the
        host may then have been forked all the same: see the spawner)."""
        if self.gone is not None:
            raise FactoryError(self.gone)
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        async with self._send_lock:  # answers come in the order the orders went
            self._answers.append(answer)
            try:
                await asyncio.get_running_loop().sock_sendall(self._sock, encode(order))
            except OSError as exc:
                self._fail(f"the host factory is gone ({exc})")
            else:
                log.debug("factory.order_sent", factory_pid=self.pid)
        try:
            pid = await asyncio.wait_for(answer, self.answer_timeout)
        except TimeoutError:
            # stuck (stopped, swapping): it must not fork this order's host later
            self._fail(f"the host factory did not answer within {self.answer_timeout:g}s")
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            raise FactoryError(self.gone or "the host factory did not answer") from None
        return pid, self._exit_of(pid)

    def _exit_of(self, pid: int) -> asyncio.Future[int]:
        future = self._exits.get(pid)
        if future is None:
            future = self._exits[pid] = asyncio.get_running_loop().create_future()
        return future

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        reason = "the host factory closed its socket"
        try:
            while True:
                data = await loop.sock_recv(self._sock, MAX_MESSAGE + 1)
                if not data:
                    break
                self._take(data)
        except OSError as exc:
            reason = f"the host factory's socket failed: {exc}"
        finally:
            self._fail(reason)

    def _take(self, data: bytes) -> None:
        try:
            message = decode_reply(data)
        except FactoryError as exc:  # our own factory's bug: say so, keep reading
            log.error("factory.bad_message", error=str(exc))
            return
        match message:
            case Started(pid=pid):
                self._exit_of(pid)
                self._answer(lambda future: future.set_result(pid))
            case Refused(reason=reason):
                self._answer(lambda future: future.set_exception(FactoryError(reason)))
            case Exited(pid=pid, status=status):
                future = self._exits.pop(pid, None)
                if future is not None and not future.done():
                    future.set_result(status)

    def _answer(self, settle: Callable[[asyncio.Future[int]], None]) -> None:
        if not self._answers:
            log.error("factory.unexpected_answer")
            return
        future = self._answers.popleft()
        if not future.done():
            settle(future)

    def _on_process_end(self) -> None:
        self._unwatch()
        self._reap()
        self._fail("the host factory has ended")

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)

    def _fail(self, reason: str, *, asked: bool = False) -> None:
        """No more orders. ``asked``: the daemon ends the factory (its own shutdown, a
        clean Ctrl-C): that is no warning; a factory that went by itself is one."""
        if self.gone is None:
            self.gone = reason
            if asked:
                log.info("factory.closed", pid=self.pid)
            else:
                log.warning("factory.gone", pid=self.pid, reason=reason)
        while self._answers:
            future = self._answers.popleft()
            if not future.done():
                future.set_exception(FactoryError(reason))

    def _unwatch(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        """End the factory (it exits when its socket closes; hosts it started live on)
        and reap it, waiting up to a second for it to end."""
        self._fail("the host factory was closed", asked=True)
        if self._reader is not None:
            self._reader.cancel()
        self._sock.close()
        if self._pidfd is not None:  # readable once the factory has ended
            waiter = select.poll()
            waiter.register(self._pidfd, select.POLLIN)
            waiter.poll(_EXIT_WAIT_MS)
        self._unwatch()
        self._reap()
