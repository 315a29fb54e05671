"""``python -m agenthost.hostfactory --fd N``: a host factory started by exec.

The daemon forks its factory before it has an event loop; a program that cannot (it
already runs a loop or threads, as a test runner does) execs this instead, handing over
its end of a ``SOCK_SEQPACKET`` socket pair as descriptor ``N`` (``pass_fds``).
"""

from __future__ import annotations

import argparse
import socket
import sys

from agenthost.hostfactory.process import serve_factory


def main(argv: list[str] | None = None) -> int:
    """Serve orders on the inherited socket until it closes; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m agenthost.hostfactory")
    parser.add_argument("--fd", type=int, required=True, help="the inherited socket")
    args = parser.parse_args(argv)
    try:
        sock = socket.socket(fileno=args.fd)
    except OSError as exc:
        parser.error(f"--fd {args.fd}: {exc}")
    if sock.type != socket.SOCK_SEQPACKET or sock.family != socket.AF_UNIX:
        parser.error(f"--fd {args.fd} is not an AF_UNIX SOCK_SEQPACKET socket")
    return serve_factory(sock)


if __name__ == "__main__":
    sys.exit(main())
