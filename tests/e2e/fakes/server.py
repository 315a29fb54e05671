"""What the fake model APIs share: the HTTP server's life cycle, the reply queue, and
the request log.

A fake is a :class:`FakeServer` (standard library only): it serves on 127.0.0.1 and a
free port from a daemon thread, plays queued scripted replies in order (a default one
once the queue is empty, so a test that forgot a reply fails on its assertions rather
than hanging), and records every request under one condition variable that waiters
wake on. Each fake keeps its own request type, handler and URL shape; its handler
derives from :class:`FakeHandler` for reading bodies and writing (chunked) answers.
"""

from __future__ import annotations

import gzip
import json
import select
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

__all__ = ["FakeHTTPServer", "FakeHandler", "FakeServer"]

ReplyT = TypeVar("ReplyT")
RequestT = TypeVar("RequestT")


class FakeHTTPServer(ThreadingHTTPServer):
    """The listening server; ``fake`` is the :class:`FakeServer` it answers for."""

    daemon_threads = True
    allow_reuse_address = True
    fake: FakeServer[Any, Any]


class FakeHandler(BaseHTTPRequestHandler, Generic[RequestT]):
    """HTTP/1.1 plumbing shared by the fakes' handlers: body reading, request recording,
    complete and chunked answers, and noticing a client that went away."""

    protocol_version = "HTTP/1.1"
    server: FakeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        """Silence the default stderr access log (requests are recorded instead)."""

    def send_body(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send a complete response with a Content-Length."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def write_chunk(self, data: bytes) -> bool:
        """Write one HTTP chunk; False (and the connection marked closed) on failure."""
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def wait_open(self, seconds: float) -> bool:
        """Wait up to ``seconds``; return False as soon as the peer closes the socket."""
        sock: socket.socket = self.connection
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            try:
                readable, _, _ = select.select([sock], [], [], left)
            except (OSError, ValueError):  # the socket is already closed
                readable = [sock]
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    self.close_connection = True
                    return False
                # The client sent more bytes (a pipelined request): keep waiting.
                time.sleep(min(left, 0.01))  # not a synchronisation: avoid a busy loop

    def _read_body(self) -> bytes:
        """The request body, de-chunked and decompressed (gzip, deflate)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            raw = self.rfile.read(length)
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        else:
            raw = b""
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        return raw

    def _parse(self, raw: bytes) -> Any:
        """The body as recorded: its JSON, or None (empty or not JSON)."""
        if raw:
            try:
                return json.loads(raw)
            except ValueError:
                pass
        return None

    def _record(self) -> RequestT:
        """Read the body and record the request with the fake."""
        raw = self._read_body()
        body = self._parse(raw)
        fake = self.server.fake
        return cast(RequestT, fake._record(self.command, self.path, dict(self.headers), raw, body))


class FakeServer(Generic[ReplyT, RequestT]):
    """A fake API server on 127.0.0.1 (a context manager), its replies and its log.

    Subclasses set ``name`` (the thread's name and the prefix of timeout messages),
    ``server_type``, ``handler_type`` and ``url_path``, and build their request records
    in :meth:`_new_request`.
    """

    name: ClassVar[str] = "fake-api"
    server_type: ClassVar[type[FakeHTTPServer]] = FakeHTTPServer
    handler_type: ClassVar[type[FakeHandler[Any]]] = FakeHandler
    url_path: ClassVar[str] = ""
    """What :attr:`url` adds after the host and port (e.g. ``/v1``)."""

    def __init__(self, replies: Iterable[ReplyT], default: ReplyT) -> None:
        # One condition guards the queue and the log; an RLock, so predicates given to
        # wait_until may read the properties that take it again.
        self._cond = threading.Condition()
        self._replies: deque[ReplyT] = deque(replies)
        self._default = default
        self._requests: list[RequestT] = []
        self._server: FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread (idempotent)."""
        if self._server is None:
            server = self.server_type(("127.0.0.1", 0), self.handler_type)
            server.fake = self
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},  # a quick shutdown
                name=self.name,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        if self._server is None:
            raise RuntimeError(f"{self.name}: the server is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL the agent is pointed at."""
        return f"http://127.0.0.1:{self.port}{self.url_path}"

    # -- scripted replies --------------------------------------------------------------

    def add(self, *replies: ReplyT) -> None:
        """Queue more replies (at any time, also while serving)."""
        with self._cond:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """How many queued replies have not been played yet."""
        with self._cond:
            return len(self._replies)

    def _next_reply(self) -> ReplyT:
        """The next queued reply, or the default one when the queue is empty."""
        with self._cond:
            return self._replies.popleft() if self._replies else self._default

    # -- recorded requests -------------------------------------------------------------

    def _new_request(
        self, index: int, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> RequestT:
        """The record of the ``index``-th request (0-based); called under the lock."""
        raise NotImplementedError

    def _record(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> RequestT:
        """Log a request that just arrived and wake the waiters."""
        with self._cond:
            request = self._new_request(len(self._requests), method, path, headers, raw, body)
            self._requests.append(request)
            self._cond.notify_all()
            return request

    def _changed(self) -> None:
        """Wake the waiters: a recorded request changed (e.g. its answer ended)."""
        with self._cond:
            self._cond.notify_all()

    @property
    def requests(self) -> list[RequestT]:
        """Every request received so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    def wait_until(
        self,
        predicate: Callable[[Self], object],
        timeout: float,
        what: str | Callable[[], str] = "condition",
    ) -> None:
        """Block until ``predicate(self)`` holds (re-checked on every request and every
        change to one); raise TimeoutError after ``timeout`` seconds, saying ``what``
        (a callable is asked then, to describe what was seen)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    said = what() if callable(what) else what
                    raise TimeoutError(
                        f"{self.name}: timed out after {timeout}s waiting for {said}"
                    )
                self._cond.wait(min(left, 0.1))
