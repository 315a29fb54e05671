"""A small blocking client of one host, on the standard library alone (the fast path).

It speaks what :class:`agenthost.client.AsyncClient` speaks on a local socket: the peer
check before anything is sent, a ``host.ping`` first (the version handshake), one
request at a time, responses matched by id, event frames skipped, the client's frame
limit. It knows only hosts of this very package version (the handshake says so):
any other host, and anything unexpected before the verb's own request was sent,
is :class:`NotMine`, and the command then runs the click way, which knows them all.
"""

from __future__ import annotations

import json
import os
import socket
import struct

from agenthost._version import __version__
from agenthost.errors import AgentHostError, NotConnected, ProtocolError, RequestTimeout
from agenthost.wire.framing import CLIENT_FRAME_LIMIT

CONNECT_TIMEOUT = 2.0  # as the click path's client (agenthost.client)
REQUEST_TIMEOUT = 10.0
_READ = 1 << 16
_CRED = struct.Struct("3i")


class NotMine(Exception):
    """The fast path gives the command back to the click path: nothing was sent that
    could change anything (at most a ``host.ping``)."""


class QuickClient:
    """One connection to the host at ``path`` (for messages: ``agent``, its id)."""

    def __init__(
        self,
        path: str,
        agent: str,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        ping: str = "host.ping",
    ) -> None:
        self.path = path
        self.peer = f"the host for agent {agent!r}"
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._ping_type = ping  # (the daemon's is daemon.ping: the same handshake)
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._ids = 0
        self.ping: dict[str, object] = {}
        """The host's answer to the handshake's ping."""

    def __enter__(self) -> QuickClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sock is not None:
            self._sock.close()

    def connect(self) -> None:
        """Connect, check the server's uid and the host's version: Forbidden for a
        server of another user (nothing sent), NotMine for anything but a host of this
        package's version, RequestTimeout when its ping is not answered."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._sock = sock
        sock.settimeout(self.connect_timeout)
        try:
            sock.connect(self.path)
            pid, uid, _ = _CRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
            )
        except OSError as exc:  # (nobody listens, a full backlog, no permission...)
            raise NotMine from exc
        if uid not in (os.getuid(), 0):
            # refused here, nothing sent: a second connection would be one more for it
            from agenthost.errors import foreign_server

            raise foreign_server("host", self.path, pid, uid, os.getuid())
        try:
            ping = self.request(self._ping_type)
        except AgentHostError as exc:
            if isinstance(exc, RequestTimeout):
                raise  # the click path would wait as long, and say the same
            raise NotMine from exc
        if ping.get("version") != __version__:
            raise NotMine  # another version's host: the click path knows its quirks
        self.ping = ping

    def request(self, mtype: str, payload: dict[str, object] | None = None) -> dict[str, object]:
        """Send a request; return the payload of its successful response. Raise the
        error class of a failed response's code, RequestTimeout, NotConnected (the
        connection was lost), ProtocolError (what came is not the protocol)."""
        assert self._sock is not None, "connect first"
        self._ids += 1
        rid = f"c{self._ids}"
        envelope: dict[str, object] = {"type": mtype, "id": rid}
        if payload is not None:
            envelope["payload"] = payload
        self._sock.settimeout(self.request_timeout)
        try:
            self._sock.sendall(json.dumps(envelope, separators=(",", ":")).encode() + b"\n")
        except OSError as exc:
            raise NotConnected(f"cannot write to the host: {exc}") from exc
        response = self._response(mtype)
        if response.get("id") not in (rid, None):
            raise ProtocolError(f"response id {response.get('id')!r} does not match {rid!r}")
        if not response.get("success"):
            from agenthost.errors import error_from_code

            code = response.get("code")
            error = response.get("error") or "request failed"
            raise error_from_code(code if isinstance(code, str) else None, str(error))
        body = response.get("payload")
        return body if isinstance(body, dict) else {}

    def _response(self, mtype: str) -> dict[str, object]:
        while True:
            frame = self._frame(mtype)
            try:
                message = json.loads(frame.decode("utf-8"))
            except (ValueError, RecursionError) as exc:
                raise ProtocolError(f"malformed frame from the host: not JSON ({exc})") from None
            if not isinstance(message, dict):
                kind = type(message).__name__
                raise ProtocolError(f"malformed frame from the host: a JSON {kind}, not an object")
            if message.get("kind", "response" if "success" in message else "event") == "response":
                return message

    def _frame(self, mtype: str) -> bytes:
        assert self._sock is not None
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                frame = bytes(self._buf[:end]).rstrip(b"\r")
                del self._buf[: end + 1]
                if len(frame) > CLIENT_FRAME_LIMIT:
                    raise _too_large(len(frame))
                if frame:
                    return frame
                continue
            if len(self._buf) > CLIENT_FRAME_LIMIT + 1:
                raise _too_large(len(self._buf))
            try:
                data = self._sock.recv(_READ)
            except TimeoutError:
                raise RequestTimeout(
                    f"{self.peer} did not answer {mtype} within {self.request_timeout:g}s",
                    hint="it may be stopped (SIGSTOP) or overloaded; `agenthost list` shows it",
                ) from None
            except OSError as exc:
                raise NotConnected(f"connection lost: {exc}") from exc
            if not data:
                raise NotConnected("the host closed the connection")
            self._buf += data


def _too_large(size: int) -> AgentHostError:
    from agenthost.errors import FrameTooLarge

    return FrameTooLarge(
        f"frame of at least {size} bytes exceeds the limit of {CLIENT_FRAME_LIMIT} bytes"
    )
