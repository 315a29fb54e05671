"""Start a host as a detached background process and wait until it serves.

The host runs in its own session with stdio on ``/dev/null`` and its log file, so it
survives the terminal or the program that started it. Readiness uses the systemd
notification protocol: the child gets ``NOTIFY_SOCKET`` pointing at a private datagram
socket and sends ``READY=1`` once its socket accepts connections, exactly as it would
under ``Type=notify``. No polling of the socket.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost.errors import AgentCannotStart, AgentHostError, ConfigError, HostAlreadyRunning
from agenthost.homefiles import open_checked
from agenthost.hostoptions import HostOptions
from agenthost.lockfile import is_lock_held, read_lock_info
from agenthost.paths import ensure_private_dir, lock_path, log_path, logs_dir, socket_path

if TYPE_CHECKING:
    from agenthost.models import AgentInfo


@dataclass(frozen=True)
class DetachedHost:
    """A host started in the background."""

    agent_id: str
    pid: int
    socket_path: Path
    log_path: Path


class HostStartError(AgentHostError):
    """A detached host exited or did not get ready; ``log_tail`` says why."""

    def __init__(self, message: str, log_tail: str = "", log_name: str = "host") -> None:
        super().__init__(message + (f"\n--- {log_name} log ---\n{log_tail}" if log_tail else ""))
        self.log_tail = log_tail


def spawn_detached(
    options: HostOptions,
    *,
    timeout: float = 15.0,
    env: Mapping[str, str] | None = None,
) -> DetachedHost:
    """Run ``agenthost serve`` with ``options`` in the background.

    ``env`` is the host's environment (default: ours); the agent's own (``options.env``)
    is added to it, never put on the command line. Return once the host is serving;
    raise HostStartError with the end of its log if it exits first (e.g. a host for
    that agent is already running) or is not ready within ``timeout`` seconds (then it
    is killed).
    """
    agent_id, home = options.agent_id, options.home
    if is_lock_held(lock_path(home, agent_id)):
        info = read_lock_info(lock_path(home, agent_id)) or {}
        pid = info.get("pid")
        raise HostAlreadyRunning(
            f"a host for agent {agent_id!r} is already running"
            + (f" (pid {pid})" if isinstance(pid, int) else ""),
            hint=f"stop it first (`agenthost stop {agent_id}`), or choose another --agent-id",
        )
    ensure_private_dir(home)  # refused if another user owns it (the host checks again)
    ensure_private_dir(logs_dir(home))
    log_file = log_path(home, agent_id)
    try:
        pid = start_in_background(
            options.command_line(),
            log_file,
            env={**(os.environ if env is None else env), **options.to_env()},
            timeout=timeout,
            what=f"the host for {agent_id!r}",
        )
    except OSError as exc:
        raise ConfigError(f"cannot start the host: {exc}") from exc
    _check_started(agent_id, home)
    return DetachedHost(agent_id, pid, socket_path(home, agent_id), log_file)


def _check_started(agent_id: str, home: Path) -> None:
    """Raise AgentCannotStart (after stopping the host) if the host that just got
    ready could not spawn its agent: its start is a failure, not a host to keep."""
    from agenthost.client import Client

    with Client(agent_id, home=home) as client:
        failure = start_failure(agent_id, client.status().agent)
        if failure is not None:
            with contextlib.suppress(AgentHostError):  # (ended meanwhile: as good)
                client.stop(force=True, reason="its agent could not be started")
    if failure is not None:
        raise failure


def start_failure(agent_id: str, info: AgentInfo) -> AgentCannotStart | None:
    """The error of a host that serves but could not spawn its agent (``start_error``:
    its program vanished after it was checked, exec refused it), saying how to install
    the program; None when the agent started."""
    if not info.start_error:
        return None
    from agenthost.agents import adapter_class
    from agenthost.agents.base import Adapter
    from agenthost.agents.programs import install_text

    said = f"the host for {agent_id!r} could not start its agent: {info.start_error}"
    if info.start_error.startswith("command not found"):  # (the host's SpawnError)
        name = info.command[0] if info.command else ""
        program = (adapter_class(info.backend or "") or Adapter).program
        said += "; " + install_text(name, program)
    return AgentCannotStart(said)


def open_log(log_file: Path) -> int:
    """A descriptor appending to ``log_file`` (created 0600), which must be the user's
    own (:mod:`agenthost.homefiles`: UntrustedFile); OSError if it cannot be opened."""
    return open_checked(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def start_logged(
    argv: Sequence[str], log_file: Path, *, env: dict[str, str], cwd: str | Path | None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own (it outlives the terminal and the caller),
    stdin on /dev/null and its output appended to ``log_file`` (0600), with only its
    stdio descriptors. Raise OSError if it cannot be started, UntrustedFile if the log
    is not the user's own (another user would read what it says)."""
    fd = open_log(log_file)
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def start_in_background(
    argv: Sequence[str],
    log_file: Path,
    *,
    env: dict[str, str],
    timeout: float,
    what: str,
    log_name: str = "host",
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` in a session of its own, its output appended to ``log_file``
    (0600), and return its pid once it sent ``READY=1`` on a private NOTIFY_SOCKET.

    Raise OSError if it cannot be started, and HostStartError ("WHAT exited ...", with
    the end of what it logged under a ``--- LOG_NAME log ---`` line) if it exits first
    or is not ready within ``timeout`` seconds (then it is killed). Used for hosts
    (``serve --detach``) and for the daemon.
    """
    with ReadyListener() as listener:
        env = {**env, "NOTIFY_SOCKET": listener.address}
        start_offset = log_file.stat().st_size if log_file.exists() else 0
        proc = start_logged(argv, log_file, env=env, cwd=cwd)
        try:
            listener.wait(proc, timeout)
        except HostStartError as exc:
            tail = log_tail(log_file, start_offset)
            raise HostStartError(f"{what} {exc.message}", tail, log_name) from None
    # it runs on: the Popen handle is dropped without a wait, on purpose
    proc.returncode = 0
    return proc.pid


class ReadyListener:
    """A private ``NOTIFY_SOCKET`` on which a child host reports ``READY=1``.

    Use as a context manager; put :attr:`address` into the child's ``NOTIFY_SOCKET``
    and call :meth:`wait` with its Popen handle.
    """

    def __init__(self) -> None:
        name = f"agenthost-notify-{secrets.token_hex(8)}"
        self.address = "@" + name
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.bind("\0" + name)

    def __enter__(self) -> ReadyListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def wait(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """Return when the child said READY=1; raise HostStartError if it exited first
        or did not within ``timeout`` seconds (then it is killed)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.kill()
                proc.wait()
                raise HostStartError(f"was not ready within {timeout:g}s")
            # wake up now and then to notice a child that died without a word
            ready, _, _ = select.select([self._sock], [], [], min(remaining, 0.1))
            if ready:
                message = self._sock.recv(4096).decode(errors="replace")
                if "READY=1" in message.split("\n"):
                    return
            code = proc.poll()
            if code is not None:
                raise HostStartError(f"exited with status {code} before it was ready")


def log_tail(path: Path, offset: int, limit: int = 4000) -> str:
    """The end (``limit`` characters) of what was appended to a log after ``offset``;
    "" when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace").strip()
