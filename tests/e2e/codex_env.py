"""A private CODEX_HOME, HOME and environment that point the real Codex CLI at a fake server.

Codex reads ``$CODEX_HOME/config.toml``. The one written here selects a custom model
provider (``model_provider = "fake"``) whose ``base_url`` is the fake Responses API on
127.0.0.1, and turns off everything that would reach another host: update checks,
analytics, feedback, web search, plugins/apps/connectors (every key passes
``codex app-server --strict-config``). As a second fence the environment sends any
other HTTP(S) traffic to a proxy address that refuses connections (``127.0.0.1:9``),
with the fake server exempted by ``NO_PROXY``.

Codex gets a private TMPDIR (``root/tmp``), as a real install has its CODEX_HOME
(``~/.codex``) outside the temporary directory: Codex refuses to make its helper
aliases (``codex-linux-sandbox`` on its PATH) under ``$TMPDIR`` (or ``/tmp``), and
with a system bubblewrap older than 0.9 (no ``--argv0``; Debian 12 has 0.8) its own
sandbox then fails every command (``bwrap: execvp codex-linux-sandbox: No such file
or directory``). docs/sandbox.md has the whole story.

:class:`AppServer` runs ``codex app-server`` in that environment and speaks JSON-RPC to
it over stdio, keeping a transcript of every line. Usage::

    with FakeOpenAI([text("hi")]) as server, CodexEnv.create(server.url) as env:
        with AppServer(ensure_cli("codex"), env) as app:
            app.initialize()
            thread_id = app.start_thread()["thread"]["id"]
            app.start_turn(thread_id, "Say hi.")
            done = app.wait_method("turn/completed")
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

API_KEY_ENV = "FAKE_OPENAI_API_KEY"
API_KEY = "sk-fake-agenthost-e2e"
MODEL = "fake-codex-model"
REFUSING_PROXY = "http://127.0.0.1:9"

# Environment variables of the caller passed on to Codex (everything else is dropped, so
# a developer's OPENAI_API_KEY, proxies or CODEX_* settings never leak into a test).
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "SYSTEMROOT")

# Feature flags (``codex features list``) turned off because they reach other hosts at
# start-up (the curated plugin sync clones from GitHub, apps/connectors and tool
# suggestions call ChatGPT back ends) or talk to a desktop app.
DISABLED_FEATURES = (
    "plugins",
    "remote_plugin",
    "plugin_sharing",
    "apps",
    "tool_suggest",
    "skill_mcp_dependency_install",
    "in_app_updates",
    "daemon_auto_start",
    # On by default: a refused or failed connection is retried for ever ("Reconnecting...
    # waiting for network", 5 s, 10 s, 20 s, ... apart) whatever the retry settings say.
    "unbounded_connection_retries",
)


def _toml_str(value: str) -> str:
    """A TOML basic string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def config_toml(
    base_url: str,
    *,
    model: str = MODEL,
    approval_policy: str = "never",
    sandbox_mode: str = "danger-full-access",
    request_max_retries: int | None = 0,
    stream_max_retries: int | None = 0,
    stream_idle_timeout_ms: int | None = 30_000,
    extra: str = "",
) -> str:
    """The text of ``config.toml`` for a fake provider at ``base_url``.

    Retries default to 0 so an error reaches the client at once; raise them to record
    Codex's retry behaviour, or pass None to leave a key out (Codex's default).
    """
    features = "\n".join(f"{name} = false" for name in DISABLED_FEATURES)
    provider_limits = "".join(
        f"{key} = {value}\n"
        for key, value in (
            ("request_max_retries", request_max_retries),
            ("stream_max_retries", stream_max_retries),
            ("stream_idle_timeout_ms", stream_idle_timeout_ms),
        )
        if value is not None
    )
    return f"""\
model = {_toml_str(model)}
model_provider = "fake"
approval_policy = {_toml_str(approval_policy)}
sandbox_mode = {_toml_str(sandbox_mode)}
check_for_update_on_startup = false
web_search = "disabled"
{extra}
[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[features]
{features}

[model_providers.fake]
name = "fake-openai"
base_url = {_toml_str(base_url)}
wire_api = "responses"
env_key = {_toml_str(API_KEY_ENV)}
{provider_limits}"""


@dataclass
class CodexEnv:
    """Temporary directories and the environment for one Codex run.

    ``root`` holds ``home`` (HOME), ``codex_home`` (CODEX_HOME, with config.toml),
    ``workdir`` (a git worktree for the thread's cwd) and ``tmp`` (TMPDIR).
    :meth:`cleanup` removes it all.
    """

    root: Path
    base_url: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        """The HOME given to Codex."""
        return self.root / "home"

    @property
    def codex_home(self) -> Path:
        """CODEX_HOME: config.toml, sessions (rollouts), logs, state databases."""
        return self.root / "codex-home"

    @property
    def workdir(self) -> Path:
        """The working directory (a fresh git repository) for threads."""
        return self.root / "work"

    @property
    def tmp(self) -> Path:
        """TMPDIR: not an ancestor of CODEX_HOME, so Codex makes its helper aliases."""
        return self.root / "tmp"

    @property
    def config_path(self) -> Path:
        """The path of config.toml."""
        return self.codex_home / "config.toml"

    @classmethod
    def create(
        cls,
        base_url: str,
        *,
        root: Path | None = None,
        config: str | None = None,
        **config_options: Any,
    ) -> CodexEnv:
        """Make the directories, write config.toml and build the environment.

        ``config`` replaces the generated config text; ``config_options`` are passed to
        :func:`config_toml`. With ``root`` given, existing content is kept (to resume a
        thread from an earlier run's CODEX_HOME).
        """
        if root is None:
            root = Path(tempfile.mkdtemp(prefix="cx-", dir="/tmp"))
        self = cls(root=root, base_url=base_url)
        for path in (self.home, self.codex_home, self.workdir, self.tmp):
            path.mkdir(parents=True, exist_ok=True)
        text = config if config is not None else config_toml(base_url, **config_options)
        self.config_path.write_text(text)
        self._init_git()
        self.env = self.build_env()
        return self

    def write_config(self, **config_options: Any) -> None:
        """Rewrite config.toml (for example with another base_url or retry counts)."""
        self.config_path.write_text(config_toml(self.base_url, **config_options))

    def _init_git(self) -> None:
        if (self.workdir / ".git").exists() or shutil.which("git") is None:
            return
        git_env = {**self.build_env(), "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(
            ["git", "init", "-q", "-b", "main", str(self.workdir)],
            env=git_env,
            check=True,
            capture_output=True,
        )
        (self.workdir / "README.md").write_text("agenthost e2e worktree\n")

    def build_env(self) -> dict[str, str]:
        """The environment for Codex: private HOME/CODEX_HOME, the dummy key, no proxies."""
        env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(
            {
                "HOME": str(self.home),
                "CODEX_HOME": str(self.codex_home),
                "TMPDIR": str(self.tmp),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                API_KEY_ENV: API_KEY,
                # Anything that is not the fake server goes to a port that refuses.
                "HTTP_PROXY": REFUSING_PROXY,
                "HTTPS_PROXY": REFUSING_PROXY,
                "ALL_PROXY": REFUSING_PROXY,
                "http_proxy": REFUSING_PROXY,
                "https_proxy": REFUSING_PROXY,
                "all_proxy": REFUSING_PROXY,
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "RUST_LOG": os.environ.get("AGENTHOST_E2E_CODEX_RUST_LOG", "warn"),
                "NO_COLOR": "1",
            }
        )
        return env

    def cleanup(self) -> None:
        """Remove every directory made for this run."""
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> CodexEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


Message = dict[str, Any]


class AppServerError(Exception):
    """A JSON-RPC error response, an early exit, or a deadline passed."""


@dataclass
class TranscriptLine:
    """One raw line of the JSON-RPC conversation: ``in`` to Codex, ``out`` from it."""

    dir: str
    line: str
    at: float

    def to_json(self) -> str:
        """The fixture form: ``{"dir": ..., "line": ...}``."""
        return json.dumps({"dir": self.dir, "line": self.line})


class AppServer:
    """The real ``codex app-server`` as a subprocess, spoken to in JSON-RPC over stdio.

    Every line written to its stdin and read from its stdout is kept in
    :attr:`transcript`. Reads never sleep: they block on a queue with a deadline.
    Leaving the ``with`` block calls :meth:`shutdown` (stdin EOF, a grace period, then
    SIGKILL to the process group and to every descendant, since Codex runs commands in
    sessions of their own).
    """

    def __init__(self, codex: Path | str, env: CodexEnv, args: Sequence[str] = ()) -> None:
        self.codex = str(codex)
        self.codex_env = env
        self.args = list(args)
        self.transcript: list[TranscriptLine] = []
        self.messages: list[Message] = []  # every message read, in order
        self.stderr: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._backlog: deque[Message] = deque()  # read but not yet consumed by a wait
        self._next_id = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.eof = False

    # -- process -----------------------------------------------------------------------

    def start(self) -> AppServer:
        """Spawn ``codex app-server`` with the private environment."""
        self.proc = subprocess.Popen(
            [self.codex, "app-server", *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.codex_env.workdir,
            env=self.codex_env.env,
            start_new_session=True,
        )
        for target in (self._read_stdout, self._read_stderr):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._lock:
                    self.transcript.append(TranscriptLine("out", line, time.monotonic()))
                self._lines.put(line)
        except (OSError, ValueError):
            pass  # the pipe was closed under us at teardown
        finally:
            self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        try:
            for raw in self.proc.stderr:
                self.stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))
        except (OSError, ValueError):
            pass

    @property
    def pid(self) -> int:
        """The pid of ``codex app-server``: the npm launcher (Node), or the native binary
        when the launcher could ``execve`` itself into it (Node >= 22.15)."""
        assert self.proc is not None
        return self.proc.pid

    def close_stdin(self) -> None:
        """Close Codex's stdin (EOF)."""
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass  # a broken pipe: Codex has gone already

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit; its return code."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise AppServerError(f"codex app-server still running after {timeout}s") from exc

    def descendants(self) -> list[psutil.Process]:
        """Every live process below ``codex app-server`` (commands it runs included)."""
        if self.proc is None:
            return []
        try:
            return list(psutil.Process(self.proc.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            return []

    def shutdown(self, grace: float = 5.0) -> int | None:
        """Stop Codex: EOF on stdin, wait up to ``grace`` seconds, then :meth:`kill`.

        Codex ends the commands it started on a clean exit, but they run in their own
        sessions, so after a SIGKILL of Codex they would live on: the process tree is
        taken before anything is stopped, and whatever of it survives is killed.
        """
        proc = self.proc
        if proc is None:
            return None
        tree = self.descendants()
        if proc.poll() is None:
            self.close_stdin()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill(tree)
        return proc.returncode

    def kill(self, tree: Sequence[psutil.Process] = ()) -> None:
        """SIGKILL Codex's process group and every process of ``tree`` (or its tree now)."""
        proc = self.proc
        if proc is None:
            return
        tree = list(tree) or self.descendants()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for child in tree:
            try:
                child.kill()  # psutil refuses if the pid was reused meanwhile
            except psutil.Error:
                pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        self.close_stdin()
        for thread in self._threads:  # they end at EOF, now that the writers are dead
            thread.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except (OSError, ValueError):
                    pass

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- writing -----------------------------------------------------------------------

    def send_line(self, line: str) -> None:
        """Write one raw line to Codex's stdin (recorded as ``in``)."""
        assert self.proc is not None and self.proc.stdin is not None
        with self._lock:
            self.transcript.append(TranscriptLine("in", line, time.monotonic()))
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Message) -> None:
        """Write one JSON-RPC message."""
        self.send_line(json.dumps(message, separators=(",", ":")))

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; its id."""
        self._next_id += 1
        message: Message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self._next_id

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no id, no response)."""
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def respond(self, request_id: int | str, result: Any) -> None:
        """Answer a server-to-client request."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- reading -----------------------------------------------------------------------

    def _next(self, deadline: float) -> Message | None:
        """The next message from stdout; None at EOF; AppServerError at the deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise queue.Empty
            line = self._lines.get(timeout=left)
            if line is None:
                self.eof = True
                self._lines.put(None)  # stay at EOF for later reads
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not JSON-RPC (kept in the transcript anyway)
            if isinstance(message, dict):
                self.messages.append(message)
                return message

    def wait_for(
        self, predicate: Callable[[Message], bool], timeout: float = 15.0, what: str = ""
    ) -> Message:
        """The first unconsumed message matching ``predicate``, read with a deadline.

        Messages read on the way stay available to later waits (in order).
        """
        for pending in list(self._backlog):
            if predicate(pending):
                self._backlog.remove(pending)
                return pending
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._next(deadline)
            except queue.Empty as exc:
                raise AppServerError(
                    f"timed out after {timeout}s waiting for {what or 'a message'}; "
                    f"stderr tail: {self.stderr[-5:]}"
                ) from exc
            if message is None:
                raise AppServerError(
                    f"codex app-server closed stdout while waiting for {what or 'a message'};"
                    f" stderr tail: {self.stderr[-5:]}"
                )
            if predicate(message):
                return message
            self._backlog.append(message)

    def wait_method(self, method: str, timeout: float = 15.0) -> Message:
        """The next unconsumed notification or request with this ``method``."""
        return self.wait_for(lambda m: m.get("method") == method, timeout, method)

    def response(self, request_id: int | str, timeout: float = 15.0) -> Message:
        """The response to request ``request_id`` (a result or an error)."""
        return self.wait_for(
            lambda m: m.get("id") == request_id and "method" not in m,
            timeout,
            f"the response to request {request_id}",
        )

    def call(self, method: str, params: Any = None, timeout: float = 15.0) -> Any:
        """Send a request and return its ``result``; AppServerError on an error response."""
        response = self.response(self.request(method, params), timeout)
        if "error" in response:
            raise AppServerError(f"{method} failed: {response['error']}")
        return response.get("result")

    def drain(self, timeout: float) -> list[Message]:
        """Everything that arrives within ``timeout`` (or until EOF), unconsumed first."""
        out = list(self._backlog)
        self._backlog.clear()
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._next(deadline)
            except queue.Empty:
                return out
            if message is None:
                return out
            out.append(message)

    # -- the usual conversation --------------------------------------------------------

    def initialize(self, client_name: str = "agenthost-e2e") -> Any:
        """``initialize`` then the ``initialized`` notification."""
        result = self.call(
            "initialize",
            {
                "clientInfo": {"name": client_name, "title": None, "version": "0.0.0"},
                "capabilities": None,
            },
        )
        self.notify("initialized")
        return result

    def start_thread(self, **params: Any) -> Any:
        """``thread/start`` in the worktree; the result (``thread``, ``model``, ...)."""
        params.setdefault("cwd", str(self.codex_env.workdir))
        return self.call("thread/start", params)

    def start_turn(self, thread_id: str, text: str, **params: Any) -> Any:
        """``turn/start`` with one text input; the result (``turn``)."""
        user_input = [{"type": "text", "text": text, "text_elements": []}]
        return self.call("turn/start", {"threadId": thread_id, "input": user_input, **params})

    def write_transcript(self, path: Path) -> None:
        """Write the transcript as JSON lines (``{"dir", "line"}``)."""
        with self._lock:
            lines = [entry.to_json() for entry in self.transcript]
        path.write_text("".join(line + "\n" for line in lines))
