"""The host: one supervisor process in front of one agent.

Wires the agent process, its adapter, the event stream (:mod:`agenthost.host.stream`)
and the socket server, and owns the host's life cycle and its requests:

1. take the lock (a second host for the same agent is refused, its socket untouched),
   remove a stale socket, bind a fresh one, spawn the agent;
2. turn what the agent prints into numbered events, encoded once, kept in the ring and
   handed to every attached client;
3. after the agent exits, keep serving (final state, exit code) until stopped or the
   linger time ends;
4. ``host.stop`` (or SIGTERM/SIGINT) stops the agent's process group, answers with the
   real exit status, removes the socket, releases the lock and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agenthost._version import __version__
from agenthost.agentenv import AGENT_ENV_VAR
from agenthost.agents import AdapterOptions, make_adapter
from agenthost.agents.base import (
    AdapterEvent,
    CallFailed,
    Chat,
    Deferred,
    ErrorNote,
    Governed,
    PermissionAsk,
    PermissionDecided,
    StateChange,
)
from agenthost.errors import (
    AgentHostError,
    AgentNotRunning,
    Busy,
    ConfigError,
    InvalidPayload,
    ProtocolError,
    UnknownRequest,
)
from agenthost.host.process import AgentProcess, ExitStatus, SpawnError
from agenthost.host.reaper import RUN_MARKER
from agenthost.host.server import Connection, HostServer, Pieces, Reply
from agenthost.host.stream import AgentStream
from agenthost.hostoptions import DEFAULTS, HostOptions
from agenthost.journal import JournalConfig, JournalWriter
from agenthost.linesplit import LineSplitter
from agenthost.lockfile import HostLock
from agenthost.paths import (
    check_socket_path,
    ensure_private_dir,
    hosts_dir,
    journal_dir,
    journals_dir,
    lock_path,
    socket_path,
    validate_agent_id,
)
from agenthost.protocol import (
    FINAL_STATES,
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    AgentState,
    MessageType,
    Request,
    encode_response,
)
from agenthost.sdnotify import sd_notify
from agenthost.timefmt import go_duration, rfc3339, short_duration

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agenthost.agents.base import ClientCall
    from agenthost.host.approvals import Approvals
    from agenthost.host.budgets import Budgets
    from agenthost.host.clientcalls import ClientCalls
    from agenthost.host.pauses import Pauses
    from agenthost.host.terminal import TerminalSide
    from agenthost.host.tuihooks import TuiHooks

    # The models are imported where they are built: a host answers pings and reports
    # its events without them (agenthost.protocol says why).
    from agenthost.models import (
        AgentInfo,
        AttachRequest,
        BudgetRequest,
        EmptyRequest,
        HistoryRequest,
        InputRequest,
        InterruptResponse,
        PingResponse,
        ResizeRequest,
        RespondRequest,
        RespondResponse,
        ResumeResponse,
        ScreenRequest,
        SendRequest,
        SendResponse,
        SignalRequest,
        StatusResponse,
        StopRequest,
    )
    from agenthost.sandbox.runner import Sandbox

log = structlog.get_logger("agenthost.host")

Handler = Callable[[Connection, Any, Request], Reply]
"""A request's handler: its payload is the model of its type (see ``Host.dispatch``)."""

DEFAULT_STOP_TIMEOUT = 30.0
_SEND_KEYS_KEPT = 1000
# Environment variables that belong to the host's service manager, not to the agent.
_PRIVATE_ENV = (
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    AGENT_ENV_VAR,  # serve takes it out first; kept here should a library user forget
    "AGENTHOST_HOME",  # the way to the home's secrets: not the agent's (docs/sandbox.md)
)


@dataclass(frozen=True)
class HostConfig:
    """Everything a host needs to run one agent. Sizes are bytes, times seconds.

    :meth:`from_options` builds it from the options ``agenthost serve`` takes, whose
    defaults are these; the rest are the host's own limits.
    """

    agent_id: str
    home: Path
    agent: str = DEFAULTS.agent
    command: tuple[str, ...] = ()
    cwd: Path | None = None
    project: str = ""
    task: str | None = None
    description: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    linger: float = DEFAULTS.linger
    stop_timeout: float = DEFAULTS.stop_timeout
    ring_size: int = DEFAULTS.ring_size
    ring_bytes: int = DEFAULTS.ring_bytes
    history_size: int = 1000
    history_bytes: int = 16 << 20
    max_frame: int = 1 << 20
    client_buffer: int = DEFAULTS.client_buffer
    stdin_limit: int = 4 << 20
    resume: str | None = None
    fork: str | None = None
    """Start on a copy of this session (``agenthost fork``)."""
    fork_at: str | None = None
    forked_from: str | None = None
    agent_params: Mapping[str, str] = field(default_factory=dict)
    budget_usd: float | None = None
    budget_tokens: int | None = None
    journal: JournalConfig | None = DEFAULTS.journal
    """None: no journal (the ring only; a new epoch at every start)."""
    sandbox: str | None = None
    """The sandbox profile asked for; None: as the home's configuration says."""
    size: tuple[int, int] | None = None
    """A terminal agent's fixed size ``(cols, rows)``; None: its clients' (``latest``)."""

    @classmethod
    def from_options(cls, options: HostOptions) -> HostConfig:
        """The configuration of a host started with ``options``."""
        return cls(
            agent_id=options.agent_id,
            home=options.home,
            agent=options.agent,
            command=options.command,
            cwd=options.cwd,
            project=options.project,
            task=options.task,
            description=options.description,
            env=options.env,
            linger=options.linger,
            stop_timeout=options.stop_timeout,
            ring_size=options.ring_size,
            ring_bytes=options.ring_bytes,
            client_buffer=options.client_buffer,
            resume=options.resume,
            fork=options.fork,
            fork_at=options.fork_at,
            forked_from=options.forked_from,
            agent_params=options.agent_opts,
            budget_usd=options.budget_usd,
            budget_tokens=options.budget_tokens,
            journal=options.journal,
            sandbox=options.sandbox,
            size=options.size,
        )


@dataclass(frozen=True, slots=True)
class StopResult:
    status: ExitStatus
    graceful: bool
    duration: float


class Host:
    """A running host. Create it, then ``await run()`` on a uvloop event loop.

    It installs no signal handlers: its entry point does (:mod:`agenthost.host.run`),
    and calls :meth:`on_stop_signal` and :meth:`on_rebind_signal`."""

    def __init__(self, config: HostConfig) -> None:
        self.config = config
        self.agent_id = validate_agent_id(config.agent_id)
        self.worktree = str((config.cwd or Path.cwd()).absolute())
        options = AdapterOptions(
            self.worktree,
            config.resume,
            dict(config.agent_params),
            fork=config.fork,
            fork_at=config.fork_at,
        )
        self.adapter = make_adapter(config.agent, options)
        self.argv = self.adapter.build_command(config.command)
        self.socket_path = socket_path(config.home, self.agent_id)
        check_socket_path(self.socket_path)
        self.started_at = time.time()
        self._started_at_text = rfc3339(self.started_at)
        self._started_mono = time.monotonic()
        self.journal = (
            JournalWriter(journal_dir(config.home, self.agent_id), self.agent_id, config.journal)
            if config.journal is not None
            else None
        )
        self.stream = AgentStream(
            self.agent_id,
            lambda first, data, count: None,  # replaced by the server's, just below
            self._write_stdin,
            ring_size=config.ring_size,
            ring_bytes=config.ring_bytes,
            history_size=config.history_size,
            history_bytes=config.history_bytes,
            journal=self.journal,
        )
        self.agent_started_at: float | None = None
        self.exit: ExitStatus | None = None
        self.lock = HostLock(lock_path(config.home, self.agent_id))
        self.server = HostServer(
            self.socket_path,
            self.stream.ring,
            self,
            max_frame=config.max_frame,
            max_queue=config.client_buffer,
        )
        self.stream.broadcast = self.server.broadcast
        # client calls (ACP fs/*, terminal/*): the host does them, the adapter answers
        self.calls: ClientCalls | None = None  # built by the first call
        self.sandbox: Sandbox | None = None  # built at start when one is asked for
        self._agent_env: dict[str, str] = {}
        self.stream.call = self._client_call
        self.approvals: Approvals | None = None  # built by the first permission request
        self.budgets: Budgets | None = None  # built when there is a budget (none: no import)
        self.pauses: Pauses | None = None  # built by the first usage limit
        self.stream.on_limited = lambda limited: self._pauses().on_limited(limited)
        if config.budget_usd is not None or config.budget_tokens is not None:
            self._budgets()
        self.stream.on_ask = lambda ask, request: self._approvals().on_ask(ask, request)
        self.server.journal = self.stream.journal_reader
        self.process = AgentProcess(
            self._on_stdout, self._on_stderr, self._on_exit, self._on_stdin_error
        )
        self._stdout = LineSplitter(self.adapter.max_line_bytes)
        self._stderr = LineSplitter(self.adapter.max_line_bytes)
        self.terminal: TerminalSide | None = None
        """A terminal agent's bytes, screen and size (``--agent pty``)."""
        self.hooks: TuiHooks | None = None
        """The hook socket of a terminal agent whose CLI reports through hooks."""
        self._hooks_program = "none"
        if self.adapter.terminal:
            self._hooks_program = self._hook_program()
            # Claude Code's hooks say every state; Codex's notify only a turn's end (and
            # nothing at start): its other states come from the output's quiet too
            self.terminal = self._terminal_side(heuristic=self._hooks_program != "claude")
        self.stream.on_decided = self._decided
        self._send_keys: OrderedDict[str, int] = OrderedDict()
        self._stop_task: asyncio.Task[StopResult] | None = None
        self._shutdown: asyncio.Event | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._serving = False
        self.handlers: Mapping[MessageType, Handler] = self._handler_table()
        """The handler of every request type (``dispatch`` looks it up)."""

    # --- life cycle -------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until stopped. Raise HostAlreadyRunning or ConfigError before serving."""
        self._shutdown = asyncio.Event()
        # the home itself first: whoever can write to it can replace hosts/ and plant a
        # socket of their own where clients look for ours
        ensure_private_dir(self.config.home)
        ensure_private_dir(hosts_dir(self.config.home))
        self.lock.acquire()
        try:
            # We hold the lock, so a socket file at our path is a dead host's leftover.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
                log.info("socket.stale_removed", path=str(self.socket_path))
            repair_note = self._open_journal()
            await self.server.start()
            self._serving = True
            self._write_lock_info()
            log.info(
                "host.started",
                agent_id=self.agent_id,
                agent=self.adapter.kind,
                socket=str(self.socket_path),
                pid=os.getpid(),
            )
            if repair_note is not None:
                self.stream.publish([ErrorNote(repair_note)])
            if self._stop_task is None:  # else a stop signal came while starting
                if await self._make_sandbox():
                    if self.hooks is not None:
                        await self._start_hooks()
                    self._spawn_agent()
            sd_notify(f"READY=1\nMAINPID={os.getpid()}")
            await self._shutdown.wait()
        finally:
            await self._close()
            if self.journal is not None:
                self.journal.close()
            self.lock.release()
            log.info("host.exited", agent_id=self.agent_id)

    def _open_journal(self) -> str | None:
        """Recover the journal and continue its stream; return a repair note, if any."""
        if self.journal is None:
            return None
        ensure_private_dir(journals_dir(self.config.home))
        try:
            recovery = self.journal.open()
        except OSError as exc:
            raise ConfigError(f"cannot open the journal {self.journal.directory}: {exc}") from exc
        self.stream.restore(recovery)
        if self.terminal is not None and self.stream.journal_reader is not None:
            # the screen the journal's events painted (a restarted host's first screen)
            self.terminal.restore(self.stream.journal_reader.iter_records(1))
        log.info(
            "journal.opened",
            path=str(self.journal.directory),
            next_offset=recovery.next_offset,
            new_epoch=recovery.new_epoch,
        )
        return recovery.repair_note

    async def _make_sandbox(self) -> bool:
        """Build and start the agent's sandbox, if one is asked for; False (the start
        failed, and says why) if it cannot be made: never run the agent unconfined."""
        from agenthost.sandbox.resolve import resolve

        config = self.config
        try:
            profile, settings = resolve(config.home, config.sandbox, self.agent_id, config.project)
            if profile is None:
                return True  # (asked of a home without config.toml: one stat)
            from agenthost.sandbox import kinds
            from agenthost.sandbox.runner import Sandbox

            env = {**os.environ, **config.env}
            kind = self._sandbox_kind()
            sandbox = Sandbox(
                profile,
                kind=kind,
                worktree=Path(self.worktree),
                home=config.home,
                run_dir=hosts_dir(config.home) / f"{self.agent_id}.run",
                settings=settings,
                api_hosts=kinds.api_hosts(kind, env),
            )
            await sandbox.start(f"agenthost-{self.agent_id}-{os.getpid()}")
        except AgentHostError as exc:
            self._failed_start(SpawnError(exc.message, 126))
            return False
        self.sandbox = sandbox
        # an agent with a sandbox of its own turns it off inside ours, where it cannot
        # nest (docs/sandbox.md): the adapter is made again with those settings
        params = type(self.adapter).inside_sandbox(config.agent_params)
        if params != dict(config.agent_params):
            options = AdapterOptions(
                self.worktree, config.resume, params, fork=config.fork, fork_at=config.fork_at
            )
            self.adapter = make_adapter(config.agent, options)
            self.argv = self.adapter.build_command(config.command)
        self.stream.info["sandbox"] = profile.name
        log.info("sandbox.ready", profile=profile.name)
        return True

    async def _start_hooks(self) -> None:
        """Listen for the agent's hooks: in the home's hooks directory, or, for a
        sandboxed agent, in its sandbox's own directory (bound inside at
        /run/agenthost), the only place of the host it can reach."""
        assert self.hooks is not None
        if self.sandbox is not None:
            self.hooks.relocate(self.sandbox.run_dir / "hook.sock")
            self.sandbox.share_run_dir = True
        else:
            ensure_private_dir(self.hooks.path.parent)
        await self.hooks.start()

    def _sandbox_kind(self) -> str:
        """The kind whose files and model API a sandbox holds: a terminal agent's is
        its program's (``claude``, ``codex``) when the host knows it."""
        return self._hooks_program if self._hooks_program != "none" else self.adapter.kind

    def _hook_program(self) -> str:
        """``claude``, ``codex`` or ``none``: whose hooks report this terminal agent's
        state (its program's name, or ``--agent-opt hooks=``)."""
        from agenthost.host.tuihooks import TuiHooks
        from agenthost.paths import hook_socket_path
        from agenthost.terminal.hooksetup import detect_program

        program = detect_program(self.argv, self.config.agent_params.get("hooks"))
        if program != "none":
            path = hook_socket_path(self.config.home, self.agent_id)
            self.hooks = TuiHooks(path, self.stream.publish)
            from agenthost.agents.pty import PtyAdapter

            assert isinstance(self.adapter, PtyAdapter)
            self.adapter.answer_hook = self.hooks.answer
        return program

    def _terminal_side(self, *, heuristic: bool) -> TerminalSide:
        from agenthost.host.terminal import TerminalIO, TerminalSide

        def records(start: int) -> Iterator[bytes]:
            reader = self.stream.journal_reader
            if reader is not None and self.journal is not None and not self.journal.failed:
                yield from reader.iter_records(start)

        io = TerminalIO(
            publish=self.stream.publish,
            head=lambda: self.stream.ring.last_offset,
            resize=self.process.resize,
            records=records,
            write=self._write_stdin,
        )
        side = TerminalSide(io, self.config.size, heuristic=heuristic)
        self.server.on_forget = side.left
        return side

    def _failed_start(self, exc: SpawnError) -> None:
        """The agent could not be started: say so, and linger."""
        log.error("agent.spawn_failed", error=str(exc))
        self.exit = ExitStatus(exc.exit_code, None, time.time())
        self.stream.info.update(
            exit_code=exc.exit_code, ended_at=self.exit.ended_at, start_error=str(exc)
        )
        self.stream.publish(
            [ErrorNote(f"cannot start agent: {exc}"), StateChange(AgentState.ERROR)]
        )
        self._start_linger()

    def _spawn_agent(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        env.update(self.adapter.environment())
        env.update(self.config.env)
        # inherited by every process of the agent's tree: how the watchdog finds them
        # all when the host dies (agenthost.host.reaper)
        # (os.urandom, what secrets.token_hex reads: secrets costs a host ~1.5 ms to
        # import, with hmac, hashlib and random, and nothing else before READY uses them)
        env[RUN_MARKER] = os.urandom(8).hex()
        self._agent_env = env  # terminals the agent starts get its environment
        argv = self.argv
        if self.hooks is not None:  # its CLI's settings for this run: hooks to our socket
            from agenthost.pyargv import interpreter
            from agenthost.terminal.hooksetup import hook_setup

            path = str(self.hooks.path)
            if self.sandbox is not None:
                from agenthost.sandbox.layout import RUN_DIR

                path = f"{RUN_DIR}/{self.hooks.path.name}"  # where the agent sees it
            argv, env = hook_setup(
                self._hooks_program,
                argv,
                env,
                path,
                self.hooks.token,
                [interpreter()],
                sandboxed=self.sandbox is not None,
            )
        try:
            size = self.terminal.size if self.terminal is not None else None
            pid = self.process.start(argv, self.worktree, env, self.sandbox, size)
        except SpawnError as exc:
            self._failed_start(exc)
            return
        self.agent_started_at = self.process.started_at
        log.info("agent.spawned", pid=pid, argv0=self.argv[0])
        self._write_lock_info()
        if self.terminal is not None:
            self.terminal.started()
        self._leave_starting()
        if self.sandbox is not None:  # for the record: history and export show it
            self.stream.publish([self.sandbox.record()])
        self.stream.publish(self.adapter.startup())

    def _write_stdin(self, data: bytes) -> None:
        """Writes the adapter asks for (sends, handshakes, answers)."""
        if not data:
            return
        if self.process.stdin_open:
            self.process.write(data)
        else:  # the failure was reported when stdin broke
            log.warning("agent.stdin_closed", dropped=len(data))

    def _client_call(self, call: ClientCall) -> None:
        """Start a call of the agent to its client (see :mod:`agenthost.host.clientcalls`)."""
        if self.calls is None:  # imported here: only ACP agents make calls
            from agenthost.host.clientcalls import ClientCalls

            self.calls = ClientCalls(self.worktree, self._call_done, self._agent_env, self.sandbox)
        self.calls.start(call)

    def _approvals(self) -> Approvals:
        """The approval policy (imported here: pydantic and config.toml are read at
        the first permission request, not at start-up)."""
        if self.approvals is None:
            from agenthost.host.approvals import Agent, Approvals

            agent = Agent(self.agent_id, self.config.project, self.worktree)
            self.approvals = Approvals(
                self.config.home, agent, self.stream, self.adapter, lambda: self.process.running
            )
        return self.approvals

    def _decided(self, request_id: str) -> None:
        # a request stopped being pending: its ask timer goes, and a hook waiting on it
        # is released
        if self.approvals is not None:
            self.approvals.decided(request_id)
        if self.hooks is not None:
            self.hooks.decided(request_id)

    def _pauses(self) -> Pauses:
        """The usage-limit pause (imported at the first usage limit)."""
        if self.pauses is None:
            from agenthost.host.pauses import Pauses

            self.pauses = Pauses(self.stream, lambda: self.process.running, self.send)
        return self.pauses

    def _budgets(self) -> Budgets:
        """The budget (imported here: a host without one never loads it)."""
        if self.budgets is None:
            from agenthost.host.budgets import Budgets

            self.budgets = Budgets(
                self.stream,
                self.agent_id,
                self.interrupt,
                self.config.budget_usd,
                self.config.budget_tokens,
            )
        return self.budgets

    def _call_done(
        self, call_id: str, result: dict[str, Any] | None, failure: CallFailed | None
    ) -> None:
        """A client call ended: the adapter answers the agent (through its stdin)."""
        try:
            events = self.adapter.call_done(call_id, result, failure)
        except Exception as exc:  # an adapter bug must not lose the answer silently
            log.exception("adapter.call_done_failed", call_id=call_id)
            events = [ErrorNote(f"{self.adapter.kind} adapter failed: {exc!r}")]
        self.stream.publish(events)

    def _leave_starting(self) -> None:
        # Output can arrive before the spawn call returned: the state event that says
        # the agent runs must still come first.
        if self.stream.state is AgentState.STARTING:
            self.stream.publish([StateChange(self.adapter.initial_state())])

    # --- signals (installed by the entry point, :func:`agenthost.host.run.serve_host`) ---

    def on_stop_signal(self, sig: int) -> None:
        """SIGTERM or SIGINT: stop the agent (``stop_timeout``), then the host; a second
        one kills the agent at once."""
        log.info("host.signal", signal=signal.Signals(sig).name)
        if self._stop_task is not None or (self._shutdown and self._shutdown.is_set()):
            # A second SIGTERM/SIGINT during a stop or the shutdown: no more waiting.
            # (The handlers stay installed until run() returns, so a late signal
            # never kills the host before it removed its socket and lock.)
            self.process.signal_group(signal.SIGKILL)
            return
        task = self.request_stop(force=False, timeout=self.config.stop_timeout)
        task.add_done_callback(lambda _t: self._begin_shutdown())

    def on_rebind_signal(self) -> None:
        """SIGUSR1, a daemon's "re-create your socket": bind it again if it is gone.

        Ignored while the host is not serving (before its socket is first bound, which
        happens anyway, and once it is closing)."""
        if self._serving:
            self._spawn(self.server.rebind())

    def _begin_shutdown(self) -> None:
        self._serving = False  # the socket is going: a SIGUSR1 must not bring it back
        if self._shutdown is not None:
            self._shutdown.set()

    def _start_linger(self) -> None:
        if self._stop_task is not None or self._linger is not None:
            return
        loop = asyncio.get_running_loop()
        log.info("host.linger", seconds=self.config.linger)
        self._linger = loop.call_later(max(0.0, self.config.linger), self._begin_shutdown)

    async def _close(self) -> None:
        self._serving = False
        if self._linger is not None:
            self._linger.cancel()
        if self.approvals is not None:
            self.approvals.close()
        if self.pauses is not None:
            self.pauses.clear()
        if self.process.running:
            await self.process.stop(self.config.stop_timeout, force=False)
        if self.hooks is not None:
            await self.hooks.close()
        await self.server.close()
        if self.calls is not None:  # no terminal of the agent outlives its host
            await self.calls.aclose()
        await self.process.aclose()
        if self.sandbox is not None:
            await self.sandbox.aclose()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _write_lock_info(self) -> None:
        self.lock.write_info(
            {
                "agent_id": self.agent_id,
                "pid": os.getpid(),
                "version": __version__,
                "protocol_version": PROTOCOL_VERSION,
                "started_at": self.started_at,
                "socket": str(self.socket_path),
                "agent_pid": self.process.pid if self.process.running else 0,
            }
        )

    # --- stopping ---------------------------------------------------------------------

    def request_stop(self, *, force: bool, timeout: float) -> asyncio.Task[StopResult]:
        """Start stopping the agent (once); later calls share the same result.

        A forced request during a graceful stop escalates to SIGKILL at once.
        """
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(
                self._stop_agent(force, timeout)
            )
        elif force:
            self.process.signal_group(signal.SIGKILL)
        return self._stop_task

    async def _stop_agent(self, force: bool, timeout: float) -> StopResult:
        started = time.monotonic()
        if self._linger is not None:
            self._linger.cancel()
        if self.process.running:
            log.info("agent.stopping", force=force, timeout=timeout)
            status, graceful = await self.process.stop(timeout, force)
        elif self.process.pid:  # it exited: wait until the exit has been reported
            status = await self.process.exited()
            graceful = not force
        else:  # it never started
            status = self.exit or ExitStatus(127, None, time.time())
            graceful = not force
        return StopResult(status, graceful, time.monotonic() - started)

    # --- the agent's output -------------------------------------------------------------

    def _on_stdout(self, data: bytes) -> None:
        if self.stream.state is AgentState.STARTING:
            self._leave_starting()
        if self.terminal is not None:
            self.terminal.output(data)
            return
        lines = self._stdout.feed(data)
        if lines:
            self.stream.publish_stdout(lines, self.adapter)

    def _on_stderr(self, data: bytes) -> None:
        if self.stream.state is AgentState.STARTING:
            self._leave_starting()
        lines = self._stderr.feed(data)
        if lines:
            self.stream.publish_lines(lines, "stderr")
            for line in lines:  # bodies only at DEBUG (see agenthost.log)
                log.debug("agent.stderr", line=line.decode("utf-8", "backslashreplace"))

    def _on_stdin_error(self, message: str) -> None:
        log.warning("agent.stdin_failed", error=message)
        self.stream.publish([ErrorNote(message)])

    def _on_exit(self, status: ExitStatus) -> None:
        if self.terminal is not None:
            self.terminal.ended()
        rest = self._stdout.flush()
        if rest:
            self.stream.publish_stdout(rest, self.adapter)
        rest = self._stderr.flush()
        if rest:
            self.stream.publish_lines(rest, "stderr")
        self.exit = status
        self.stream.info.update(exit_code=status.exit_code, ended_at=status.ended_at)
        if status.signal:
            self.stream.info["signal"] = status.signal
        if status.stop_requested:
            # a stop someone asked for, whatever it took (a SIGKILL escalation too): a
            # daemon's on-failure policy must not start the agent again
            self.stream.info["stop_requested"] = True
        log.info(
            "agent.exited",
            exit_code=status.exit_code,
            signal=status.signal,
            **({"stop_requested": True} if status.stop_requested else {}),
        )
        if self.pauses is not None:  # nothing to resume any more
            self.pauses.clear()
        # questions the agent asked die with it
        events: list[AdapterEvent] = [
            PermissionDecided(request_id, "cancelled", "the agent exited", actor="host")
            for request_id in list(self.stream.pending)
        ]
        # A requested stop that the agent obeyed (its SIGTERM, SIGINT, exit 0) is a clean
        # end; a death nobody asked for, or a SIGKILL, is an error and says why.
        if not status.success:
            events.append(ErrorNote(_exit_note(status)))
        events.append(StateChange(AgentState.DONE if status.success else AgentState.ERROR))
        self.stream.publish(events)
        if self.calls is not None:  # its terminals die with it
            self._spawn(self.calls.aclose())
        self._write_lock_info()
        self._start_linger()

    # --- requests -------------------------------------------------------------------------

    def dispatch(
        self, conn: Connection, mtype: MessageType, payload: BaseModel | None, request: Request
    ) -> Reply:
        """Serve one validated request (called by the server, in order per connection).

        ``payload`` is the model :data:`REQUEST_PAYLOADS` names for ``mtype``, or None
        for a type that takes no payload: the server validated both, so every type
        that reaches here has its handler.
        """
        return self.handlers[mtype](conn, payload, request)

    def _handler_table(self) -> dict[MessageType, Handler]:
        return {
            MessageType.PING: _no_payload(self._ping_payload),
            MessageType.STATUS: _no_payload(self.status),
            MessageType.LIST: _no_payload(self._list),
            MessageType.ATTACH: self._attach,
            MessageType.DETACH: self._detach,
            MessageType.HISTORY: self._history,
            MessageType.SEND: self._send,
            MessageType.INTERRUPT: _no_payload(self.interrupt),
            MessageType.PENDING: _no_payload(self._pending),
            MessageType.RESPOND: self._respond,
            MessageType.BUDGET: self._budget,
            MessageType.RESUME: _no_payload(self.resume),
            MessageType.STOP: self._stop_reply,
            MessageType.INPUT: self._input,
            MessageType.RESIZE: self._resize,
            MessageType.SIGNAL: self._signal,
            MessageType.SCREEN: self._screen,
        }

    def _list(self) -> BaseModel:
        from agenthost.models import ListResponse

        return ListResponse(agents=[self.agent_info()])

    def _budget(self, _conn: Connection, payload: BudgetRequest, request: Request) -> Reply:
        from agenthost.models import BudgetResponse

        return _answer(request, BudgetResponse(budget=self._budgets().change(payload)))

    def _pending(self) -> BaseModel:
        from agenthost.models import PendingResponse

        return PendingResponse(requests=self.stream.pending_requests())

    def _attach(self, conn: Connection, payload: AttachRequest, request: Request) -> Reply:
        response, start = self.stream.attach_plan(payload.offset)
        if payload.snapshot:
            from agenthost.models import Screen

            screen = self._terminal().snapshot()
            response = response.model_copy(update={"screen": Screen.model_validate(screen)})
            start = screen["offset"] + 1
        conn.send(_answer(request, response))
        conn.attach(start)
        log.info("client.attached", peer_pid=conn.peer_pid, start=start)
        return None

    def _detach(self, conn: Connection, _payload: EmptyRequest | None, request: Request) -> Reply:
        conn.detach()
        return _answer(request)

    def _history(self, _conn: Connection, payload: HistoryRequest, request: Request) -> Reply:
        if payload.before is None and payload.after is None:
            return self.stream.history_page(request.id, payload.limit)
        return self._history_from_journal(payload, request)

    # --- terminal agents ------------------------------------------------------------------

    def _terminal(self) -> TerminalSide:
        if self.terminal is None:
            raise InvalidPayload(
                f"agent {self.agent_id} is not a terminal agent ({self.adapter.kind})",
                hint="terminal requests are for agents started with --agent pty",
            )
        return self.terminal

    def _input(self, conn: Connection, payload: InputRequest, request: Request) -> Reply:
        from agenthost.terminal.chunks import input_bytes

        terminal = self._terminal()
        self._require_running()
        if self.process.stdin_buffered > self.config.stdin_limit:
            raise Busy(
                f"the agent has not read {self.process.stdin_buffered} bytes of earlier "
                "input; try again later"
            )
        try:
            data = input_bytes(payload.data, payload.data_b64)
        except ProtocolError as exc:
            raise InvalidPayload(exc.message) from None
        terminal.typed(conn)
        self._write_stdin(data)
        return _answer(request)

    def _resize(self, conn: Connection, payload: ResizeRequest, request: Request) -> Reply:
        from agenthost.models import ResizeResponse

        cols, rows = self._terminal().request_size(conn, payload.cols, payload.rows)
        return _answer(request, ResizeResponse(cols=cols, rows=rows))

    def _signal(self, _conn: Connection, payload: SignalRequest, request: Request) -> Reply:
        from agenthost.models import SignalResponse

        self._terminal()
        self._require_running()
        sent = self.process.signal_foreground(signal.Signals[payload.signal])
        log.info("agent.signal", signal=payload.signal, sent=sent)
        return _answer(request, SignalResponse(sent=sent))

    def _screen(self, _conn: Connection, payload: ScreenRequest, request: Request) -> Reply:
        from agenthost.models import Screen

        return _answer(request, Screen.model_validate(self._terminal().snapshot(payload.offset)))

    def _send(self, _conn: Connection, payload: SendRequest, request: Request) -> Reply:
        return _answer(request, self.send(payload.input, payload.key, payload.origin))

    def _respond(self, _conn: Connection, payload: RespondRequest, request: Request) -> Reply:
        return _answer(request, self.respond(payload))

    def ping(self) -> PingResponse:
        """The ``host.ping`` payload as a model."""
        from agenthost.models import PingResponse

        return PingResponse.model_validate(self._ping_payload())

    def _ping_payload(self) -> dict[str, Any]:
        # Built as JSON-ready values, not through the model: ping is what monitors
        # poll, and model_dump was 11 of the ~16 us the host spent per ping (profiled).
        # tests/integration/test_lifecycle.py checks it validates as PingResponse.
        uptime = time.monotonic() - self._started_mono
        return {
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "min_protocol_version": MIN_PROTOCOL_VERSION,
            "uptime": go_duration(uptime),
            "uptime_seconds": round(uptime, 3),
            "started_at": self._started_at_text,
        }

    def agent_info(self) -> AgentInfo:
        """This host's AgentInfo as of now."""
        from agenthost.models import AgentInfo

        fields = dict(self.stream.info)
        if "ended_at" in fields:
            fields["ended_at"] = _dt(fields["ended_at"])
        return AgentInfo(
            id=self.agent_id,
            project=self.config.project,
            state=self.stream.state.value,
            pid=self.process.pid if self.process.running else 0,
            worktree=self.worktree,
            started_at=_dt(self.agent_started_at or self.started_at),
            task=self.config.task,
            description=self.config.description,
            backend=self.adapter.kind,
            command=self.argv,
            pending_requests=len(self.stream.pending),
            budget=self.budgets.model() if self.budgets is not None else None,
            paused_until=_dt(self.pauses.until) if self.pauses and self.pauses.until else None,
            paused_reason=self.pauses.reason if self.pauses and self.pauses.paused else None,
            last_event_at=self.stream.last_event_at,
            forked_from=self.config.forked_from,
            **fields,
        )

    def status(self) -> StatusResponse:
        """The ``host.status`` payload: the host process and its agent."""
        from agenthost.models import HostInfo, StatusResponse

        journal: dict[str, Any] | None = None
        if self.journal is not None:
            journal = {
                "path": str(self.journal.directory),
                "sync": self.journal.config.sync.value,
                "oldest_offset": self.stream.oldest_offset(),
                "epoch": self.stream.epoch,
            }
            if self.journal.failed:
                journal["error"] = self.journal.failed
        host = HostInfo(
            pid=os.getpid(),
            version=__version__,
            protocol_version=PROTOCOL_VERSION,
            started_at=_dt(self.started_at),
            socket_path=str(self.socket_path),
            journal=journal,
        )
        return StatusResponse(host=host, agent=self.agent_info())

    def send(
        self, text: str, key: str | None = None, origin: Mapping[str, str] | None = None
    ) -> SendResponse:
        """Record ``text`` as a user entry, then queue it for the agent's stdin; with
        ``origin`` (a schedule's or a webhook's run), a ``triggered`` governance record
        of it first."""
        from agenthost.models import SendResponse

        if key is not None and key in self._send_keys:
            return SendResponse(offset=self._send_keys[key], duplicate=True)
        self._require_running()
        if self.process.stdin_buffered > self.config.stdin_limit:
            raise Busy(
                f"the agent has not read {self.process.stdin_buffered} bytes of earlier "
                "input; try again later"
            )
        if not self.process.stdin_open:
            raise AgentNotRunning(f"agent {self.agent_id} has closed its stdin")
        if self.budgets is not None:
            self.budgets.check_send()
        if self.pauses is not None and self.pauses.paused:  # a person took over
            self.pauses.resume("client", "a message was sent while it was paused", tell=False)
        log.debug("agent.send", size=len(text))
        if origin:  # its own publish: the answer's offset stays the user entry's
            self.stream.publish([_triggered(origin)])
        offset = self.stream.publish(
            [Chat({"role": "user", "content": text}), *self.adapter.send(text)]
        )
        if self.terminal is not None:
            self.terminal.enter_soon()
        if key is not None:
            self._send_keys[key] = offset
            if len(self._send_keys) > _SEND_KEYS_KEPT:
                self._send_keys.popitem(last=False)
        return SendResponse(offset=offset)

    async def _history_from_journal(self, page: HistoryRequest, request: Request) -> Pieces:
        reader = self.stream.journal_reader
        limit = page.limit or 100
        if reader is None:  # no journal: page through what the memory holds
            entries = self.stream.history.slice(0)
            entries = [
                e
                for e in entries
                if (page.before is None or e["offset"] < page.before)
                and (page.after is None or e["offset"] > page.after)
            ]
            more = len(entries) > limit
            entries = entries[:limit] if page.after is not None else entries[-limit:]
        else:  # scanning segments takes a while: not on the event loop
            entries, more = await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: reader.chat_entries(before=page.before, after=page.after, limit=limit),
            )
        return self.stream.history_pieces(request.id, entries, total=len(entries), has_more=more)

    def _require_running(self) -> None:
        if not self.process.running or self.stream.state in FINAL_STATES:
            raise AgentNotRunning(
                f"agent {self.agent_id} is not running (state {self.stream.state.value})"
            )

    def resume(self) -> ResumeResponse:
        """Resume an agent paused for a usage limit now (``host.resume``)."""
        from agenthost.models import ResumeResponse

        resumed = self.pauses is not None and self.pauses.resume(
            "client", "asked to resume before the limit's reset time (host.resume)"
        )
        return ResumeResponse(resumed=resumed, state=self.stream.state.value)

    def interrupt(self) -> InterruptResponse:
        """Interrupt the agent's current turn, the way its CLI understands."""
        from agenthost.models import InterruptResponse

        self._require_running()
        data = self.adapter.encode_interrupt()
        if data is None:
            self.process.signal_group(signal.SIGINT)
            method = "signal"
        elif isinstance(data, Deferred):  # the adapter sends it once it can
            log.info("agent.interrupt", method="control", deferred=True)
            return InterruptResponse(sent=True, method="control", deferred=True)
        elif not data:  # the adapter knows there is no turn to interrupt
            return InterruptResponse(sent=False, method="control")
        else:
            self._write_stdin(data)
            self.stream.publish(self.adapter.after_interrupt())
            method = "control"
        log.info("agent.interrupt", method=method)
        return InterruptResponse(sent=True, method=method)

    def respond(self, answer: RespondRequest) -> RespondResponse:
        """Answer a pending permission request (any client may, once)."""
        from agenthost.models import RespondResponse

        pending = self.stream.pending.get(answer.request_id)
        if pending is None:
            raise UnknownRequest(
                f"no pending permission request {answer.request_id!r}: it was answered "
                "already, withdrawn by the agent, or never asked",
                hint="`agenthost pending ID` lists the open ones",
            )
        self._require_running()
        allow = answer.behavior == "allow"
        if answer.updated_input is not None and not allow:
            raise InvalidPayload("updated_input only goes with behavior 'allow'")
        ask, request = pending
        if answer.option_id is not None:
            _check_option(ask, answer.option_id, allow)
        if answer.remember is not None:
            self._approvals().check_remember(answer)
        data = self.adapter.encode_permission_response(
            ask, allow, answer.message, answer.updated_input, answer.option_id
        )
        self.process.write(data)
        self.stream.publish(
            [
                PermissionDecided(
                    ask.request_id,
                    answer.behavior,
                    answer.message,
                    actor=answer.actor or "client",
                    remember=answer.remember,
                )
            ]
        )
        if answer.remember is not None:  # what it covers is decided without asking
            self._approvals().remember(request, answer.actor or "client")
        return RespondResponse(request_id=ask.request_id, behavior=answer.behavior)

    async def _stop_reply(self, _conn: Connection, payload: StopRequest, request: Request) -> bytes:
        from agenthost.models import StopResponse

        timeout = payload.timeout or DEFAULT_STOP_TIMEOUT
        log.info("host.stop_requested", force=payload.force, reason=payload.reason or None)
        result = await asyncio.shield(self.request_stop(force=payload.force, timeout=timeout))
        # Remove the socket before answering: once a client has its answer, the host
        # is gone for everybody else too.
        self.server.stop_accepting()
        self._begin_shutdown()
        response = StopResponse(
            stopped=True,
            exit_code=result.status.exit_code,
            signal=result.status.signal,
            graceful=result.graceful and not payload.force,
            duration=short_duration(result.duration),
            duration_seconds=round(result.duration, 3),
            final_state=self.stream.state.value,
        )
        return _answer(request, response)


def _check_option(ask: PermissionAsk, option_id: str, allow: bool) -> None:
    """InvalidPayload unless ``option_id`` is one of the options the agent offered, of a
    kind that agrees with the behavior (``allow_*`` with allow, ``reject_*`` with deny)."""
    offered = {o.get("id"): o.get("kind", "") for o in ask.options}
    if not offered:
        raise InvalidPayload(f"request {ask.request_id!r} offers no options: omit option_id")
    kind = offered.get(option_id)
    if kind is None:
        ids = ", ".join(str(i) for i in offered)
        raise InvalidPayload(f"request {ask.request_id!r} has no option {option_id!r} ({ids})")
    if kind.startswith("allow") != allow:
        behavior = "allow" if allow else "deny"
        raise InvalidPayload(f"option {option_id!r} is {kind!r}, which is not {behavior!r}")


def _no_payload(answer: Callable[[], BaseModel | dict[str, Any]]) -> Handler:
    """The handler of a request that takes no payload: its answer, as the response."""
    return lambda _conn, _payload, request: _answer(request, answer())


def _answer(request: Request, payload: BaseModel | dict[str, Any] | None = None) -> bytes:
    """The success response to ``request``."""
    return encode_response(request.type, request.id, payload)


def _exit_note(status: ExitStatus) -> str:
    """The error event's text for an end that is not clean."""
    how = f"signal {status.signal}" if status.signal else f"exit code {status.exit_code}"
    if not status.stop_requested:
        return f"agent exited with {how}"
    if status.signal == "SIGKILL":
        return "the stop killed the agent with SIGKILL (forced, or SIGTERM did not end it in time)"
    return f"agent exited with {how} when asked to stop"


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _triggered(origin: Mapping[str, str]) -> Governed:
    """The record of a message the daemon's automation sent (a schedule's or a webhook's
    run): who (``schedule:NAME``), and the run's details for the audit trail."""
    source = origin.get("source", "automation")
    name = origin.get("name", "")
    actor = f"{source}:{name}" if name else source
    reason = origin.get("reason") or f"a run of the {source} {name}".rstrip()
    return Governed("triggered", actor, reason, dict(origin))
