"""The interactive side of ``agenthost attach`` on a terminal (prompt_toolkit).

Events scroll above a one-line prompt. The prompt is also the live indicator: a
spinner and the time the agent has been working while it runs, a question when it
waits for a permission. Keys:

* Enter sends the line to the agent (or answers a permission question: ``y`` allows,
  ``n [reason]`` denies).
* Ctrl-C interrupts the agent's current turn (the agent keeps running).
* Ctrl-] detaches, and so does Ctrl-D on an empty line. The agent keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from agenthost.cli.common import Exit
from agenthost.cli.render import Style, fit
from agenthost.cli.session import AttachSession
from agenthost.errors import AgentHostError

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_DETACH = object()


class Terminal:
    """Runs an attach session with a prompt underneath it."""

    def __init__(self, session: AttachSession, style: Style) -> None:
        self.session = session
        self.style = style
        self._since = time.monotonic()
        self._state = session.state
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self) -> Exit:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.formatted_text import ANSI
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.patch_stdout import patch_stdout

        keys = KeyBindings()

        @keys.add("c-c")
        def _interrupt(event: Any) -> None:
            self._spawn(self._interrupt())

        # eager: emacs mode binds "c-] <char>" (search for a character), so without it
        # prompt_toolkit waits for a second key and the keys typed meanwhile are taken
        # as that character and the line to send
        @keys.add("c-]", eager=True)
        def _detach(event: Any) -> None:
            event.app.exit(result=_DETACH)

        @keys.add("c-d")
        def _eof(event: Any) -> None:
            if not event.app.current_buffer.text:
                event.app.exit(result=_DETACH)

        prompt: PromptSession[Any] = PromptSession(key_bindings=keys, erase_when_done=True)
        self.session.on_change = lambda: prompt.app.invalidate() if prompt.app.is_running else None
        follow = asyncio.get_running_loop().create_task(self.session.run())
        with patch_stdout(raw=True):
            try:
                while True:
                    line = asyncio.ensure_future(
                        prompt.prompt_async(lambda: ANSI(self._message()), refresh_interval=0.2)
                    )
                    done, _ = await asyncio.wait(
                        {follow, line}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if follow in done:  # the agent ended, or --no-follow reached the head
                        if prompt.app.is_running:
                            prompt.app.exit(result=_DETACH)
                        with contextlib.suppress(BaseException):
                            await line
                        return follow.result()
                    text = line.result()
                    if text is _DETACH:
                        self.session.note("detached; the agent keeps running")
                        return Exit.OK
                    await self._handle(str(text))
            finally:
                follow.cancel()
                with contextlib.suppress(BaseException):
                    await follow
                for task in list(self._tasks):
                    task.cancel()

    # --- the prompt --------------------------------------------------------------------

    def _message(self) -> str:
        s, session = self.style, self.session
        if session.state != self._state:
            self._state, self._since = session.state, time.monotonic()
        if session.client is None:
            word = "reconnecting…" if session.connected_once else "connecting…"
            return s.yellow(f"{word} ") + "› "
        if session.pending:
            request = next(iter(session.pending.values()))
            what = fit(f"{request.tool_name}({request.tool_input})", 50)
            return s.yellow(f"allow {what}? [y/n] ")
        if session.state == "running":
            elapsed = time.monotonic() - self._since
            frame = SPINNER[int(elapsed * 5) % len(SPINNER)]
            return s.cyan(f"{frame} working {int(elapsed)}s ") + "› "
        return "› "

    async def _handle(self, text: str) -> None:
        session, client = self.session, self.session.client
        text = text.strip()
        if not text:
            return
        if client is None:
            session.note("not connected to the host right now; try again in a moment")
            return
        try:
            if session.pending and text.split()[0].lower() in ("y", "yes", "n", "no"):
                request = next(iter(session.pending.values()))
                allow = text.split()[0].lower() in ("y", "yes")
                reason = text.split(maxsplit=1)[1] if not allow and " " in text else None
                await client.respond(
                    request.request_id, "allow" if allow else "deny", message=reason
                )
            else:
                await client.send(text)
        except AgentHostError as exc:
            session.note(f"cannot send: {exc}", alarm=True)

    async def _interrupt(self) -> None:
        session, client = self.session, self.session.client
        if client is None or session.state not in ("running", "waiting"):
            session.note("nothing to interrupt (Ctrl-] detaches)")
            return
        try:
            result = await client.interrupt()
        except AgentHostError as exc:
            session.note(f"cannot interrupt: {exc}", alarm=True)
            return
        session.note("interrupt sent" if result.sent else "nothing to interrupt")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
