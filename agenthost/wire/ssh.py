"""Connections over SSH: a client's socket whose other end is ``ssh ... agenthost
bridge`` (asyncio).

:class:`SshLink` is the opener a :class:`~agenthost.wire.client.ClientCore` takes for a
remote: it starts the user's ``ssh`` (:meth:`Remote.ssh_argv
<agenthost.remote.Remote.ssh_argv>`) with its stdin and stdout both the child end of a
``socketpair``, and gives the core the other end, so the protocol's bytes go through
ssh unchanged and the core's peer check (a socket of this user) holds. When the
connection ends, the ssh exit status and the end of its stderr say why
(:func:`agenthost.remote.exit_error`). Closing our end makes ssh see EOF, which the
remote ``agenthost bridge`` turns into a half-close of its connection: a stream there
(an attach, a watch) would go on, so a closed connection also ends its ssh (SIGTERM,
then SIGKILL if it lingers), which ends the remote bridge as a dropped link does.

:func:`run_remote` runs one remote command to its end (``agenthost list --json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from agenthost.errors import AgentHostError, HostNotFound, NotConnected, RemoteError
from agenthost.remote import STDERR_KEPT, Remote, cannot_run, exit_error

EXIT_WAIT: Final = 5.0
"""Seconds a connection that ended waits for ssh's exit status (it exits right after
its channel closed), and a closed connection waits for ssh to go after SIGTERM before
killing it."""
_CHUNK: Final = 1 << 16


class SshLink:
    """Opens connections to ``agenthost *remote_args`` on ``remote`` through ssh, one
    ssh process per connection (see the module docstring).

    ``target`` names what is reached in messages (``"agent 'a1'"``, ``"the daemon"``);
    ``not_found`` makes the error of the remote's "no host answers" exit; ``env`` is
    where $AGENTHOST_SSH and $AGENTHOST_REMOTE_COMMAND are read (default: ours).
    """

    def __init__(
        self,
        remote: Remote,
        remote_args: Sequence[str],
        *,
        target: str,
        not_found: Callable[..., AgentHostError] = HostNotFound,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.remote = remote
        self.argv = remote.ssh_argv(remote_args, env)
        self.target = target
        self._not_found = not_found
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        """The pid of the ssh process of the current connection (None when none)."""
        return self._proc.pid if self._proc is not None else None

    async def open(self) -> socket.socket:
        """Start ssh; return our end of its stdio (connected at once: what is written
        waits in the socket until ssh has reached the remote). Raise RemoteError when
        ssh cannot be started."""
        await self.close()  # a connection opened again: the previous ssh goes first
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=theirs.fileno(),
                stdout=theirs.fileno(),
                stderr=asyncio.subprocess.PIPE,
                # our lifetime rules ssh's: not the terminal's Ctrl-C (a client ends its
                # stream in order), and our end closing (even by a crash) ends ssh
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise cannot_run(self.remote, self.argv[0], exc.strerror or str(exc)) from exc
        finally:
            theirs.close()
        self._stderr = bytearray()
        self._stderr_task = asyncio.get_running_loop().create_task(self._read_stderr(self._proc))
        return ours

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        with contextlib.suppress(OSError):
            while data := await proc.stderr.read(_CHUNK):
                self._stderr += data
                if len(self._stderr) > 2 * STDERR_KEPT:  # bounded: the tail says why
                    del self._stderr[:-STDERR_KEPT]

    async def ended(self, error: AgentHostError) -> AgentHostError:
        """Why the connection ended: ``error`` (what the client core saw) unless ssh's
        exit says more (ssh failed, no agenthost there, no such host there)."""
        proc = self._proc
        if proc is None or not isinstance(error, NotConnected):
            return error  # (a frame that broke the protocol: ssh is still there)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), EXIT_WAIT)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), EXIT_WAIT)
        better = exit_error(
            self.remote,
            proc.returncode,
            bytes(self._stderr),
            target=self.target,
            not_found=self._not_found,
        )
        if better is not None:
            return better
        if not isinstance(error, RemoteError):
            how = _how_ended(proc.returncode)
            return NotConnected(f"the connection to {self.target} on {self.remote} ended ({how})")
        return error

    async def close(self) -> None:
        """End and reap the current ssh (our end of the socket is already closed by the
        client core). Raises nothing.

        ssh passes our close on as a mere EOF, after which the remote bridge still
        relays what the service sends: a stream would keep ssh and the bridge for ever.
        The client wants nothing more, so ssh is ended (SIGTERM, SIGKILL if it
        lingers); the remote sshd then closes the bridge's stdio and it exits.
        """
        proc, self._proc = self._proc, None
        task, self._stderr_task = self._stderr_task, None
        if proc is not None:
            await _end(proc)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _end(proc: asyncio.subprocess.Process) -> None:
    for stop in (proc.terminate, proc.kill):
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), EXIT_WAIT)


def _how_ended(status: int | None) -> str:
    if status is None:
        return "ssh still running"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"ssh was killed by {name}"
    return "the remote closed it"


async def run_remote(
    remote: Remote,
    remote_args: Sequence[str],
    *,
    timeout: float,
    limit: int = 64 << 20,
    target: str = "it",
    env: Mapping[str, str] | None = None,
) -> bytes:
    """Run ``agenthost *remote_args`` on ``remote`` to its end; return its stdout.

    Raise RemoteError when ssh fails, agenthost is not there, it fails, it prints more
    than ``limit`` bytes, or it has not finished within ``timeout`` seconds (it is
    killed then).
    """
    argv = remote.ssh_argv(remote_args, env)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise cannot_run(remote, argv[0], exc.strerror or str(exc)) from exc
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()

    async def read(stream: asyncio.StreamReader, into: bytearray, cap: int) -> None:
        while data := await stream.read(_CHUNK):
            into += data
            if len(into) > cap:
                raise RemoteError(f"{remote} printed more than {cap} bytes for {target}")

    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(
                read(proc.stdout, out, limit), read(proc.stderr, err, 4 * STDERR_KEPT)
            )
            await proc.wait()
    except TimeoutError:
        raise RemoteError(f"{remote} did not answer {target} within {timeout:g}s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    failure = exit_error(remote, proc.returncode, bytes(err), target=target)
    if failure is not None:
        raise failure
    if proc.returncode != 0:
        raise RemoteError(f"ssh to {remote} ended with status {proc.returncode} for {target}")
    return bytes(out)


__all__ = ["EXIT_WAIT", "SshLink", "run_remote"]
