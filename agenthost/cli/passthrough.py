"""``agenthost attach`` on a terminal agent: the local terminal becomes the agent's.

Like tmux, shpool or abduco attached to a session: the local terminal in raw mode,
the agent's screen painted from a snapshot (a reset, then the screen's ``dump``), then
the agent's bytes written as they come; the keys typed go to the agent (batched: one
``host.input`` in flight, the keys typed meanwhile in the next, in order), the local
size on start and on every SIGWINCH (``host.resize``). Nothing takes a row: what
the session has to say (a reconnection, the end) is said after leaving.

One key is kept: the detach key (Ctrl-] by default), and with ``--read-only``
(nothing is sent: no key, no size) Ctrl-C too. The follow across lost connections is
:class:`~agenthost.cli.session.AttachSession`'s: by offset on the same stream, from a
fresh snapshot on a new one. While no host answers, keys are not sent (nor kept for a
host that may run another program by then): the terminal beeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from agenthost.cli.common import Exit
from agenthost.cli.rawtty import RawMode, terminal_size, write_all
from agenthost.cli.render import Style
from agenthost.cli.session import AttachSession, Start, terminal_bytes
from agenthost.errors import AgentHostError, Busy
from agenthost.signals import signal_handlers
from agenthost.terminal.keys import CTRL_C, ControlKey, KeyScanner
from agenthost.terminal.local import PAINT_PRELUDE, AlternateScreen, leave_sequence

if TYPE_CHECKING:
    from agenthost.client import AsyncClient
    from agenthost.models import Screen
    from agenthost.protocol import StreamEvent
    from agenthost.remote import Remote

READ_SIZE: Final = 64 << 10
INPUT_BATCH: Final = 256 << 10
"""Bytes of keys (a paste) sent in one ``host.input`` at most (the host takes 1 MiB)."""
BUSY_PAUSE: Final = 0.05
"""Seconds before keys refused as ``busy`` (the agent reads slowly) are sent again."""
BELL: Final = b"\a"
CANCEL_AGAIN: Final = 0.5
"""Seconds after which a task cancelled, still running, is cancelled again."""
DETACH_FLUSH: Final = 2.0
"""Seconds a detach waits for the keys typed before it to be sent."""


class TerminalSession(AttachSession):
    """An attach session whose agent's screen is the local terminal ``out_fd``."""

    def __init__(
        self,
        agent_id: str,
        home: Path | None,
        *,
        remote: Remote | None,
        style: Style,
        out_fd: int,
    ) -> None:
        self.notes: list[str] = []
        super().__init__(
            agent_id,
            home,
            start=Start(),
            follow=True,
            as_json=False,
            style=style,
            note=self.notes.append,  # said once the terminal is the user's again
            remote=remote,
            snapshot=True,
        )
        self.announce = False
        self.out_fd = out_fd
        self.screen = AlternateScreen()
        self.on_connected: Callable[[AsyncClient], None] = lambda client: None

    def write(self, data: bytes) -> None:
        """Write to the local terminal (and note whether it shows its alternate
        screen, for the way out)."""
        self.screen.feed(data)
        try:
            write_all(self.out_fd, data)
        except OSError:  # the terminal is gone (hung up): nothing left to show it on
            if self._follow is not None:
                self._follow.stop()
            self._result = self._result or Exit.OK

    def paint(self, screen: Screen) -> None:
        self.screen = AlternateScreen()
        self.write(PAINT_PRELUDE + screen.dump.encode())

    def show(self, event: StreamEvent) -> None:
        if event.type == "terminal":
            self.write(terminal_bytes(event))
        # terminal_size: the bytes that follow paint the new size; the rest (state,
        # chat entries, questions) the agent's screen shows in its own way

    async def connected(self, client: AsyncClient) -> None:
        self.on_connected(client)

    def leave(self) -> None:
        """Give the terminal back: the agent's modes off, out of its alternate screen."""
        with contextlib.suppress(OSError):  # a terminal that hung up
            write_all(self.out_fd, leave_sequence(self.screen.on) + b"\r\n")


class PassThrough:
    """Runs a :class:`TerminalSession` with the keys and the size of the terminal."""

    def __init__(
        self,
        session: TerminalSession,
        detach_key: ControlKey,
        *,
        read_only: bool,
        in_fd: int = 0,
    ) -> None:
        self.session = session
        self.read_only = read_only
        self.in_fd = in_fd
        self.scanner = KeyScanner([detach_key, CTRL_C] if read_only else [detach_key])
        self.ended_by: signal.Signals | None = None
        """The signal that ended the pass-through (SIGTERM, SIGHUP), if one did."""
        self._keys = bytearray()  # typed, not sent yet
        self._wake = asyncio.Event()  # keys to send, or the size to tell
        self._idle = asyncio.Event()  # nothing left to send
        self._idle.set()
        self._resize = False
        self._done: asyncio.Future[Exit] | None = None
        self._bell = False  # beeped since the connection was lost
        self._detaching: asyncio.Task[None] | None = None

    async def run(self) -> Exit:
        """Until the agent ends, the user detaches or a signal ends it: the exit status."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        session = self.session
        session.on_connected = self._connected
        follow = loop.create_task(session.run())
        sender = loop.create_task(self._sender())
        loop.add_reader(self.in_fd, self._readable)
        handlers: dict[signal.Signals, Callable[[], object]] = {
            signal.SIGTERM: lambda: self._end_by(signal.SIGTERM),
            signal.SIGHUP: lambda: self._end_by(signal.SIGHUP),
        }
        if not self.read_only:
            handlers[signal.SIGWINCH] = self._winch
        try:
            with signal_handlers(handlers):
                done, _ = await asyncio.wait(
                    {follow, self._done}, return_when=asyncio.FIRST_COMPLETED
                )
                if follow in done:
                    return follow.result()
                return self._done.result()
        finally:
            loop.remove_reader(self.in_fd)
            # the sender first: its request must not meet the follow closing the client
            for task in (sender, follow, self._detaching):
                if task is not None:
                    await _cancel(task)

    # --- what happens -------------------------------------------------------------------

    def _connected(self, client: AsyncClient) -> None:
        self._bell = False
        if not self.read_only:
            self._resize = True  # a host may be new: it learns the size again
            self._wake.set()

    def _winch(self) -> None:
        self._resize = True
        self._wake.set()

    def _end_by(self, sig: signal.Signals) -> None:
        self.ended_by = sig
        self._finish(Exit.OK)

    def _finish(self, code: Exit) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(code)

    def _readable(self) -> None:
        try:
            data = os.read(self.in_fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # the terminal is gone
        if not data:
            asyncio.get_running_loop().remove_reader(self.in_fd)
            self._finish(Exit.OK)
            return
        keys, leave = self.scanner.scan(data)
        if keys and not self.read_only:
            self._keys += keys
            self._idle.clear()
            self._wake.set()
        if leave and self._detaching is None:
            asyncio.get_running_loop().remove_reader(self.in_fd)
            self._detaching = asyncio.get_running_loop().create_task(self._detach())

    async def _detach(self) -> None:
        # what was typed before the detach key goes first (a host that does not take
        # it within the bound keeps the user no longer)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), DETACH_FLUSH)
        self.session.detached()
        self._finish(Exit.OK)

    async def _sender(self) -> None:
        """Sends the keys and the size, in the order they came, one request at a time."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            client = self.session.client
            if client is None:
                self._keys.clear()  # no host to take them: nothing is kept for later
                self._idle.set()
                if not self._bell:
                    self._bell = True
                    with contextlib.suppress(OSError):
                        write_all(self.session.out_fd, BELL)
                continue
            try:
                if self._resize:
                    self._resize = False
                    size = terminal_size(self.session.out_fd)
                    if size is not None:
                        await client.resize(*size)
                while self._keys:
                    batch = bytes(self._keys[:INPUT_BATCH])
                    try:
                        await client.input(batch)
                    except Busy:
                        await asyncio.sleep(BUSY_PAUSE)  # the agent's pace, not a sync
                        continue
                    del self._keys[: len(batch)]
            except AgentHostError:
                # the agent ended or the connection is lost: the follow says so; what
                # was typed for it goes nowhere
                self._keys.clear()
            if not self._keys:
                self._idle.set()


async def _cancel(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` and wait for its end. Again while it runs: Python 3.11's
    ``wait_for`` loses a cancellation that comes as its future completes."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN)


def run_passthrough(
    agent_id: str,
    *,
    home: Path | None,
    remote: Remote | None,
    detach_key: ControlKey,
    read_only: bool,
) -> Exit:
    """Attach to a terminal agent from this terminal (stdin and stdout); the exit
    status. A SIGTERM or SIGHUP ends it, the terminal restored, by that signal."""
    import uvloop

    from agenthost.cli.common import use_color

    style = Style(use_color(sys.stderr))
    session = TerminalSession(agent_id, home, remote=remote, style=style, out_fd=1)
    passthrough: PassThrough | None = None
    code = Exit.OK
    try:
        with RawMode(0):
            try:
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    passthrough = PassThrough(session, detach_key, read_only=read_only)
                    code = runner.run(passthrough.run())
            except KeyboardInterrupt:  # a SIGINT from outside (Ctrl-C is a key here)
                session.detached()
            finally:
                session.leave()
    finally:
        for line in session.notes:  # what the session had to say, now below the screen
            click.echo(line, err=True)
    if passthrough is not None and passthrough.ended_by is not None:
        sig = passthrough.ended_by
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # end as the signal says (a shell sees "Terminated")
    return code
