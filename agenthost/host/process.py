"""The agent subprocess: spawn in its own process group, pipes, stop escalation, exit.

The agent runs in a new session (so it is its own process-group leader, has no
controlling terminal, and a signal to the group reaches every child it starts). stdout
and stderr arrive through a :class:`asyncio.SubprocessProtocol` callback, so reading
never waits for clients. stdin writes go to the pipe transport's buffer (a queue): a
full pipe never blocks the host; the buffer is bounded by the caller.

The exit is reported once, after the process was reaped *and* its output pipes were
drained, so every line the agent printed precedes its exit. Children that outlive the
agent and keep the pipes open are sent SIGTERM, then SIGKILL, with the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import structlog

from agenthost.errors import AgentNotRunning

log = structlog.get_logger("agenthost.process")

_PR_SET_PDEATHSIG: Final = 1
ORPHAN_GRACE: Final = 1.0  # seconds between SIGTERM and SIGKILL for leftover children
DRAIN_GRACE: Final = 2.0  # seconds to wait for output pipes after the agent exited


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How the agent ended. ``exit_code`` is -N for a death by signal N."""

    exit_code: int
    signal: str | None
    ended_at: float

    @property
    def success(self) -> bool:
        return self.exit_code == 0

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        name = None
        if returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"SIG{-returncode}"
        return cls(returncode, name, time.time())


class SpawnError(Exception):
    """The agent could not be started (internal: the host reports it as an event)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _child_setup() -> None:  # pragma: no cover - runs in the forked child
    # Die with the host: if the host is killed -9, the kernel sends SIGKILL to the
    # agent (the group leader), which closes the pipes its children write to.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The host ignores SIGHUP and SIGPIPE; ignored dispositions survive exec.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, proc: AgentProcess) -> None:
        self._proc = proc

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        if fd == 1:
            self._proc.on_stdout(data)
        elif fd == 2:
            self._proc.on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._proc._pipe_closed(fd, exc)

    def process_exited(self) -> None:
        self._proc._process_exited()


class AgentProcess:
    """One agent subprocess and its pipes.

    Callbacks: ``on_stdout(bytes)``, ``on_stderr(bytes)`` with raw chunks,
    ``on_stdin_error(str)`` when a write to stdin fails, ``on_exit(ExitStatus)`` once,
    after the output pipes were drained.
    """

    def __init__(
        self,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        on_exit: Callable[[ExitStatus], None],
        on_stdin_error: Callable[[str], None],
    ) -> None:
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self._on_exit = on_exit
        self._on_stdin_error = on_stdin_error
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self.pid = 0
        self.started_at = 0.0
        self._open_pipes: set[int] = {1, 2}
        self._reaped = False
        self.status: ExitStatus | None = None
        self._done = asyncio.Event()
        self._pipes_done = asyncio.Event()
        self._returncode = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        """True from spawn until the agent was reaped."""
        return self._transport is not None and not self._reaped

    async def start(self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> int:
        """Spawn the agent; return its pid. Raise SpawnError if it cannot start."""
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _Protocol(self),
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                preexec_fn=_child_setup,
            )
        except FileNotFoundError as exc:
            raise SpawnError(f"command not found: {argv[0]} ({exc.strerror})", 127) from exc
        except PermissionError as exc:
            raise SpawnError(f"permission denied: {argv[0]} ({exc.strerror})", 126) from exc
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise SpawnError(f"cannot start {argv[0]}: {exc}", 127) from exc
        self._transport = transport
        self.pid = transport.get_pid()
        self.started_at = time.time()
        # uvloop's pipe transports implement WriteTransport without subclassing it
        self._stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        # the agent may exit before subprocess_exec returned
        if transport.get_returncode() is not None and not self._reaped:
            self._process_exited()
        return self.pid

    # --- stdin ----------------------------------------------------------------------

    @property
    def stdin_buffered(self) -> int:
        """Bytes written to stdin that the agent has not read yet."""
        return self._stdin.get_write_buffer_size() if self._stdin is not None else 0

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the agent's stdin. Raise AgentNotRunning if it is closed."""
        stdin = self._stdin
        if stdin is None or stdin.is_closing() or self._reaped:
            raise AgentNotRunning("the agent is not running or has closed its stdin")
        stdin.write(data)

    def close_stdin(self) -> None:
        """Send end-of-file to the agent (after the queued input)."""
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()

    # --- signals and stop ---------------------------------------------------------------

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the agent's whole process group; False if none is left."""
        if not self.pid:
            return False
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - a group of another user: not ours
            log.warning("process.signal_denied", pid=self.pid, signal=sig)
            return False
        return True

    async def wait(self, timeout: float | None = None) -> ExitStatus | None:
        """Wait for the exit to be reported; None on timeout."""
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return None
        return self.status

    async def stop(self, timeout: float, force: bool) -> tuple[ExitStatus, bool]:
        """Stop the agent: SIGTERM to the group, SIGKILL after ``timeout`` seconds.

        Return the exit status and whether it was graceful (exited before SIGKILL was
        needed; never with ``force``).
        """
        if self.status is not None:
            return self.status, False
        graceful = not force
        if force:
            self.signal_group(signal.SIGKILL)
        else:
            self.signal_group(signal.SIGTERM)
            if await self.wait(timeout) is None:
                graceful = False
                log.info("process.escalate", pid=self.pid, timeout=timeout)
                self.signal_group(signal.SIGKILL)
        status = await self.wait()
        assert status is not None
        return status, graceful

    # --- internals ---------------------------------------------------------------------

    def _process_exited(self) -> None:
        if self._reaped or self._transport is None:
            return
        self._reaped = True
        code = self._transport.get_returncode()
        self._returncode = code if code is not None else -int(signal.SIGKILL)
        self._spawn(self._wind_down())

    def _pipe_closed(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            if exc is not None and not self._reaped:
                self._on_stdin_error(f"writing to the agent's stdin failed: {exc}")
            return
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            self._pipes_done.set()

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def _wait_pipes(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._pipes_done.wait(), timeout)

    async def _wind_down(self) -> None:
        # The leader is gone. Its output may still be in flight in the pipes: wait for
        # them to close (at once, normally). Children that outlive the agent would keep
        # burning resources unseen: end the group, politely first.
        await self._wait_pipes(DRAIN_GRACE)
        if self._group_alive():
            log.info("process.orphans", pid=self.pid, signal="SIGTERM")
            self.signal_group(signal.SIGTERM)
            await self._wait_pipes(ORPHAN_GRACE)
            if self._group_alive():
                log.info("process.orphans", pid=self.pid, signal="SIGKILL")
                self.signal_group(signal.SIGKILL)
                await self._wait_pipes(ORPHAN_GRACE)
        self._finish()

    def _finish(self) -> None:
        if self.status is not None:
            return
        self.status = ExitStatus.from_returncode(self._returncode)
        if self._transport is not None:
            self._transport.close()
        self._done.set()
        self._on_exit(self.status)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Kill whatever is left and cancel internal tasks (host shutdown)."""
        if self.running:
            self.signal_group(signal.SIGKILL)
            await self.wait(5)
        for task in list(self._tasks):
            task.cancel()
        if self._transport is not None:
            self._transport.close()
