"""Run real ACP agents (Claude's and Codex's ACP adapters, Gemini CLI) against fake APIs.

Each agent gets a clean, explicit environment (nothing of the caller's but ``PATH`` and
the locale): a private ``HOME``, ``TMPDIR`` and XDG tree, the fake API's address on
127.0.0.1, a dummy key, telemetry and update checks off, and every other HTTP(S) request
sent to a proxy address that refuses connections. :func:`agent_command` gives the argv
and the environment of one agent; :class:`AcpAgent` runs it and speaks ACP to it with the
official SDK (``import acp``) as the client, recording every JSON-RPC message both ways.

Usage::

    with FakeAnthropic([text("hi")]) as api, agent_dirs() as dirs:
        argv, env = agent_command("claude", api.url, dirs)
        async with AcpAgent(argv, env, dirs.work) as agent:
            await agent.start()
            await agent.prompt("Say hi.")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clis
import psutil
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from claude_env import ClaudeDirs, claude_env
from clis import ensure_cli
from codex_env import config_toml
from fakes import anthropic, gemini, openai
from fakes.anthropic import FakeAnthropic
from fakes.gemini import FakeGemini
from fakes.openai import FakeOpenAI
from fakes.server import FakeServer

JsonDict = dict[str, Any]

AGENTS = ("claude", "codex", "gemini")
"""The three real ACP agents, by the name tests use."""

CLI_OF = {"claude": "claude-acp", "codex": "codex-acp", "gemini": "gemini"}
"""Their packages in clis.PACKAGES."""

REFUSING_PROXY = "http://127.0.0.1:9"
GEMINI_MODEL = "gemini-2.5-flash"
CODEX_API_KEY = "sk-fake-agenthost-e2e"
GEMINI_API_KEY = "fake-gemini-key"

COMMAND = "echo hello | tee approved.txt"
"""The shell command tests script; written through ``tee`` so a test can tell whether
it really ran (``approved.txt`` exists)."""
LONG = "word " * 60
"""A long answer, for streams slow enough to cancel."""

# Variables of the caller passed on (everything else is dropped: a developer's API
# keys, proxies, IS_SANDBOX=yes, CI variables never reach an agent).
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class AgentDirs:
    """The private directories of one agent run, all under ``root`` (short: /tmp)."""

    root: Path
    home: Path
    work: Path
    tmp: Path


@contextmanager
def agent_dirs() -> Iterator[AgentDirs]:
    """Fresh private directories (HOME, the worktree, TMPDIR), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="acp-e2e-", dir="/tmp"))
    dirs = AgentDirs(root, root / "home", root / "work", root / "tmp")
    for path in (dirs.home, dirs.work, dirs.tmp):
        path.mkdir(mode=0o700)
    (dirs.work / "README.md").write_text("agenthost ACP e2e worktree\n")
    try:
        yield dirs
    finally:
        shutil.rmtree(root, ignore_errors=True)


def base_env(dirs: AgentDirs) -> dict[str, str]:
    """What every agent gets: PATH and locale, private dirs, no route to the internet."""
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        {
            "HOME": str(dirs.home),
            "TMPDIR": str(dirs.tmp),
            "XDG_CONFIG_HOME": str(dirs.home / ".config"),
            "XDG_CACHE_HOME": str(dirs.home / ".cache"),
            "XDG_DATA_HOME": str(dirs.home / ".local" / "share"),
            "XDG_STATE_HOME": str(dirs.home / ".local" / "state"),
            "NO_COLOR": "1",
            "NO_BROWSER": "1",
        }
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = REFUSING_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def claude_acp_env(base_url: str, dirs: AgentDirs) -> dict[str, str]:
    """Claude's ACP adapter: the stream-json CLI's hermetic variables, plus ours.

    ``IS_SANDBOX=1`` lets the adapter offer its bypass mode as root (with ``yes`` it
    refuses to start as root); the tests never choose that mode.
    """
    env = base_env(dirs)
    env.update(claude_env(base_url, ClaudeDirs(dirs.root, dirs.home, dirs.work, dirs.tmp)))
    env.update({"IS_SANDBOX": "1", "CLAUDE_CODE_MAX_RETRIES": "0"})
    return env


def codex_acp_env(base_url: str, dirs: AgentDirs, approval_policy: str = "never") -> dict[str, str]:
    """Codex's ACP adapter: a CODEX_HOME whose config selects the fake provider.

    The adapter runs the ``codex app-server`` of its own dependency with this
    environment, so the config of the Codex e2e tests applies as it is.
    """
    env = base_env(dirs)
    codex_home = dirs.root / "codex-home"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        config_toml(base_url, approval_policy=approval_policy, sandbox_mode="workspace-write")
    )
    env.update(
        {
            "CODEX_HOME": str(codex_home),
            "FAKE_OPENAI_API_KEY": CODEX_API_KEY,
            "RUST_LOG": "warn",
        }
    )
    return env


#: ~/.gemini/settings.json: nothing that reaches another host, no trust dialog.
GEMINI_SETTINGS: JsonDict = {
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "checkpointing": {}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {
        "auth": {"selectedType": "gemini-api-key"},
        "folderTrust": {"enabled": False},
    },
    "model": {"name": GEMINI_MODEL},
    "ui": {"hideTips": True},
}


def gemini_env(base_url: str, dirs: AgentDirs) -> dict[str, str]:
    """Gemini CLI: the fake Gemini API as ``GOOGLE_GEMINI_BASE_URL``, an API key."""
    env = base_env(dirs)
    settings = dirs.home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(GEMINI_SETTINGS, indent=2))
    env.update(
        {
            "GEMINI_API_KEY": GEMINI_API_KEY,
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "GEMINI_SANDBOX": "false",
        }
    )
    return env


def agent_command(
    name: str, base_url: str, dirs: AgentDirs, **options: Any
) -> tuple[list[str], dict[str, str]]:
    """The argv and the complete environment of agent ``name`` (one of :data:`AGENTS`).

    Installs the agent's package on first use (clis.CliUnavailable when it cannot).
    """
    binary = str(ensure_cli(CLI_OF[name]))
    if name == "claude":
        return [binary], claude_acp_env(base_url, dirs)
    if name == "codex":
        return [binary], codex_acp_env(base_url, dirs, **options)
    if name == "gemini":
        return [binary, "--acp", "--model", GEMINI_MODEL], gemini_env(base_url, dirs)
    raise ValueError(f"unknown ACP agent {name!r}")


__all__ = [
    "AGENTS",
    "KITS",
    "AcpAgent",
    "AgentDirs",
    "AgentKit",
    "PermissionAsk",
    "agent_command",
    "agent_dirs",
    "clock_prefix",
]


# --------------------------------------------------------------------------- the client


@dataclass
class PermissionAsk:
    """One ``session/request_permission`` the agent sent; answer it once."""

    session_id: str
    tool_call: JsonDict
    options: list[JsonDict]
    answer: asyncio.Future[RequestPermissionResponse] = field(repr=False)

    def option(self, kind: str) -> JsonDict:
        """The first option of this ``kind`` (allow_once, reject_once, ...)."""
        for option in self.options:
            if option["kind"] == kind:
                return option
        raise AssertionError(f"no {kind} option in {self.options}")

    def choose(self, kind: str) -> str:
        """Answer with the option of this kind; its id."""
        option_id = str(self.option(kind)["optionId"])
        self.answer.set_result(
            RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=option_id)
            )
        )
        return option_id

    def cancel(self) -> None:
        """Answer ``cancelled`` (what a client owes every open request after a cancel)."""
        if not self.answer.done():
            self.answer.set_result(
                RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
            )


class _Client:
    """The SDK client side: records updates, queues permission requests for the test."""

    def __init__(self, agent: AcpAgent) -> None:
        self._agent = agent

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        loop = asyncio.get_running_loop()
        ask = PermissionAsk(
            session_id,
            tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
            [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in options],
            loop.create_future(),
        )
        self._agent.asks.append(ask)
        self._agent._changed()
        return await ask.answer

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # the raw notifications are recorded by the observer

    def on_connect(self, conn: Any) -> None:
        return None

    async def ext_method(self, method: str, params: JsonDict) -> JsonDict:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: JsonDict) -> None:
        return None


class AcpAgent:
    """A real ACP agent process spoken to by the SDK's client connection.

    Every JSON-RPC message is kept in :attr:`messages` (``(direction, message)``, in
    order; direction ``in`` = from the agent). Permission requests land in :attr:`asks`
    and wait for the test to answer. Leaving the ``async with`` kills the agent's process
    group and every process below it (Codex starts commands in sessions of their own).
    """

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.messages: list[tuple[str, JsonDict]] = []
        self.stderr: list[str] = []
        self.asks: list[PermissionAsk] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.conn: ClientSideConnection | None = None
        self.session_id = ""
        self.init: JsonDict = {}
        self._change = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stderr_task: asyncio.Task[None] | None = None

    # -- process

    async def __aenter__(self) -> AcpAgent:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=str(self.cwd),
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.conn = ClientSideConnection(
            _Client(self), self.proc.stdin, self.proc.stdout, observers=[self._observe]
        )
        self._stderr_task = asyncio.create_task(self._read_stderr())
        self._tasks.add(self._stderr_task)
        return self

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        returncode = self.proc.returncode if self.proc is not None else None
        await self.kill()
        if exc is not None:
            # What the agent said before it failed (a closed connection says nothing else).
            exc.add_note(
                f"agent exit status before the kill: {returncode}; "
                f"its last stderr lines: {self.stderr[-20:]}"
            )

    async def kill(self) -> None:
        """SIGKILL the agent's group and whatever runs below it; idempotent."""
        proc = self.proc
        if proc is None:
            return
        for ask in self.asks:
            ask.cancel()
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for child in tree:
            with contextlib.suppress(psutil.Error):
                child.kill()
        await proc.wait()
        if self._stderr_task is not None:  # the reader gets the rest of the pipe
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 2)
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), 5)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _observe(self, event: StreamEvent) -> None:
        direction = "in" if event.direction is StreamDirection.INCOMING else "out"
        self.messages.append((direction, event.message))
        self._changed()

    def _changed(self) -> None:
        self._change.set()

    # -- waiting

    async def wait_until(
        self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition"
    ) -> Any:
        """Wait (woken by each message or permission request) until ``predicate()``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; "
                    f"last messages: {self.messages[-5:]}; stderr: {self.stderr[-10:]}"
                )
            self._change.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._change.wait(), left)

    async def next_ask(self, seen: int = 0, timeout: float = 30.0) -> PermissionAsk:
        """The permission request number ``seen`` (0 = the first), waiting for it."""
        await self.wait_until(lambda: len(self.asks) > seen, timeout, "a permission request")
        return self.asks[seen]

    # -- what was received

    def updates(self, session_id: str | None = None) -> list[JsonDict]:
        """The ``update`` objects of every ``session/update`` received, in order."""
        wanted = session_id or self.session_id
        return [
            message["params"]["update"]
            for direction, message in self.messages
            if direction == "in"
            and message.get("method") == "session/update"
            and message.get("params", {}).get("sessionId") == wanted
        ]

    def kinds(self) -> list[str]:
        """The ``sessionUpdate`` kind of every update of the session."""
        return [str(update.get("sessionUpdate")) for update in self.updates()]

    def agent_text(self) -> str:
        """Every ``agent_message_chunk`` text of the session, joined."""
        return "".join(
            str(u.get("content", {}).get("text", ""))
            for u in self.updates()
            if u.get("sessionUpdate") == "agent_message_chunk"
        )

    def tool_calls(self) -> list[JsonDict]:
        """The ``tool_call`` and ``tool_call_update`` updates, in order."""
        return [
            u for u in self.updates() if u.get("sessionUpdate") in ("tool_call", "tool_call_update")
        ]

    def index_of(self, predicate: Callable[[str, JsonDict], bool]) -> int:
        """The position in :attr:`messages` of the first match (-1 when none)."""
        for index, (direction, message) in enumerate(self.messages):
            if predicate(direction, message):
                return index
        return -1

    # -- the usual conversation

    @property
    def connection(self) -> ClientSideConnection:
        """The SDK connection (after entering the context)."""
        assert self.conn is not None, "not started"
        return self.conn

    async def initialize(self, timeout: float = 60.0) -> JsonDict:
        """``initialize`` advertising no client fs/terminal: agents use their own tools."""
        response = await asyncio.wait_for(
            self.connection.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                    terminal=False,
                ),
                client_info=Implementation(name="agenthost-e2e", version="0"),
            ),
            timeout,
        )
        self.init = response.model_dump(mode="json", by_alias=True, exclude_none=True)
        return self.init

    async def authenticate(self, method_id: str, timeout: float = 30.0) -> None:
        """``authenticate`` with one of the methods ``initialize`` offered."""
        await asyncio.wait_for(self.connection.authenticate(method_id=method_id), timeout)

    async def new_session(self, timeout: float = 60.0) -> JsonDict:
        """``session/new`` in the worktree; remembers the session id."""
        response = await asyncio.wait_for(
            self.connection.new_session(cwd=str(self.cwd), mcp_servers=[]), timeout
        )
        self.session_id = response.session_id
        return response.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def start(self, auth: str | None = None) -> JsonDict:
        """``initialize``, ``authenticate`` when ``auth`` is given, ``session/new``."""
        await self.initialize()
        if auth is not None:
            await self.authenticate(auth)
        return await self.new_session()

    async def set_mode(self, mode_id: str, timeout: float = 30.0) -> None:
        """``session/set_mode``."""
        await asyncio.wait_for(
            self.connection.set_session_mode(mode_id=mode_id, session_id=self.session_id), timeout
        )

    def prompt_task(self, text: str) -> asyncio.Task[str]:
        """Send ``session/prompt`` in a task; its result is the stop reason."""

        async def run() -> str:
            response = await self.connection.prompt(
                prompt=[text_block(text)], session_id=self.session_id
            )
            return str(response.stop_reason)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        return task

    async def prompt(self, text: str, timeout: float = 60.0) -> str:
        """One whole turn: the stop reason."""
        return await asyncio.wait_for(self.prompt_task(text), timeout)

    async def cancel(self) -> None:
        """``session/cancel`` (a notification)."""
        await self.connection.cancel(session_id=self.session_id)

    def transcript(self) -> str:
        """The exchange as JSON lines (for a failing test's message)."""
        return "\n".join(f"{d} {json.dumps(m)[:400]}" for d, m in self.messages)


# --------------------------------------------------------------------------- per agent


@dataclass(frozen=True)
class AgentKit:
    """What differs between the three agents for a test: their fake API and its scripts,
    and the session mode in which they ask before running a shell command.

    Each script method returns the reply object of that agent's fake; :meth:`fake`
    builds the server (a :class:`~fakes.server.FakeServer`: a context manager with
    ``url``, ``requests`` and ``add``).
    """

    name: str
    ask_mode: str
    """A mode that asks permission before a shell command (Claude starts in ``auto``,
    which decides by itself; Codex starts in ``agent``, which asks only for unsafe
    actions; Gemini starts in ``default``, which asks)."""

    def fake(self, *replies: Any, default: Any = None) -> FakeServer[Any, Any]:
        """The fake model API, playing ``replies`` in order, then ``default``."""
        if self.name == "claude":
            return FakeAnthropic(replies, default_turn=default)
        if self.name == "codex":
            return FakeOpenAI(replies, default=default)
        return FakeGemini(replies, default=default)

    def text(self, message: str) -> Any:
        """A reply with ``message`` in a few stream chunks."""
        return {"claude": anthropic.text, "codex": openai.text, "gemini": gemini.text}[self.name](
            message
        )

    def slow(self, message: str) -> Any:
        """A reply streaming ``message`` slowly (about 5 chunks a second)."""
        if self.name == "claude":
            return anthropic.slow_text(message, delay=0.2, chunk_size=5)
        if self.name == "codex":
            return openai.slow_text(message, chunks=len(message) // 5, delay=0.2)
        return gemini.slow_text(message, chunks=len(message) // 5, delay=0.2)

    def shell(self, command: str) -> Any:
        """A reply asking to run ``command`` with the agent's shell tool."""
        if self.name == "claude":
            return anthropic.tool_use("Bash", {"command": command, "description": "Run it"})
        if self.name == "codex":
            # Codex asks in workspace-write only for a command that wants to leave the
            # sandbox.
            escalate = {"sandbox_permissions": "require_escalated", "justification": "test"}
            return openai.shell(command, extra=escalate)
        return gemini.function_call("run_shell_command", {"command": command})

    def api_error(self) -> Any:
        """A reply that fails with an HTTP error the agent does not retry."""
        if self.name == "claude":
            return anthropic.error(500, "fake boom")
        if self.name == "codex":
            return openai.error(500)
        return gemini.error(400, "fake boom")  # Gemini CLI retries a 500 by itself


KITS = {
    "claude": AgentKit("claude", ask_mode="default"),
    "codex": AgentKit("codex", ask_mode="workspace-write"),
    "gemini": AgentKit("gemini", ask_mode="default"),
}


SHIFTED_CLOCK = Path(__file__).with_name("shifted_clock.cjs")


def clock_prefix(clock: str) -> list[str]:
    """An argv prefix that runs a Node agent with its wall clock moved: ``clock`` is
    ``+SECONDS`` ahead of the real one, or ``@ISO-TIME`` where it starts and runs on.

    The clock is moved inside Node (shifted_clock.cjs replaces ``Date``), not with
    libfaketime: an LD_PRELOAD into V8's threads is unreliable (see that file), and Gemini
    under it closed its connection at start now and then in CI."""
    require = f"--require {json.dumps(str(SHIFTED_CLOCK))}"
    return ["env", f"NODE_OPTIONS={require}", f"AGENTHOST_E2E_CLOCK={clock}"]


def require_agent(name: str) -> None:
    """Install the agent's package (by :data:`AGENTS` name), or skip (fail in CI)."""
    clis.require_cli(CLI_OF[name])
