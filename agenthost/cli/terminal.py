"""The interactive side of ``agenthost attach`` on a terminal (prompt_toolkit).

Events scroll above a one-line prompt. The prompt is also the live indicator: a
spinner and the time the agent has been working while it runs, a question when it
waits for a permission. Keys:

* Enter sends the line to the agent (or answers a permission question: ``y`` allows,
  ``n [reason]`` denies, ``a`` or ``always`` allows it and the same tool and command
  for the rest of the session).
* Ctrl-C interrupts the agent's current turn (the agent keeps running). An agent
  without turns (``lines``) is interrupted by SIGINT to its processes, which usually
  ends it: there the first Ctrl-C only says so, and a second one within
  :data:`CONFIRM_WINDOW` seconds sends it.
* Ctrl-] (or the key ``--detach-key`` names) detaches, and so does Ctrl-D on an
  empty line. The agent keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Final

from wcwidth import wcswidth

from agenthost.cli.common import Exit
from agenthost.cli.render import Style
from agenthost.cli.session import AttachSession
from agenthost.errors import AgentHostError
from agenthost.terminal.keys import DEFAULT_DETACH_KEY, ControlKey, parse_detach_key
from agenthost.textsafe import escape

DETACH_KEY: Final = parse_detach_key(DEFAULT_DETACH_KEY)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_DETACH = object()
CONFIRM_WINDOW = 2.0  # seconds within which a second Ctrl-C confirms a SIGINT
RUNNING = ("running", "waiting")  # states with something to interrupt
_ANSWERS = frozenset({"y", "yes", "n", "no", "a", "always"})  # to a permission question
QUESTION_ROOM = 50
"""Columns a tool and its command may take in the prompt's question; a longer command
(or one of several lines) is named by its request id: the session showed it above,
whole (a command to approve is never cut)."""


class Terminal:
    """Runs an attach session with a prompt underneath it."""

    def __init__(
        self,
        session: AttachSession,
        style: Style,
        *,
        clock: Callable[[], float] = time.monotonic,
        detach_key: ControlKey = DETACH_KEY,
    ) -> None:
        self.session = session
        self.detach_key = detach_key
        self.style = style
        self._clock = clock  # for the Ctrl-C confirmation window (a UI timeout)
        self._armed: float | None = None  # when a Ctrl-C asked for confirmation
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
            if self.interrupt_now():
                self._spawn(self._interrupt())

        # eager: emacs mode binds "c-] <char>" (search for a character), so without it
        # prompt_toolkit waits for a second key and the keys typed meanwhile are taken
        # as that character and the line to send
        @keys.add(self.detach_key.prompt_key, eager=True)
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
                        self.session.detached()
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
            command = request.approval_text()
            what = escape(f"{request.tool_name}({command})")
            if "\n" in command or wcswidth(what) > QUESTION_ROOM:
                what = escape(f"{request.tool_name} {request.request_id} (shown above)")
            return s.yellow(f"allow {what}? [y/n/a(lways)] ")
        if session.state == "running" and not session.interrupt_signals:
            # a turn under way (a plain program, --agent lines, has no turns: it "runs"
            # for as long as it lives, and a spinner would turn for ever)
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
            word = text.split()[0].lower()
            if session.pending and word in _ANSWERS:
                request = next(iter(session.pending.values()))
                allow = word not in ("n", "no")
                reason = text.split(maxsplit=1)[1] if not allow and " " in text else None
                await client.respond(
                    request.request_id,
                    "allow" if allow else "deny",
                    message=reason,
                    actor="terminal",
                    remember="session" if word in ("a", "always") else None,
                )
            else:
                await client.send(text)
        except AgentHostError as exc:
            session.note(f"cannot send: {exc}", alarm=True)  # (note() escapes)

    def interrupt_now(self) -> bool:
        """Whether this Ctrl-C interrupts now. Where the interrupt is a SIGINT to the
        agent's processes (which usually kills it), the first Ctrl-C only says how to
        send it; a second one within CONFIRM_WINDOW seconds does."""
        session = self.session
        if not session.interrupt_signals or session.client is None:
            return True
        if session.state not in RUNNING:
            return True  # nothing to interrupt: _interrupt says so
        now = self._clock()
        if self._armed is not None and now - self._armed <= CONFIRM_WINDOW:
            self._armed = None
            return True
        self._armed = now
        session.note(
            f"Ctrl-C again within {CONFIRM_WINDOW:g} s sends SIGINT to the agent's "
            f"processes ({self.detach_key.label} detaches)"
        )
        return False

    async def _interrupt(self) -> None:
        session, client = self.session, self.session.client
        if client is None or session.state not in RUNNING:
            session.note(f"nothing to interrupt ({self.detach_key.label} detaches)")
            return
        # said before it goes: the turn's end may come back before the answer does
        if session.interrupt_signals:
            session.note("sending SIGINT to the agent's processes")
        else:
            session.note("sending an interrupt")
        try:
            result = await client.interrupt()
        except AgentHostError as exc:
            session.note(f"cannot interrupt: {exc}", alarm=True)
            return
        if not result.sent:
            session.note("nothing was running to interrupt")
        elif result.deferred:
            session.note("the agent gets the interrupt as soon as it can take one")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
