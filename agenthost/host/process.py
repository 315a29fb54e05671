"""The agent subprocess: spawn in its own process group, pipes, stop escalation, exit.

The agent runs in a new session (so it is its own process-group leader, has no
controlling terminal, and a signal to the group reaches every child it starts). It
inherits exactly three descriptors: its stdin, stdout and stderr pipes.

Why not ``loop.subprocess_exec``: under uvloop, libuv's spawn does not close the
parent's descriptors in the child, so every agent would inherit strays, among them a
duplicate of its own stdin (closing stdin in the agent would then not close the pipe).
So the process is started with :class:`subprocess.Popen` (``close_fds``), its pipes are
read and written with non-blocking ``os.read``/``os.write`` from ``add_reader`` /
``add_writer`` callbacks, and its exit is noticed through a pidfd. Reading never waits
for clients; stdin writes go through a buffer (the queue), so a full pipe never blocks
the host.

The exit is reported once, after the process was reaped *and* its output pipes were
drained, so every line the agent printed precedes its exit. Children that outlive the
agent are sent SIGTERM, then SIGKILL, with the group.

If the host itself dies (even by SIGKILL), nothing of the agent may keep running
unseen: the agent gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``), and a watchdog
(a ``sh`` blocked reading a pipe whose only writer is the host) sees end-of-file and
sends SIGTERM to the agent's whole process group, then SIGKILL two seconds later. The
grace lets agents that start commands in process groups of their own (Codex does)
end them before they die.

No Python code runs between fork and exec (no ``preexec_fn``): the host has threads
(the journal's sync thread, executor workers), and a child forked from a threaded
process may deadlock on a lock another thread held. The session comes from Popen's
``start_new_session`` (done in C), and the death signal from an exec wrapper,
util-linux ``setpriv --pdeathsig SIGTERM --`` (it sets the flag, then execs the agent,
keeping its pid and argv). Where no ``setpriv`` with ``--pdeathsig`` is found, the
watchdog alone ends the group when the host dies.

A forced kill (SIGKILL) reaches every descendant of the agent, found while the agent
still lives, not only its process group. What left the group (``setsid``) and outlived
its parent is re-parented to the host when the host is a child subreaper (``agenthost
serve``): :attr:`AgentProcess.sweeper` ends it after the group, and the watchdog ends
every process carrying the run's environment marker (:mod:`agenthost.host.reaper`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from agenthost.agents.programs import lookup
from agenthost.errors import AgentNotRunning
from agenthost.host import reaper

if TYPE_CHECKING:
    from agenthost.sandbox.runner import Sandbox

log = structlog.get_logger("agenthost.process")

READ_SIZE: Final = 1 << 18  # bytes per read: large reads make large event batches
TERMINAL_BATCH: Final = 1 << 16
"""Bytes read from a pseudo-terminal's master per wake-up at most (one ``terminal``
event's limit). A read returns at most what the line discipline holds (4 KiB on
Linux), so the master is read until it has nothing more: one event per 64 KiB of a
flood instead of one per 4 KiB (benchmarks/terminal.py)."""
ORPHAN_GRACE: Final = 1.0  # seconds between SIGTERM and SIGKILL for leftover children
DRAIN_GRACE: Final = 2.0  # seconds to wait for output pipes after the agent exited
STDOUT, STDERR = 1, 2
# $0 is the agent's process group, $1 the agent run's environment marker (NAME=VALUE) or
# "". Runs when the host's end of the pipe closes: the group and every process that
# carries the marker (agenthost.host.reaper) get SIGTERM, then SIGKILL.
_WATCHDOG = (
    'read _unused; kill -TERM "-$0" 2>/dev/null; m=; [ -n "$1" ] && '
    'm=$(grep -lzxF -e "$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); '
    '[ -n "$m" ] && kill -TERM $m 2>/dev/null; sleep 2; kill -KILL "-$0" $m 2>/dev/null'
)
# Where setpriv is looked for: system directories only, never the user's PATH, because
# the wrapper runs in front of every agent.
SYSTEM_BIN_DIRS: Final = "/usr/bin:/bin:/usr/sbin:/sbin"
CLEAN_STOP_SIGNALS: Final = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
"""After a requested stop, a death by one of these is a clean stop (as systemd counts;
SIGHUP is how a terminal agent is asked to end: its terminal hung up)."""


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How the agent ended. ``exit_code`` is -N for a death by signal N."""

    exit_code: int
    signal: str | None
    ended_at: float
    stop_requested: bool = False
    """A stop had signalled the agent (SIGTERM, or SIGKILL if forced) before it ended."""

    @property
    def success(self) -> bool:
        """Whether this is a clean end (state ``done``): exit code 0, or, after a
        requested stop, a death by that stop's SIGTERM or by SIGINT. A death by a
        signal nobody asked for, and a SIGKILL (an escalation or a forced stop), are
        failures (state ``error``)."""
        if self.exit_code == 0:
            return True
        return self.stop_requested and self.signal in CLEAN_STOP_SIGNALS

    @classmethod
    def from_returncode(cls, returncode: int, *, stop_requested: bool = False) -> ExitStatus:
        name = None
        if returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"SIG{-returncode}"
        return cls(returncode, name, time.time(), stop_requested)


class SpawnError(Exception):
    """The agent could not be started (internal: the host reports it as an event)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@functools.cache
def pdeathsig_wrapper(search_path: str = SYSTEM_BIN_DIRS) -> tuple[str, ...]:
    """The argv prefix that makes the kernel send SIGTERM to the agent when the host
    dies, or ``()`` when there is none here.

    It is util-linux ``setpriv --pdeathsig SIGTERM --`` (2.33 and later), found in
    ``search_path`` and tried once per process: an older ``setpriv`` rejects the option
    (exit status 1), which would keep every agent from starting.
    """
    setpriv = shutil.which("setpriv", path=search_path)
    if setpriv is None:
        return ()
    prefix = (setpriv, "--pdeathsig", "SIGTERM", "--")
    try:
        probe = subprocess.run(
            [*prefix[:3], "--help"],  # parses --pdeathsig, then prints usage: no exec
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("process.no_pdeathsig", setpriv=setpriv, error=str(exc))
        return ()
    if probe.returncode != 0:
        log.warning("process.no_pdeathsig", setpriv=setpriv, status=probe.returncode)
        return ()
    return prefix


def check_program(name: str, cwd: str | None, env: Mapping[str, str]) -> None:
    """Raise SpawnError as ``execvpe`` would fail to start ``name`` (with ``env``'s
    PATH, from ``cwd``): 127 when it is not found, 126 when it is not executable.

    Behind an exec wrapper the exec failure happens in the child, as an exit status;
    checking first keeps the host's clear "cannot start agent" report.
    """
    if not name:
        raise SpawnError("command not found: (empty command name)", 127)
    found = lookup(name, cwd, env)
    if found.path is not None:
        return
    if found.no_cwd:
        raise SpawnError(f"working directory not found: {cwd}", 127)
    if found.denied:
        raise SpawnError(f"permission denied: {name} (Permission denied)", 126)
    raise SpawnError(f"command not found: {name} (No such file or directory)", 127)


def _ignore(_sig: int, _frame: object) -> None:
    """A handler that does nothing: a caught signal, unlike an ignored one, is reset to
    its default action by exec."""


@contextlib.contextmanager
def _sighup_default_in_child() -> Iterator[None]:
    # The host ignores SIGHUP, and an ignored signal stays ignored across exec: the
    # agent would inherit that. While the agent is spawned, SIGHUP is *caught* (by a
    # handler that does nothing, the same for the host), so exec resets it to the
    # default in the agent. Popen itself restores SIGPIPE and SIGXFSZ.
    try:
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            yield
            return
        signal.signal(signal.SIGHUP, _ignore)
    except ValueError:  # not the main thread: dispositions cannot be changed here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


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
        self._on_output = {STDOUT: on_stdout, STDERR: on_stderr}
        self._on_exit = on_exit
        self._on_stdin_error = on_stdin_error
        self._loop: asyncio.AbstractEventLoop | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.started_at = 0.0
        self._readers: dict[int, int] = {}  # our read fd -> STDOUT/STDERR
        self._stdin: int | None = None
        self._stdin_buf = bytearray()
        self._stdin_eof = False  # close stdin once the buffer is written
        self._pidfd: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_fd: int | None = None
        self._marker = ""  # NAME=VALUE of the run's environment marker, for the watchdog
        self.sweeper: Callable[[float], Awaitable[object]] | None = None
        """Ends the orphans of the agent's tree once it ended (set by a host that is
        their subreaper: :meth:`agenthost.host.reaper.Subreaper.end_escapees`)."""
        self._reaped = False
        self._killed = False  # SIGKILL was sent while the agent still ran
        self._stop_requested = False  # stop() signalled the agent while it still ran
        self._returncode = 0
        self.status: ExitStatus | None = None
        self.sandboxed = False
        """The process is bubblewrap, the agent inside (:mod:`agenthost.sandbox`)."""
        self.terminal_fd: int | None = None
        """The master side of the agent's pseudo-terminal (our writer), or None: pipes."""
        self._done = asyncio.Event()
        self._pipes_done = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        """True from spawn until the agent was reaped."""
        return self._popen is not None and not self._reaped

    def start(
        self,
        argv: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str],
        sandbox: Sandbox | None = None,
        terminal: tuple[int, int] | None = None,
    ) -> int:
        """Spawn the agent (in ``sandbox``, if given); return its pid (bubblewrap's, in a
        sandbox). With ``terminal`` (``(cols, rows)``) the agent gets a pseudo-terminal
        of that size instead of pipes (:mod:`agenthost.host.pty`). Raise SpawnError if it
        cannot start."""
        loop = self._loop = asyncio.get_running_loop()
        wrapper = pdeathsig_wrapper()
        if wrapper or sandbox is not None or terminal is not None:
            check_program(argv[0], cwd, env)
        pass_fds: tuple[int, ...] = ()
        name = argv[0]  # what errors name: the agent's program, not a wrapper's
        ctty: tuple[str, ...] = ()
        if terminal is not None:
            from agenthost.host import pty

            found = pty.controlling_terminal_wrapper(SYSTEM_BIN_DIRS)
            if found is None:
                raise SpawnError("a terminal agent needs util-linux setsid (not found)", 127)
            ctty = found
        if sandbox is not None:
            from agenthost.errors import AgentHostError

            try:  # the controlling terminal is made inside (see _start's own_session)
                launch = sandbox.launch(argv, cwd, env, wrapper=ctty)
            except (AgentHostError, OSError) as exc:
                raise SpawnError(f"cannot confine {argv[0]}: {exc}", 126) from exc
            argv, env, pass_fds = launch.argv, launch.env, launch.pass_fds
            self.sandboxed = True
        else:
            argv = [*ctty, *argv]
        try:
            # A terminal's session is made by its wrapper (setsid), which must not be a
            # process-group leader to make it without a fork (pty.py); in a sandbox,
            # inside it: bubblewrap itself gets a session of its own, as always (never
            # the host's process group, which a signal to the agent's would reach)
            own_session = terminal is None or sandbox is not None
            return self._start(
                loop, name, [*wrapper, *argv], cwd, env, pass_fds, terminal, own_session
            )
        finally:
            _close(*pass_fds)

    def _start(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str,
        argv: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str],
        pass_fds: tuple[int, ...],
        terminal: tuple[int, int] | None,
        own_session: bool,
    ) -> int:
        if terminal is not None:
            from agenthost.host import pty

            # one pseudo-terminal for all three; ours: the master, twice (a reader and
            # a writer are registered on distinct descriptors)
            try:
                master, slave = pty.open_pty(*terminal)
            except OSError as exc:
                raise SpawnError(f"cannot open a pseudo-terminal: {exc.strerror}", 126) from exc
            child_ends: tuple[int, ...] = (slave, slave, slave)
            ours: tuple[int, ...] = (os.dup(master), master)
        else:
            pipes = [os.pipe() for _ in range(3)]  # non-inheritable (PEP 446) until dup'ed
            child_ends = (pipes[0][0], pipes[1][1], pipes[2][1])
            ours = (pipes[0][1], pipes[1][0], pipes[2][0])
        self.terminal_fd = ours[0] if terminal is not None else None
        # its pid is in OWN before a SIGCHLD can reap it as an orphan
        with reaper.starting_own():
            try:
                with _sighup_default_in_child():
                    # No preexec_fn (see the module docstring): Popen then forks with
                    # vfork, and the wrapper sets the death signal after the fork.
                    self._popen = subprocess.Popen(
                        argv,
                        stdin=child_ends[0],
                        stdout=child_ends[1],
                        stderr=child_ends[2],
                        cwd=cwd,
                        env=dict(env),
                        close_fds=True,
                        pass_fds=pass_fds,
                        start_new_session=own_session,
                    )
            except FileNotFoundError as exc:
                _close(*set(child_ends), *ours)
                if cwd is not None and exc.filename == cwd:
                    raise SpawnError(f"working directory not found: {cwd}", 127) from exc
                raise SpawnError(f"command not found: {name} ({exc.strerror})", 127) from exc
            except PermissionError as exc:
                _close(*set(child_ends), *ours)
                raise SpawnError(f"permission denied: {name} ({exc.strerror})", 126) from exc
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                _close(*set(child_ends), *ours)
                raise SpawnError(f"cannot start {name}: {exc}", 127) from exc
            reaper.OWN.add(self._popen.pid)
        _close(*set(child_ends))
        self.pid = self._popen.pid
        marker = env.get(reaper.RUN_MARKER)
        self._marker = f"{reaper.RUN_MARKER}={marker}" if marker else ""
        self.started_at = time.time()
        for fd in ours:
            os.set_blocking(fd, False)
        self._stdin = ours[0]
        self._readers = {fd: stream for fd, stream in zip(ours[1:], (STDOUT, STDERR), strict=False)}
        for fd, stream in self._readers.items():
            loop.add_reader(fd, self._read, fd, stream)
        self._watch_exit(loop)
        self._start_watchdog()
        return self.pid

    def _start_watchdog(self) -> None:
        read_end, self._watchdog_fd = os.pipe()  # ours stays non-inheritable
        try:
            with reaper.starting_own():
                self._watchdog = subprocess.Popen(
                    ["/bin/sh", "-c", _WATCHDOG, str(self.pid), self._marker],
                    stdin=read_end,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    close_fds=True,
                    start_new_session=True,  # not in the agent's group, not tied to ours
                )
                reaper.OWN.add(self._watchdog.pid)
        except OSError as exc:  # pragma: no cover - no /bin/sh
            log.warning("process.no_watchdog", error=str(exc))
            os.close(self._watchdog_fd)
            self._watchdog_fd = None
        finally:
            os.close(read_end)

    def _stop_watchdog(self) -> None:
        # Kill it before closing its pipe: it must never act once the group is gone,
        # when the group id could be reused.
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()
            reaper.OWN.discard(self._watchdog.pid)
            self._watchdog = None
        if self._watchdog_fd is not None:
            os.close(self._watchdog_fd)
            self._watchdog_fd = None

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # pragma: no cover - kernels before 5.3
            self._spawn(self._poll_exit())
            return
        loop.add_reader(self._pidfd, self._check_exit)

    async def _poll_exit(self) -> None:  # pragma: no cover - kernels before 5.3
        while not self._reaped:
            await asyncio.sleep(0.05)
            self._check_exit()

    # --- output ---------------------------------------------------------------------

    def _read(self, fd: int, stream: int) -> None:
        if self.terminal_fd is not None:
            self._read_terminal(fd, stream)
            return
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            log.warning("process.read_failed", stream=stream, error=str(exc))
            data = b""
        if data:
            self._on_output[stream](data)
        else:
            self._close_reader(fd)

    def _read_terminal(self, fd: int, stream: int) -> None:
        # Until the master has nothing more, up to TERMINAL_BATCH: a read that finds
        # the line discipline empty first waits for the kernel to move what the agent
        # already wrote into it, so a flood comes in 64 KiB batches. Each read asks
        # for what is left of the batch: no 256 KiB buffer allocated per 4 KiB read.
        pieces: list[bytes] = []
        size = 0
        end = False
        while size < TERMINAL_BATCH:
            try:
                data = os.read(fd, TERMINAL_BATCH - size)
            except BlockingIOError:
                break
            except OSError as exc:
                # EIO: a pseudo-terminal whose every slave descriptor was closed (its end)
                if exc.errno != errno.EIO:
                    log.warning("process.read_failed", stream=stream, error=str(exc))
                end = True
                break
            if not data:
                end = True
                break
            pieces.append(data)
            size += len(data)
        if pieces:
            self._on_output[stream](pieces[0] if len(pieces) == 1 else b"".join(pieces))
        if end:
            self._close_reader(fd)

    def _close_reader(self, fd: int) -> None:
        if self._readers.pop(fd, None) is None:
            return
        assert self._loop is not None
        self._loop.remove_reader(fd)
        os.close(fd)
        if not self._readers:
            self._pipes_done.set()

    # --- stdin ----------------------------------------------------------------------

    @property
    def stdin_buffered(self) -> int:
        """Bytes written to stdin that the agent has not read yet (our side)."""
        return len(self._stdin_buf)

    @property
    def stdin_open(self) -> bool:
        return self._stdin is not None and not self._stdin_eof and not self._reaped

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the agent's stdin. Raise AgentNotRunning if it is closed."""
        if not self.stdin_open:
            raise AgentNotRunning("the agent is not running or has closed its stdin")
        if self._stdin_buf:
            self._stdin_buf += data
            return
        self._stdin_buf += data
        self._flush_stdin()
        if self._stdin_buf and self._stdin is not None:
            assert self._loop is not None
            self._loop.add_writer(self._stdin, self._flush_stdin)

    def _flush_stdin(self) -> None:
        fd = self._stdin
        if fd is None:
            return
        while self._stdin_buf:
            try:
                written = os.write(fd, self._stdin_buf)
            except BlockingIOError:
                return
            except OSError as exc:
                message = (
                    "the agent closed its stdin"
                    if exc.errno == errno.EPIPE
                    else f"writing to the agent's stdin failed: {exc.strerror}"
                )
                dropped = len(self._stdin_buf)
                self._close_stdin_fd()
                self._on_stdin_error(f"{message}; {dropped} bytes of input were not delivered")
                return
            del self._stdin_buf[:written]
        assert self._loop is not None
        self._loop.remove_writer(fd)
        if self._stdin_eof:
            self._close_stdin_fd()

    def close_stdin(self) -> None:
        """Send end-of-file to the agent (after the queued input)."""
        self._stdin_eof = True
        if not self._stdin_buf:
            self._close_stdin_fd()

    def resize(self, cols: int, rows: int) -> None:
        """Give the agent's pseudo-terminal a new size (the kernel tells its foreground
        process group with SIGWINCH). Nothing without a terminal or once it is closed."""
        if self.terminal_fd is not None and self._stdin is not None:
            from agenthost.host import pty

            with contextlib.suppress(OSError):
                pty.set_size(self.terminal_fd, cols, rows)

    def signal_foreground(self, sig: int) -> bool:
        """Send ``sig`` to the terminal's foreground process group (what a key like
        Ctrl-C does), or the agent's group without a terminal; False if none is left."""
        if self.terminal_fd is not None and self._stdin is not None and not self._reaped:
            try:
                group = os.tcgetpgrp(self.terminal_fd)
            except OSError:
                group = 0
            if group > 0:
                try:
                    os.killpg(group, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                else:
                    return True
        return self.signal_group(sig)

    def _close_stdin_fd(self) -> None:
        fd, self._stdin = self._stdin, None
        self._stdin_buf.clear()
        if fd is not None:
            assert self._loop is not None
            self._loop.remove_writer(fd)
            os.close(fd)

    # --- signals and stop ---------------------------------------------------------------

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the agent's whole process group; False if none is left.

        SIGKILL also goes to every descendant of a still living agent, wherever its
        process group: nothing it started survives a forced kill.
        """
        if not self.pid:
            return False
        if sig == signal.SIGKILL and not self._reaped:
            self._killed = True
            self._kill_descendants()
        if self.terminal_fd is not None and not self._reaped:
            # a terminal agent's session (in a sandbox, a session of its own inside)
            # and the group in its foreground: what a hang-up of its terminal reaches
            for group in self._terminal_groups():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
        if self.sandboxed and not self._reaped:
            # the agent is in the sandbox's own session; bubblewrap's group holds only
            # bubblewrap, which would take the sandbox down at once (no grace)
            from agenthost.sandbox.runner import sandbox_group

            inner = sandbox_group(self.pid)
            if inner is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(inner, sig)
                if sig != signal.SIGKILL:
                    return True
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - a group of another user: not ours
            log.warning("process.signal_denied", pid=self.pid, signal=sig)
            return False
        return True

    def _terminal_groups(self) -> set[int]:
        """The process groups of the terminal's session: its foreground group and its
        session leader's (0 and errors left out: the terminal may be gone)."""
        if self.terminal_fd is None or self._stdin is None:
            return set()
        try:
            foreground = os.tcgetpgrp(self.terminal_fd)
            groups = {foreground, os.getsid(foreground)}
        except OSError:
            return set()
        # never our own group (a terminal between two sessions reports odd values)
        return {group for group in groups if group > 0 and group != os.getpgrp()}

    def _kill_descendants(self) -> None:
        # imported here: a forced kill is rare, and psutil costs a host ~10 ms of CPU
        # at start-up (serve's start-up path is kept short: docs/performance.md)
        import psutil

        try:
            descendants = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        for proc in descendants:
            with contextlib.suppress(psutil.Error):
                proc.kill()

    async def wait(self, timeout: float | None = None) -> ExitStatus | None:
        """Wait for the exit to be reported; None on timeout."""
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return None
        return self.status

    async def exited(self) -> ExitStatus:
        """The exit status, once the exit has been reported."""
        await self._done.wait()
        assert self.status is not None
        return self.status

    async def stop(self, timeout: float, force: bool) -> tuple[ExitStatus, bool]:
        """Stop the agent: SIGTERM to the group, SIGKILL after ``timeout`` seconds.

        Return the exit status and whether it was graceful (exited before SIGKILL was
        needed; never with ``force``).
        """
        if self.status is not None:
            return self.status, not force
        # Once reaped, the agent ended on its own: what stop() signals now are orphans.
        self._stop_requested = self._stop_requested or not self._reaped
        graceful = not force
        if force:
            self.signal_group(signal.SIGKILL)
        else:
            if self.terminal_fd is not None:
                # what closing a terminal window does: an interactive shell ignores
                # SIGTERM but ends on a hang-up, and an editor saves its swap file
                self.signal_group(signal.SIGHUP)
                self.signal_group(signal.SIGCONT)
            self.signal_group(signal.SIGTERM)
            if await self.wait(timeout) is None:
                graceful = False
                log.info("process.escalate", pid=self.pid, timeout=timeout)
                self.signal_group(signal.SIGKILL)
        status = await self.exited()
        # A SIGKILL from elsewhere during the wait (a second SIGTERM to the host, a forced
        # stop joining this one) makes it no more graceful than our own escalation.
        return status, graceful and not self._killed

    # --- exit ----------------------------------------------------------------------------

    def _check_exit(self) -> None:
        if self._reaped or self._popen is None:
            return
        code = self._popen.poll()
        if code is None:
            return
        if self.sandboxed:
            from agenthost.sandbox.runner import exit_code

            code = exit_code(code)
        self._reaped = True
        self._returncode = code
        reaper.OWN.discard(self.pid)
        if self._pidfd is not None:
            assert self._loop is not None
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._spawn(self._wind_down())

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def _wait_group_gone(self, timeout: float) -> None:
        """Wait until no process of the agent's group is left, at most ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.005
        while self._group_alive() and loop.time() < deadline:
            await asyncio.sleep(delay)  # polling: a process group has no descriptor to wait on
            delay = min(delay * 2, 0.05)

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
            # Children that hold none of our pipes close nothing we could wait for: give
            # them the grace too, or SIGKILL followed SIGTERM within a millisecond and a
            # child cleaning up on SIGTERM never could.
            await self._wait_group_gone(ORPHAN_GRACE)
            if self._group_alive():
                log.info("process.orphans", pid=self.pid, signal="SIGKILL")
                self.signal_group(signal.SIGKILL)
                await self._wait_pipes(ORPHAN_GRACE)
        if self.sweeper is not None:  # and what left the group (setsid) and its tree
            await self.sweeper(ORPHAN_GRACE)
        self._finish()

    def _finish(self) -> None:
        if self.status is not None:
            return
        for fd in list(self._readers):  # output after the grace periods is dropped
            self._close_reader(fd)
        self._close_stdin_fd()
        self._stop_watchdog()
        self.status = ExitStatus.from_returncode(
            self._returncode, stop_requested=self._stop_requested
        )
        self._done.set()
        self._on_exit(self.status)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Kill whatever is left and release every descriptor (host shutdown)."""
        if self.running:
            self.signal_group(signal.SIGKILL)
            await self.wait(5)
        for task in list(self._tasks):
            task.cancel()
        for fd in list(self._readers):
            self._close_reader(fd)
        self._close_stdin_fd()
        self._stop_watchdog()
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
