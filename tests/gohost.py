"""A fake host of protocol 1.0 as first published (the reference Go host), for tests.

It serves a real Unix socket at ``<home>/hosts/<agent_id>.sock`` from an asyncio loop
in a thread, and speaks as that host does:

* no ``kind`` on any frame: responses are ``{"type", "id", "success", "error"?,
  "payload"?}`` (``omitempty`` as Go writes it), events are the bare StreamEvent;
* ``host.ping`` reports protocol ``1.0`` and no ``min_protocol_version``;
* ``host.send`` answers a success without payload (no ``offset``);
* errors are strings without ``code`` (``unknown message type: host.interrupt``);
* timestamps are Go's ``time.Time`` (nanoseconds, a local zone offset), durations
  Go's ``1m2.5s``;
* ``chat_entry`` events carry the entry with Go's field names (``Role``,
  ``Content``), as a ``json:",omitempty"`` ``any`` holding an untagged struct would.

``send`` makes a scripted turn: the user entry, ``running``, an output line, the
assistant's answer ``echo: <text>``, ``idle``. ``inject`` writes raw bytes to every
connection (garbage tests). Nothing here sleeps: :meth:`start` returns once the socket
listens, and waits use conditions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

GO_TIME = "2025-03-01T14:00:00.123456789+01:00"
"""What Go's encoding/json writes for a time.Time: RFC 3339 with nanoseconds."""


class FakeGoHost:
    """A 1.0 host as published, serving one agent on a real socket."""

    def __init__(self, home: Path, agent_id: str = "g1") -> None:
        self.home = home
        self.agent_id = agent_id
        self.socket_path = home / "hosts" / f"{agent_id}.sock"
        self.requests: list[dict[str, Any]] = []
        """Every request envelope received, in order (read under ``lock``)."""
        self.lock = threading.Lock()
        self.state = "idle"
        self._events: list[dict[str, Any]] = []
        self._history: list[dict[str, Any]] = []
        self._attached: set[asyncio.StreamWriter] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None

    # --- life -----------------------------------------------------------------------

    def start(self) -> FakeGoHost:
        """Listen, and return once the socket accepts connections."""
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="fake-go-host", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake 1.0 host did not start")
        return self

    def close(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeGoHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_unix_server(self._serve, self.socket_path)
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()

    # --- from the test's thread -------------------------------------------------------

    def inject(self, raw: bytes) -> None:
        """Write ``raw`` as is to every open connection."""
        assert self._loop is not None

        def write() -> None:
            for writer in self._writers:
                writer.write(raw)

        self._loop.call_soon_threadsafe(write)

    def request_types(self) -> list[str]:
        """The ``type`` of every request received so far."""
        with self.lock:
            return [str(r.get("type")) for r in self.requests]

    # --- serving ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            async for line in _lines(reader):
                request = json.loads(line)
                with self.lock:
                    self.requests.append(request)
                self._handle(request, writer)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._attached.discard(writer)
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()

    def _handle(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        mtype = request.get("type", "")
        payload = request.get("payload") or {}
        reply: dict[str, Any] = {"type": mtype}
        if request.get("id"):
            reply["id"] = request["id"]
        if mtype == "host.ping":
            reply |= _ok(
                {
                    "version": "0.4.2",
                    "protocol_version": "1.0",
                    "uptime": "1m2.5s",
                    "started_at": GO_TIME,
                }
            )
        elif mtype == "host.status":
            reply |= _ok({"host": self._host_info(), "agent": self._agent_info()})
        elif mtype == "host.list":
            reply |= _ok({"agents": [self._agent_info()]})
        elif mtype == "host.history":
            limit = payload.get("limit", 0)
            entries = self._history[-limit:] if limit else self._history
            reply |= _ok(
                {
                    "agent_id": self.agent_id,
                    "entries": entries,
                    "offset": len(self._events),
                    "total": len(self._history),
                }
            )
        elif mtype == "host.send":
            reply |= {"success": True}  # no payload: this host reports no offset
            writer.write(_frame(reply))
            self._turn(str(payload.get("input", "")))
            return
        elif mtype == "host.attach":
            offset = payload.get("offset", 0)
            reply |= _ok({"agent_id": self.agent_id, "stream_offset": len(self._events)})
            writer.write(_frame(reply))
            writer.write(b"".join(_frame(e) for e in self._events if e["offset"] > offset))
            self._attached.add(writer)
            return
        elif mtype == "host.detach":
            self._attached.discard(writer)
            reply |= {"success": True}
        elif mtype == "host.stop":
            self.state = "done"
            self._emit({"type": "state", "state": "done"})
            reply |= _ok(
                {"stopped": True, "graceful": True, "duration": "1.2s", "final_state": "done"}
            )
        else:
            reply |= {"success": False, "error": f"unknown message type: {mtype}"}
        writer.write(_frame(reply))

    def _turn(self, text: str) -> None:
        self._chat("user", text)
        self.state = "running"
        self._emit({"type": "state", "state": "running"})
        self._emit({"type": "output", "data": f'{{"type":"assistant","text":"echo: {text}"}}'})
        self._chat("assistant", f"echo: {text}")
        self.state = "idle"
        self._emit({"type": "state", "state": "idle"})

    def _chat(self, role: str, content: str) -> None:
        # history entries are tagged (lower case); the event's entry is an untagged
        # struct inside an ``any``: Go's field names
        self._history.append({"role": role, "content": content, "timestamp": GO_TIME})
        self._emit(
            {
                "type": "chat_entry",
                "chat_entry": {"Role": role, "Content": content, "Timestamp": GO_TIME},
            }
        )

    def _emit(self, fields: dict[str, Any]) -> None:
        event = {
            "type": fields["type"],
            "agent_id": self.agent_id,
            "offset": len(self._events) + 1,
            "timestamp": GO_TIME,
            **{k: v for k, v in fields.items() if k != "type"},
        }
        self._events.append(event)
        for writer in self._attached:
            writer.write(_frame(event))

    def _host_info(self) -> dict[str, Any]:
        return {
            "pid": 4242,
            "version": "0.4.2",
            "protocol_version": "1.0",
            "started_at": GO_TIME,
            "socket_path": str(self.socket_path),
        }

    def _agent_info(self) -> dict[str, Any]:
        return {
            "id": self.agent_id,
            "project": "go",
            "state": self.state,
            "pid": 4243,
            "worktree": "/src/go",
            "started_at": GO_TIME,
            "backend": "claude",
        }


def _ok(payload: dict[str, Any]) -> dict[str, Any]:
    return {"success": True, "payload": payload}


def _frame(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


async def _lines(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while line := await reader.readline():
        if line.strip():
            yield line
