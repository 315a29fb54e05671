"""The baseline: a minimal relay from an agent's stdout to N Unix-socket clients.

No JSON, no offsets, no ring, no per-client queue: it reads the agent's stdout in
64 KiB chunks and writes each chunk, as is, to every client with a blocking
``sendall`` (so the slowest client paces everybody, which a real host must not allow).
It shows what moving the same bytes costs in Python on this machine, so the host's
figures can be read as a ratio to it.

``relay.py --socket PATH --clients N --trigger LINE -- COMMAND...``: start COMMAND,
listen on PATH, print ``READY`` on stdout, accept N clients, write LINE to the agent's
stdin and close it, relay until the agent closes its stdout, then print
``{"cpu_s": ...}`` (CPU time spent relaying) and exit.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import subprocess
import sys
import time

CHUNK = 1 << 16


def relay(fd: int, clients: list[socket.socket]) -> int:
    """Copy everything readable from ``fd`` (a pipe, or a pseudo-terminal's master) to
    every client; return the bytes read."""
    total = 0
    while True:
        try:
            data = os.read(fd, CHUNK)
        except OSError as exc:  # a master's EIO: every slave descriptor is closed
            if exc.errno != errno.EIO:
                raise
            return total
        if not data:
            return total
        total += len(data)
        for sock in clients:
            sock.sendall(data)


def listen(path: str, clients: int) -> socket.socket:
    """A Unix socket listening at ``path`` for ``clients``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(clients)
    return server


def main(argv: list[str] | None = None) -> int:
    """Run the relay (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--clients", type=int, default=1, help="clients to wait for")
    parser.add_argument("--trigger", default="", help="line written to the agent's stdin")
    parser.add_argument("command", nargs="+", help="the agent command")
    args = parser.parse_args(argv)
    agent = subprocess.Popen(args.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    server = listen(args.socket, args.clients)
    print("READY", flush=True)
    clients = [server.accept()[0] for _ in range(args.clients)]
    agent.stdin.write(args.trigger.encode() + b"\n")
    agent.stdin.close()
    cpu = time.process_time()
    try:
        relay(agent.stdout.fileno(), clients)
        cpu = time.process_time() - cpu
    finally:
        for sock in clients:
            sock.close()
        server.close()
        os.unlink(args.socket)
        agent.wait()
    print(json.dumps({"cpu_s": round(cpu, 4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
