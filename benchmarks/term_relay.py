"""The floor for terminal agents: a minimal relay from a pseudo-terminal to N clients.

No JSON, no offsets, no ring, no emulator: it owns a pseudo-terminal, runs COMMAND on
its slave side, reads the master and writes each read, as is, to every Unix-socket
client with a blocking ``sendall`` (the slowest client paces everybody, which a real
host must not allow). It shows what moving a terminal's bytes costs in Python on this
machine.

``term_relay.py --socket PATH --clients N --size COLSxROWS -- COMMAND...``: listen on
PATH, accept N clients, start COMMAND in the terminal, print ``READY`` on stdout, then
relay until the terminal closes (or the process is killed).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import struct
import subprocess
import sys
import termios

from relay import listen, relay


def main(argv: list[str] | None = None) -> int:
    """Run the relay (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--clients", type=int, default=1, help="clients to wait for")
    parser.add_argument("--size", default="80x24", help="the terminal's COLSxROWS")
    parser.add_argument("command", nargs="+", help="the program to run in the terminal")
    args = parser.parse_args(argv)
    cols, rows = (int(n) for n in args.size.split("x"))
    server = listen(args.socket, args.clients)
    clients = [server.accept()[0] for _ in range(args.clients)]
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    agent = subprocess.Popen(
        args.command, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    print("READY", flush=True)
    try:
        relay(master, clients)
    finally:
        for sock in clients:
            sock.close()
        server.close()
        os.unlink(args.socket)
        agent.kill()
        agent.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
