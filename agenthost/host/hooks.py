"""The host's hook socket: where a terminal agent's CLI hooks report (docs/terminal.md).

:class:`HookServer` listens on a Unix socket in the host's private directory. Each
connection is one hook call (:mod:`agenthost.terminal.hook`): one JSON line in,
``{"token", "kind", "payload"}``, one JSON line out, ``{"output": ...}``. The handler it
is given, ``on_hook(kind, payload)``, returns what the hook prints (a permission
decision) or None (nothing: the CLI decides itself). A deciding hook may wait for a
person: many calls run at once, and a call whose hook goes away (the CLI killed it)
has its handler cancelled, so the host learns the request was withdrawn.

Security: the token is per agent run and compared in constant time; a wrong one gets
the connection closed with no answer. The socket is created 0600 in a directory that
must be 0700 and ours. Frames are capped at 1 MiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from agenthost.errors import ConfigError

log = structlog.get_logger("agenthost.hooks")

MAX_FRAME = 1 << 20
"""The longest request line (a hook payload with a large tool input fits)."""

OnHook = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


class HookServer:
    """A Unix socket server for one agent's hooks. ``async with`` it, or call
    :meth:`start` and :meth:`close`."""

    def __init__(self, path: str | Path, token: str, on_hook: OnHook) -> None:
        if not token:
            raise ConfigError("a hook server needs a token")
        self.path = Path(path)
        self._token = token.encode()
        self._on_hook = on_hook
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind the socket (0600, in a 0700 directory of ours) and serve."""
        parent = self.path.parent
        try:
            info = parent.stat()
        except OSError as exc:
            raise ConfigError(f"the hook socket's directory {parent}: {exc.strerror}") from exc
        if stat.S_IMODE(info.st_mode) & 0o077 or info.st_uid != os.geteuid():
            raise ConfigError(f"the hook socket's directory {parent} must be private (0700, ours)")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a socket left by a host that died
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._connected, path=str(self.path), limit=MAX_FRAME
            )
        except OSError as exc:
            raise ConfigError(f"cannot listen on {self.path}: {exc.strerror}") from exc
        finally:
            os.umask(old)

    async def close(self) -> None:
        """Stop serving, cancel the calls in flight (their hooks fall back to the CLI's
        own prompt) and remove the socket."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def __aenter__(self) -> HookServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def calls_in_flight(self) -> int:
        """How many hook calls are connected now."""
        return len(self._tasks)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # asyncio runs each connection in a task of its own: keep it, to cancel at close
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            await self._call(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # close() ends the call; its task ends here (asyncio's stream callback
            # would log a cancelled connection task as an error)
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _call(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            await self._reply(writer, {"error": f"frame over {MAX_FRAME} bytes"})
            return
        except asyncio.IncompleteReadError as exc:
            line = exc.partial  # a last line without its newline
            if not line:
                return
        try:
            request = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            await self._reply(writer, {"error": "not a JSON line"})
            return
        token = request.get("token") if isinstance(request, dict) else None
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
            log.warning("hook.refused", reason="token")
            return  # closed with no answer: nothing to learn for a guesser
        kind, payload = request.get("kind"), request.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            await self._reply(writer, {"error": "kind must be a string, payload an object"})
            return
        handler = asyncio.ensure_future(self._on_hook(kind, payload))
        gone = asyncio.ensure_future(reader.read(1))  # EOF: the hook went away
        try:
            await asyncio.wait({handler, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not handler.done():
                handler.cancel()  # the hook is gone, or we are closing
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await handler
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await gone
        if handler.cancelled():
            return
        failure = handler.exception()
        if failure is not None:
            log.warning("hook.failed", kind=kind, error=repr(failure))
            await self._reply(writer, {"error": f"the host could not handle it: {failure}"})
            return
        await self._reply(writer, {"output": handler.result()})

    async def _reply(self, writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
