"""The host factory: a pre-imported process that forks hosts.

A host started by exec spends most of its start-up importing Python modules and
building pydantic models, and keeps them in pages of its own. The factory pays that
once: it is forked from the daemon's command before any event loop or thread exists,
imports everything a host needs (:data:`PRELOAD`), freezes the garbage collector, and
then, per :class:`~agenthost.hostfactory.messages.Order`, forks a host that shares all
of it copy-on-write:

* double fork: a middle child calls ``setsid`` and forks the host, then exits, so the
  host is in a session and a process group of its own and is nobody's session leader.
  It outlives the factory and the daemon. The factory is a child subreaper: the
  orphaned host is re-parented to it, and it reaps it (and reports its status) while it
  lives; after the factory, init does.
* the host starts from a clean slate: stdin on ``/dev/null``, stdout and stderr on its
  log, no other descriptor of the daemon or the factory, exactly the environment of the
  order, its own working directory, process title (``ps`` shows ``agenthost serve
  ...`` as for an exec'd host) and random state; its event loop is created by
  ``serve`` after the fork, as in any host.
* then it runs the very ``agenthost serve`` command an exec'd host runs, with the same
  arguments: the two are the same program to clients, to discovery and to the log.

Never fork a process with a thread or a running event loop (:func:`check_forkable`):
locks held by another thread at the fork stay locked forever in the child.

Failure injection for tests: ``AGENTHOST_FACTORY_FAILPOINT=after-fork`` in the factory's
environment makes it kill itself with SIGKILL once a host is forked and before it
answers (the daemon then has a host it did not hear of).
"""

from __future__ import annotations

import gc
import importlib
import os
import random
import select
import signal
import socket
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Final

from agenthost.homefiles import open_checked
from agenthost.hostfactory.messages import (
    MAX_MESSAGE,
    Exited,
    Order,
    Refused,
    Reply,
    Started,
    decode_order,
    encode,
)

PRELOAD: Final = (
    "uvloop",
    "setproctitle",
    "agenthost.cli",
    "agenthost.cli.serve",
    "agenthost.host.host",
    "agenthost.host.run",
    "agenthost.journal.reader",
    "agenthost.host.clientcalls",
    "agenthost.host.budgets",
    "agenthost.host.pauses",
    "psutil",
)
"""What a host imports on its way to serving, imported once in the factory, with every
adapter's module (:func:`preload_modules`): a host of any kind starts from shared pages."""


def preload_modules() -> tuple[str, ...]:
    """:data:`PRELOAD` and the module of every agent kind (the adapters' own table, so
    that a new kind is preloaded without being listed here)."""
    from agenthost.agents import adapter_modules

    return (*PRELOAD, *adapter_modules())


FAILPOINT_ENV: Final = "AGENTHOST_FACTORY_FAILPOINT"
_PR_SET_CHILD_SUBREAPER: Final = 36
_EXIT_SOFTWARE: Final = 70  # sysexits EX_SOFTWARE: the forked host failed unexpectedly


@dataclass(frozen=True, slots=True)
class FactoryProcess:
    """A started factory, as its parent sees it: its pid and the parent's end of the
    socket pair (hand both to :class:`~agenthost.hostfactory.handle.Factory`)."""

    pid: int
    sock: socket.socket


def check_forkable() -> None:
    """Raise RuntimeError if this process has another thread or a running event loop."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1 or threading.active_count() != 1:
        raise RuntimeError(f"will not fork a process with {threads} threads")
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and asyncio.events._get_running_loop() is not None:
        raise RuntimeError("will not fork a process with a running event loop")


def start_factory() -> FactoryProcess:
    """Fork the host factory from this process (no thread, no running loop).

    Return at once: the factory imports the host's modules in the background. It ends
    when the returned socket is closed (the daemon exits, however it exits).
    """
    check_forkable()
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    _flush_stdio()
    pid = os.fork()
    if pid == 0:  # the factory
        code = _EXIT_SOFTWARE
        try:
            parent.close()
            code = serve_factory(child)
        except BaseException:
            traceback.print_exc()
        finally:
            _flush_stdio()
            os._exit(code)
    child.close()
    return FactoryProcess(pid, parent)


def serve_factory(sock: socket.socket) -> int:
    """Be the host factory on ``sock`` (this process: no thread, no loop) until the
    other end closes; the exit code. Closes every other descriptor first."""
    sock.setblocking(True)
    return _Factory(sock).serve()


class _Factory:
    """The factory's loop: orders in, hosts out, exits reported."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.hosts: set[int] = set()
        # only our socket and stdio: nothing of the daemon (its lock!) stays open here
        keep = sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, _max_fd())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # the daemon's terminal signals are the daemon's: we end with its socket
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _set_child_subreaper()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, _ignore_signal)
        signal.set_wakeup_fd(self.wake_w)
        import setproctitle

        # first (ps must not show the daemon's command line for the factory longer than
        # it has to); this also readies setproctitle while our environment is the one we
        # started with: it could not find room for a host's title once it is replaced
        setproctitle.setproctitle(f"agenthost host-factory (daemon {os.getppid()})")
        for name in preload_modules():
            importlib.import_module(name)
        _warm_up()
        # everything imported lives as long as every host: keep it out of the
        # collector's generations, so that no collection writes to the shared pages
        gc.freeze()

    def serve(self) -> int:
        """Carry out orders until the daemon closes its end; return the exit code."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        poller.register(self.wake_r, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == self.wake_r:
                    _drain(self.wake_r)
                    self._reap()
                    continue
                data = self.sock.recv(MAX_MESSAGE + 1)
                if not data:  # the daemon is gone
                    return 0
                self._carry_out(data)

    def _carry_out(self, data: bytes) -> None:
        try:
            order = decode_order(data)
        except Exception as exc:  # what the daemon sent is not an order: say so, go on
            self._send(Refused(str(exc)))
            return
        try:
            pid = self._fork_host(order)
        except (OSError, RuntimeError) as exc:
            self._send(Refused(f"cannot fork a host: {exc}"))
            return
        self.hosts.add(pid)
        if os.environ.get(FAILPOINT_ENV) == "after-fork":
            os.kill(os.getpid(), signal.SIGKILL)
        self._send(Started(pid))

    def _send(self, message: Reply) -> None:
        self.sock.sendall(encode(message))

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.hosts:  # (orphaned agents come here too: reaped, not reported)
                self.hosts.discard(pid)
                self._send(Exited(pid, os.waitstatus_to_exitcode(status)))

    def _fork_host(self, order: Order) -> int:
        check_forkable()
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        _flush_stdio()
        middle = os.fork()
        if middle == 0:
            code = _EXIT_SOFTWARE
            try:
                os.close(read_end)
                os.setsid()
                host = os.fork()
                if host == 0:
                    self._become_host(order, write_end)  # never returns
                os.write(write_end, str(host).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        try:
            answer = _read_all(read_end)
        finally:
            os.close(read_end)
            os.waitpid(middle, 0)
        if not answer:
            raise OSError("the host's process could not be created")
        return int(answer)

    def _become_host(self, order: Order, report_fd: int) -> None:
        """In the forked host: leave the factory behind, then run ``serve``."""
        code = _EXIT_SOFTWARE
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.sock.close()
            for fd in (self.wake_r, self.wake_w, report_fd):
                os.close(fd)
            os.setpgid(0, 0)  # its own group, like an exec'd host (killpg(pid) works)
            _redirect_stdio(order.log)
            os.closerange(3, _max_fd())
            os.environ.clear()
            os.environ.update(order.env)
            os.chdir(order.cwd)
            import setproctitle

            setproctitle.setproctitle(order.title)
            random.seed()  # (the random module reseeds after fork too: cheap insurance)
            code = _run_serve(order.argv)
        except BaseException:
            traceback.print_exc()
        finally:
            _flush_stdio()
            os._exit(code)


def _warm_up() -> None:
    """Do now, once, what every host would otherwise do for itself on its way up or at
    its first request: build the protocol's models (they are built when first used),
    probe for ``setpriv --pdeathsig`` (a subprocess)."""
    from agenthost.host.process import pdeathsig_wrapper
    from agenthost.protocol import build_models

    build_models()
    pdeathsig_wrapper()


def _run_serve(argv: tuple[str, ...]) -> int:
    """``agenthost serve ARGV`` in this process, as ``python -m agenthost`` runs it."""
    from agenthost.cli import cli

    sys.argv = [sys.argv[0], "serve", *argv]
    try:
        cli.main(args=["serve", *argv], prog_name="agenthost")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _redirect_stdio(log: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    out = open_checked(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # never another's
    for source, target in ((null, 0), (out, 1), (out, 2)):
        os.dup2(source, target)
    os.close(null)
    os.close(out)


def _set_child_subreaper() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _ignore_signal(signum: int, frame: object) -> None:
    """A Python handler, so that SIGCHLD reaches the wake-up pipe (SIG_IGN would not)."""


def _max_fd() -> int:
    limit = os.sysconf("SC_OPEN_MAX")
    return limit if limit > 0 else 1 << 20


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 64):
        chunks.append(chunk)
    return b"".join(chunks)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
