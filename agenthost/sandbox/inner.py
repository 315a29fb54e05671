"""The bridge inside a sandbox: the agent's TCP proxy address, spliced to the proxy's
Unix socket.

Run in front of the agent's command, inside the sandbox::

    python -P -m agenthost.sandbox.inner --listen 127.0.0.1:3128 \\
        --socket /run/agenthost/proxy.sock -- CMD [ARGS...]

Programs speak to proxies over TCP (``HTTP_PROXY``/``HTTPS_PROXY``), and the sandbox's
only way out is the Unix socket of :mod:`agenthost.sandbox.proxy`, bound in. So this
listens on ``--listen`` first (the agent can connect from its first instruction: the
kernel queues connections until they are accepted), then forks: the parent closes the
listening socket and becomes CMD (``execvp``: same pid, same stdin, stdout, stderr),
the child serves the bridge, each TCP connection spliced to a new connection to
``--socket`` (a thread per direction; an end is passed on as a half-close).

The bridge lives as long as the agent and no longer: it watches its parent (the agent)
through a pidfd (``PR_SET_PDEATHSIG`` where pidfds are missing), so it behaves the same
inside a PID namespace, which would end it anyway, and outside one. It ignores the
terminal's and the host's signals (SIGINT, SIGTERM, ...): an agent that handles them
keeps its network. Its stdin and stdout are ``/dev/null`` (it holds none of the
agent's pipes open but stderr, for its own one-line errors).

Exit status before CMD runs: 2 for bad arguments, 125 when the address cannot be
listened on, 126 or 127 when CMD cannot be run (as ``env`` does); then it is CMD's.
It imports little (it starts before every sandboxed agent): no asyncio, no
agenthost modules.
"""

from __future__ import annotations

# The C module under ``socket``: the command's side of the fork needs only to bind and
# listen, and ``socket`` (with the enum module it loads) would double what this costs
# before the command runs. Its sockets are close-on-exec like ``socket``'s.
import _socket as socket
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: it costs more than the rest
if TYPE_CHECKING:
    from typing import NoReturn

PROG = "agenthost sandbox bridge"
USAGE = "--listen HOST:PORT --socket PATH -- CMD [ARGS...]"
CHUNK = 64 * 1024
STACK = 256 * 1024
"""Stack of a splicing thread (it calls nothing deep; the default is 8 MiB)."""
QUIET = ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE")
_TEXT = b"agenthost sandbox bridge: the sandbox's proxy cannot be reached\n"
UNREACHABLE = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_TEXT), _TEXT)
)
"""The answer to a client when the proxy's socket refuses (the host is gone)."""


class UsageError(Exception):
    """Arguments that are not ``--listen HOST:PORT --socket PATH -- CMD ...``."""


def parse(argv: list[str]) -> tuple[tuple[str, int], str, list[str]]:
    """The listen address, the socket path and the command, from ``argv``."""
    options: dict[str, str] = {}
    rest = list(argv)
    while rest and rest[0] != "--":
        arg = rest.pop(0)
        name, sep, value = arg.partition("=")
        if name not in ("--listen", "--socket"):
            raise UsageError(f"unknown argument {arg[:60]!r}")
        if not sep:
            if not rest or rest[0] == "--":
                raise UsageError(f"{name} needs a value")
            value = rest.pop(0)
        if name in options:
            raise UsageError(f"{name} given twice")
        options[name] = value
    if "--listen" not in options or "--socket" not in options:
        raise UsageError("--listen and --socket are required")
    if not rest or len(rest) < 2:
        raise UsageError("no command after '--'")
    if not options["--socket"] or "\0" in options["--socket"]:
        raise UsageError("--socket needs a path")
    return _address(options["--listen"]), options["--socket"], rest[1:]


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isascii() or not port.isdigit():
        raise UsageError(f"--listen wants HOST:PORT, not {text[:60]!r}")
    if not 0 < int(port) < 65536:
        raise UsageError(f"--listen: {port[:10]!r} is not a port")
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        raise UsageError(f"--listen wants an IP address, not {host[:60]!r}") from None
    return host, int(port)


def _fail(message: str, status: int) -> NoReturn:
    try:  # (os.write: sys.stderr is None when fd 2 was closed)
        os.write(2, f"{PROG}: {message}\n".encode(errors="backslashreplace"))
    except OSError:
        pass
    os._exit(status)


def main(argv: list[str] | None = None) -> NoReturn:
    """Listen, fork the bridge, become the command."""
    try:
        (host, port), path, command = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        _fail(f"{exc} (usage: {USAGE})", 2)
    try:
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror}", 125)
    parent = os.getpid()
    if os.fork() == 0:
        try:
            _bridge(listener, path, parent)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        _fail(f"cannot run {command[0]!r}: {exc.strerror}", 127 if exc.errno == 2 else 126)


def _bridge(listener: socket.socket, path: str, parent: int) -> None:
    """Serve until the parent (the agent) ends."""
    import select
    import signal
    import threading  # here: the command's side of the fork never needs them

    for name in QUIET:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # (an agent started with stdin closed has the listener there)
        if fd not in (null, listener.fileno()):
            os.dup2(null, fd)
    if null > 1:
        os.close(null)
    watch = _watch(parent)
    if os.getppid() != parent:  # it ended before we watched it
        return
    threading.stack_size(STACK)
    listener.setblocking(False)
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    if watch is not None:
        poller.register(watch, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == watch:
                return
            try:
                accepted, _ = listener._accept()  # type: ignore[attr-defined]  # _socket's
            except OSError:
                continue  # gone before it was accepted (or out of files: retried)
            client = socket.socket(fileno=accepted)
            client.setblocking(True)
            try:
                threading.Thread(target=_serve, args=(client, path), daemon=True).start()
            except RuntimeError:  # no thread to be had: this connection only fails
                client.close()


def _watch(parent: int) -> int | None:
    """A pidfd of ``parent``; None where there are none (then the kernel kills us when
    it ends: PR_SET_PDEATHSIG)."""
    try:
        return os.pidfd_open(parent)
    except (AttributeError, OSError):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        return None


def _serve(client: socket.socket, path: str) -> None:
    """Splice one TCP connection to a new connection to the proxy's socket."""
    import threading

    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(path)
    except OSError:
        try:
            client.sendall(UNREACHABLE)
        except OSError:
            pass
        client.close()
        upstream.close()
        return
    other = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    other.start()
    _pump(client, upstream)
    other.join()
    client.close()
    upstream.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until its end, then end ``dst``'s writing side. On a
    reset, shut both sockets so that the other direction's thread ends too."""
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


if __name__ == "__main__":
    main()
