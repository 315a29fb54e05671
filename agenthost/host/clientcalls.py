"""The host performs what an ACP agent asks of its client: files and terminals.

An ACP adapter turns the agent's ``fs/*`` and ``terminal/*`` requests into
:class:`~agenthost.agents.base.ClientCall` events; the stream hands each to
:meth:`ClientCalls.start`, which runs it as a task and reports the outcome through the
``done`` callback (the host gives it to :meth:`Adapter.call_done`, which answers the
agent). Paths are confined to the agent's working directory (:mod:`.confine`).

- ``fs/read_text_file``: a regular file of at most :data:`MAX_READ_BYTES`, decoded as
  UTF-8 (invalid bytes replaced), optionally a slice of its lines.
- ``fs/write_text_file``: written atomically (a temporary file in the same directory,
  then a rename), keeping an existing file's mode; missing parent directories are
  created (they are inside the working directory, as the path is).
- ``terminal/*``: a command run like the agent itself (:class:`AgentProcess`: its own
  process group, no stray descriptors, killed with its group if the host dies), stdin
  from ``/dev/null``, stdout and stderr merged, the newest ``outputByteLimit`` bytes
  kept. Terminals are killed and reaped when the agent exits or the host closes. A
  sandboxed agent's terminals run in a sandbox of the same profile and bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import os
import shutil
import signal
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from agenthost.acp import schema
from agenthost.agents.base import CallFailed, ClientCall
from agenthost.agents.streamjson import clip
from agenthost.host.confine import (
    MAX_READ_BYTES,
    MAX_TERMINALS,
    CallRefused,
    Confinement,
    OutputBuffer,
    args_param,
    count_param,
    env_param,
    needs_shell,
    output_limit,
    slice_lines,
    text_param,
)
from agenthost.host.process import AgentProcess, ExitStatus, SpawnError, check_program

if TYPE_CHECKING:
    from agenthost.sandbox.runner import Sandbox

log = structlog.get_logger("agenthost.clientcalls")

Done = Callable[[str, dict[str, Any] | None, CallFailed | None], None]
"""``done(call_id, result, failure)``: one of ``result`` and ``failure`` is None."""

MAX_PENDING: Final = 256
"""Calls in progress at once; more are refused (a storm must not grow without bound)."""
SHELL: Final = "/bin/sh"
# Run by /bin/sh in front of every terminal command: stderr joins stdout in one pipe (so
# the two keep their order) and stdin is /dev/null; then the command replaces the shell
# (same pid). "$1" is always an absolute path, so it cannot be taken for an option.
_MERGE: Final = 'exec 2>&1 </dev/null; exec "$@"'


@dataclass(eq=False)
class Terminal:
    """One command the agent started, and what it printed."""

    terminal_id: str
    process: AgentProcess
    output: OutputBuffer


class ClientCalls:
    """The fs and terminal calls of one agent (see the module docstring)."""

    def __init__(
        self,
        worktree: str,
        done: Done,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.confinement = Confinement(worktree)
        self.sandbox = sandbox
        """The agent's sandbox: its terminals run in one like it (the same bounds), or
        an ACP agent would escape by asking its client to run a command."""
        self.done = done
        self.env: Mapping[str, str] = env if env is not None else {}
        """The agent's environment: terminals get it plus what the agent gives."""
        self.terminals: dict[str, Terminal] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._releasing: set[Terminal] = set()  # released, not reaped yet
        self._ids = itertools.count(1)
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            schema.FS_READ: self._read,
            schema.FS_WRITE: self._write,
            schema.TERMINAL_CREATE: self._create,
            schema.TERMINAL_OUTPUT: self._output,
            schema.TERMINAL_WAIT: self._wait,
            schema.TERMINAL_KILL: self._kill,
            schema.TERMINAL_RELEASE: self._release,
        }

    @property
    def pending(self) -> int:
        """Calls in progress."""
        return len(self._tasks)

    def start(self, call: ClientCall) -> None:
        """Run ``call`` as a task; its outcome goes to ``done``. Never raises."""
        if self._closed:
            self._report(call.call_id, None, CallFailed("the agent's host is closing"))
            return
        if len(self._tasks) >= MAX_PENDING:
            failure = CallFailed(f"too many calls in progress (at most {MAX_PENDING})")
            self._report(call.call_id, None, failure)
            return
        task = asyncio.get_running_loop().create_task(self._run(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, call: ClientCall) -> None:
        method = self._methods.get(call.method)
        result: dict[str, Any] | None = None
        failure: CallFailed | None = None
        try:
            if method is None:
                raise CallRefused(f"{clip(call.method)} is not supported by this client")
            if not isinstance(call.params, dict):
                raise CallRefused("params must be an object", bad_params=True)
            result = await method(call.params)
        except CallRefused as exc:
            failure = exc.failure()
            log.info("client_call.refused", method=clip(call.method), reason=exc.message)
        except Exception as exc:  # a bug must cost one answer, not the agent's session
            log.exception("client_call.failed", method=call.method)
            failure = CallFailed(f"the host failed to do {call.method}: {exc!r}")
        self._report(call.call_id, result, failure)

    def _report(
        self, call_id: str, result: dict[str, Any] | None, failure: CallFailed | None
    ) -> None:
        try:
            self.done(call_id, result, failure)
        except Exception:  # the callback's bug: logged, and the other calls go on
            log.exception("client_call.done_failed", call_id=call_id)

    async def aclose(self) -> None:
        """Cancel the calls in progress, kill every terminal's process group and reap
        it (the agent exited, or the host closes). Later calls are refused. Calling it
        again waits for the same work; cancelling a caller does not stop the work."""
        self._closed = True
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._close_all())
        await asyncio.shield(self._close_task)

    async def _close_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        terminals = [*self.terminals.values(), *self._releasing]
        self.terminals.clear()
        for terminal in terminals:  # all at once, before waiting for any
            _kill_group(terminal)
        await asyncio.gather(*(_end(t) for t in terminals), return_exceptions=True)
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- files ------------------------------------------------------------------------

    async def _read(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self.confinement.resolve(params.get("path"))
        line = count_param(params, "line")
        limit = count_param(params, "limit")
        text = await asyncio.to_thread(_read_text, path)
        return {"content": slice_lines(text, line, limit)}

    async def _write(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self.confinement.resolve(params.get("path"))
        content = text_param(params, "content")
        try:
            data = content.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800" in the JSON)
            raise CallRefused("content is not valid Unicode", bad_params=True) from exc
        await asyncio.to_thread(_write_atomic, path, data, self.confinement)
        return {}

    # --- terminals --------------------------------------------------------------------

    async def _create(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._spawn_terminal(params)

    def _spawn_terminal(self, params: dict[str, Any]) -> dict[str, Any]:
        # Synchronous, like the agent's own spawn: a few stat calls, then fork and exec.
        command = text_param(params, "command")
        if not command or "\0" in command:
            raise CallRefused(
                "command must be a non-empty string without NUL bytes", bad_params=True
            )
        args = args_param(params)
        cwd = self.confinement.root
        if params.get("cwd") is not None:
            cwd = self.confinement.resolve(params["cwd"], "cwd")
        if not os.path.isdir(cwd):
            raise CallRefused(f"cwd is not a directory: {clip(cwd)}", not_found=True)
        env = {**self.env, **env_param(params)}
        limit = output_limit(count_param(params, "outputByteLimit"))
        if len(self.terminals) >= MAX_TERMINALS:
            raise CallRefused(
                f"too many terminals: {len(self.terminals)} are held (at most "
                f"{MAX_TERMINALS}); release the ones you are done with"
            )
        if needs_shell(command, args):
            argv = [SHELL, "-c", command]
        else:
            argv = [_program(command, cwd, env), *args]
        buffer = OutputBuffer(limit)
        process = AgentProcess(buffer.feed, buffer.feed, _ignore_exit, _ignore_stdin_error)
        try:
            pid = process.start([SHELL, "-c", _MERGE, "sh", *argv], cwd, env, self.sandbox)
        except SpawnError as exc:
            raise CallRefused(f"cannot start {clip(command)}: {exc}") from exc
        process.close_stdin()  # its stdin is /dev/null: nothing is written to this pipe
        terminal_id = f"term-{next(self._ids)}"
        self.terminals[terminal_id] = Terminal(terminal_id, process, buffer)
        log.info("terminal.created", terminal_id=terminal_id, pid=pid, argv0=clip(argv[0]))
        return {"terminalId": terminal_id}

    def _terminal(self, params: dict[str, Any]) -> Terminal:
        terminal_id = params.get("terminalId")
        terminal = self.terminals.get(terminal_id) if isinstance(terminal_id, str) else None
        if terminal is None:
            raise CallRefused(
                f"no terminal {clip(str(terminal_id))}: never created, or released",
                not_found=True,
            )
        return terminal

    async def _output(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)
        status = terminal.process.status  # set once the output was drained
        result: dict[str, Any] = {
            "output": terminal.output.text(final=status is not None),
            "truncated": terminal.output.truncated,
        }
        if status is not None:
            result["exitStatus"] = exit_status(status)
        return result

    async def _wait(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)
        return exit_status(await terminal.process.exited())

    async def _kill(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)  # it stays: its output and status can be read
        if terminal.process.status is None:
            _kill_group(terminal)
            log.info("terminal.killed", terminal_id=terminal.terminal_id)
        return {}

    async def _release(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)
        del self.terminals[terminal.terminal_id]
        self._releasing.add(terminal)  # aclose() still reaps it if this is cancelled
        try:
            await _end(terminal)
        finally:
            self._releasing.discard(terminal)
        log.info("terminal.released", terminal_id=terminal.terminal_id)
        return {}


def _kill_group(terminal: Terminal) -> None:
    """SIGKILL to the terminal's process group, children that outlived it included,
    until its end was reported (after that, the group id may name someone else's)."""
    if terminal.process.status is None:
        terminal.process.signal_group(signal.SIGKILL)


async def _end(terminal: Terminal) -> None:
    """Kill what is left of the terminal's command, reap it, close its descriptors."""
    _kill_group(terminal)
    await terminal.process.aclose()


def exit_status(status: ExitStatus) -> dict[str, Any]:
    """ACP's ``{exitCode, signal}``: a death by signal has no exit code."""
    code = status.exit_code if status.exit_code >= 0 else None
    return {"exitCode": code, "signal": status.signal}


def _program(command: str, cwd: str, env: Mapping[str, str]) -> str:
    """The absolute path of the program ``command`` names, found as ``execvpe`` would
    (``env``'s PATH, relative names from ``cwd``); CallRefused when there is none."""
    try:
        check_program(command, cwd, env)  # its messages say what is wrong
    except SpawnError as exc:
        raise CallRefused(str(exc)) from exc
    if "/" in command:
        return os.path.join(cwd, command)
    dirs = os.pathsep.join(os.path.join(cwd, d) for d in os.get_exec_path(dict(env)))
    found = shutil.which(command, path=dirs)
    if found is None:  # pragma: no cover - check_program found it a moment ago
        raise CallRefused(f"command not found: {clip(command)}", not_found=True)
    return found


def _ignore_exit(_status: ExitStatus) -> None:
    """A terminal's exit is read from its process (``exited()``, ``status``)."""


def _ignore_stdin_error(_message: str) -> None:
    """Nothing is ever written to a terminal's stdin."""


# --- file I/O (run in a thread) -----------------------------------------------------------


def _refusal(path: str, exc: OSError) -> CallRefused:
    """What an OS error on ``path`` means to the agent."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return CallRefused(f"file not found: {clip(path)}", not_found=True)
    if exc.errno == errno.EISDIR:
        return CallRefused(f"is a directory: {clip(path)}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return CallRefused(f"permission denied: {clip(path)}")
    return CallRefused(f"{clip(path)}: {exc.strerror or exc}")


def _read_text(path: str) -> str:
    """The text of the regular file at ``path`` (resolved, confined), at most
    MAX_READ_BYTES. Opened without blocking: a FIFO must not hang a worker thread."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    try:
        info = os.fstat(fd)
        _require_file(path, info.st_mode)
        if info.st_size > MAX_READ_BYTES:
            raise CallRefused(_too_big(path, info.st_size))
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_READ_BYTES:  # it may grow while read: read one byte more
            chunk = os.read(fd, MAX_READ_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    finally:
        os.close(fd)
    if size > MAX_READ_BYTES:
        raise CallRefused(_too_big(path, size))
    return b"".join(chunks).decode("utf-8", "replace")


def _require_file(path: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise CallRefused(f"is a directory: {clip(path)}")
    if not stat.S_ISREG(mode):
        raise CallRefused(f"not a regular file: {clip(path)}")


def _too_big(path: str, size: int) -> str:
    return (
        f"{clip(path)} is too big to read whole ({size} bytes, at most {MAX_READ_BYTES}): "
        "read it in parts with line and limit, or with a command"
    )


def _write_atomic(path: str, data: bytes, confinement: Confinement) -> None:
    """Replace the file at ``path`` with ``data`` (a temporary file, then a rename in the
    same directory): readers see the old content or the new, never a part."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise _refusal(path, exc) from exc
    else:
        _require_file(path, info.st_mode)
        mode = stat.S_IMODE(info.st_mode)
    parent = os.path.dirname(path)
    if not confinement.contains(parent):  # the root itself cannot be written as a file
        raise CallRefused(f"cannot write the working directory itself: {clip(path)}")
    try:
        os.makedirs(parent, exist_ok=True)
        # tempfile.mkstemp's way, without importing tempfile (and random) into every host
        temp = os.path.join(parent, f".{os.path.basename(path)[:64]}.{os.urandom(6).hex()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise _refusal(parent, exc) from exc
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())  # the rename must not publish an empty file after a crash
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise _refusal(path, exc) from exc


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, and another
    thread could create a file in that instant)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
