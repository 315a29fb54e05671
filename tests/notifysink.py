"""A real HTTP server on 127.0.0.1 that records what notification channels send.

Each request's method, path, headers and body is kept; the answer is ``status`` (200
unless told), or none at all while ``hang`` is set (a slow endpoint). Waiting for
requests uses :func:`hosttools.wait_for` with a deadline, never a sleep.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hosttools import wait_for


@dataclass(frozen=True)
class Received:
    """One request the sink got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Sink:
    """The server and what it received."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.status = 200
        self.hang = threading.Event()
        self.hanging = 0
        self._release = threading.Event()
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with sink._lock:
                    sink.received.append(
                        Received("POST", self.path, {k: v for k, v in self.headers.items()}, body)
                    )
                if sink.hang.is_set():
                    with sink._lock:
                        sink.hanging += 1
                    sink._release.wait()
                    return
                self.send_response(sink.status)
                text = b"" if sink.status < 300 else b"sink says no"
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait(self, count: int, path: str | None = None) -> list[Received]:
        """The requests (to ``path``) once there are at least ``count``."""

        def enough() -> list[Received] | None:
            got = self.of(path)
            return got if len(got) >= count else None

        return wait_for(enough, what=f"{count} request(s) at the sink ({path or 'any path'})")

    def of(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received if path is None or r.path == path]

    def close(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def sink() -> Iterator[Sink]:
    """A running sink, closed at the end."""
    server = Sink()
    try:
        yield server
    finally:
        server.close()


def ntfy_actions(header: str) -> dict[str, str]:
    """ntfy's ``Actions`` header (``http, LABEL, URL, method=POST, clear=true; ...``)
    as label -> URL: the buttons of a phone's notice."""
    out = {}
    for action in header.split(";"):
        kind, label, url, *options = (part.strip() for part in action.split(","))
        assert kind == "http" and "method=POST" in options
        out[label] = url
    return out


def closed_port() -> int:
    """A port of 127.0.0.1 nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
