"""Run the real Claude Code CLI in stream-json mode against a fake API, for e2e tests.

:func:`claude_env` and :func:`claude_args` build the environment and argv that keep the
CLI hermetic (a temporary ``HOME``, only ``127.0.0.1`` for the API, no telemetry, no
updater). :class:`ClaudeProcess` drives one CLI process over its stdin/stdout: it sends
JSON lines, reads stdout lines with a deadline (never a sleep), records the whole
exchange as a transcript, and kills the process group on every exit path.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JsonDict = dict[str, Any]

#: The model the tests pin with ``--model``, so fixtures do not follow the CLI's default.
DEFAULT_MODEL = "claude-sonnet-4-5"

#: Environment variables that make retries of failed API calls fast and few.
FAST_RETRY_ENV = {
    "CLAUDE_CODE_MAX_RETRIES": "1",
}


@dataclass(frozen=True)
class ClaudeDirs:
    """The private directories of one CLI run, all under ``root``."""

    root: Path
    home: Path
    """``HOME``: ``~/.claude.json``, ``~/.claude/`` (sessions, transcripts, settings)."""
    worktree: Path
    """The CLI's cwd: the project it works on."""
    tmp: Path
    """``TMPDIR``: the CLI's ``claude-<uid>/`` scratch tree and ``cc-socks/<pid>.sock``."""


@contextmanager
def temp_dirs() -> Iterator[ClaudeDirs]:
    """Fresh private directories under /tmp (short: the CLI binds a socket in ``tmp``).

    Everything is removed afterwards.
    """
    root = Path(tempfile.mkdtemp(prefix="claude-e2e-", dir="/tmp"))
    dirs = ClaudeDirs(root, root / "home", root / "work", root / "tmp")
    for path in (dirs.home, dirs.worktree, dirs.tmp):
        path.mkdir(mode=0o700)
    try:
        yield dirs
    finally:
        shutil.rmtree(root, ignore_errors=True)


def claude_env(
    base_url: str,
    dirs: ClaudeDirs,
    *,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment for a hermetic CLI run against ``base_url``.

    Only ``PATH`` (and the locale) are inherited from the caller; everything that could
    reach the network or a real account is replaced or switched off. ``TMPDIR`` keeps
    the CLI's scratch files and its messaging socket out of the shared /tmp.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": str(dirs.home),
        "TMPDIR": str(dirs.tmp),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    if extra:
        env.update(extra)
    return env


def claude_args(
    binary: Path | str,
    *,
    model: str | None = DEFAULT_MODEL,
    allowed_tools: Sequence[str] = (),
    permission_prompt_stdio: bool = False,
    partial_messages: bool = False,
    resume: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv of a stream-json CLI process: one JSON message per line on both sides."""
    argv = [
        str(binary),
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    if model:
        argv += ["--model", model]
    if allowed_tools:
        argv += ["--allowedTools", ",".join(allowed_tools)]
    if permission_prompt_stdio:
        argv += ["--permission-prompt-tool", "stdio"]
    if partial_messages:
        argv.append("--include-partial-messages")
    if resume:
        argv += ["--resume", resume]
    argv += list(extra)
    return argv


def user_message(content: str) -> JsonDict:
    """A stream-json stdin line carrying one user message."""
    return {"type": "user", "message": {"role": "user", "content": content}}


def interrupt_request(request_id: str) -> JsonDict:
    """A stdin control request that interrupts the running turn."""
    return {
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": "interrupt"},
    }


def allow_response(request_id: str, updated_input: JsonDict) -> JsonDict:
    """The stdin answer to a ``can_use_tool`` request that lets the tool run."""
    return {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": request_id,
            "response": {"behavior": "allow", "updatedInput": updated_input},
        },
    }


def deny_response(request_id: str, message: str) -> JsonDict:
    """The stdin answer to a ``can_use_tool`` request that refuses the tool."""
    return {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": request_id,
            "response": {"behavior": "deny", "message": message},
        },
    }


@dataclass(frozen=True)
class Line:
    """One line of the exchange: ``dir`` is "in" (we sent it) or "out" (CLI printed it)."""

    dir: str
    line: str
    at: float

    def json(self) -> Any:
        """The line parsed as JSON (raises ValueError when it is not JSON)."""
        return json.loads(self.line)


class CliExited(Exception):
    """The CLI closed stdout before the awaited line arrived."""


class ClaudeProcess:
    """One running CLI process, driven over stdin/stdout. A context manager.

    stdout lines are read by a thread into a queue; :meth:`read_until` takes them with a
    deadline. Every line sent and received goes into :attr:`transcript`, in order.
    """

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path | str) -> None:
        self.argv = list(argv)
        self._lock = threading.Lock()
        self.transcript: list[Line] = []
        self.stderr_lines: list[str] = []
        self._lines: queue.Queue[Line | None] = queue.Queue()
        self._eof = False
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: we kill the whole tree
        )
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True, name="claude-stdout"),
            threading.Thread(target=self._pump_stderr, daemon=True, name="claude-stderr"),
        ]
        for thread in self._threads:
            thread.start()

    # -- threads

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = Line("out", raw.decode("utf-8", "replace").rstrip("\n"), time.monotonic())
            with self._lock:
                self.transcript.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._lock:
                self.stderr_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    # -- input

    def send_raw(self, line: str) -> None:
        """Write one raw line (a newline is added) to the CLI's stdin."""
        assert self.proc.stdin is not None
        with self._lock:
            self.transcript.append(Line("in", line, time.monotonic()))
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, message: JsonDict) -> None:
        """Write one JSON message as a line to the CLI's stdin."""
        self.send_raw(json.dumps(message, separators=(",", ":")))

    def close_stdin(self) -> None:
        """Close stdin (EOF for the CLI)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    # -- output

    def next_line(self, timeout: float) -> Line | None:
        """The next stdout line, or None at EOF; TimeoutError after ``timeout`` s."""
        if self._eof:
            return None
        try:
            line = self._lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise TimeoutError(f"no stdout line within {timeout:.1f}s") from None
        if line is None:
            self._eof = True
        return line

    def read_until(
        self, predicate: Callable[[JsonDict], bool], timeout: float = 15.0
    ) -> tuple[JsonDict, list[JsonDict]]:
        """Read stdout messages until one matches ``predicate``.

        Return ``(match, every message read including the match)``. Raise TimeoutError
        at the deadline and CliExited at EOF, both with what was read so far.
        """
        deadline = time.monotonic() + timeout
        seen: list[JsonDict] = []
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.next_line(remaining)
            except TimeoutError:
                raise TimeoutError(self._explain("timed out", seen)) from None
            if line is None:
                raise CliExited(self._explain("stdout closed", seen))
            try:
                message = line.json()
            except ValueError:
                continue
            seen.append(message)
            if predicate(message):
                return message, seen

    def read_type(
        self, type_: str, subtype: str | None = None, timeout: float = 15.0
    ) -> tuple[JsonDict, list[JsonDict]]:
        """Read until a message of ``type_`` (and ``subtype`` when given)."""

        def match(message: JsonDict) -> bool:
            return message.get("type") == type_ and (
                subtype is None or message.get("subtype") == subtype
            )

        return self.read_until(match, timeout)

    def read_to_eof(self, timeout: float = 15.0) -> list[JsonDict | str]:
        """Every remaining stdout line (parsed when JSON) until EOF or the deadline."""
        deadline = time.monotonic() + timeout
        rest: list[JsonDict | str] = []
        while True:
            line = self.next_line(deadline - time.monotonic())
            if line is None:
                return rest
            try:
                rest.append(line.json())
            except ValueError:
                rest.append(line.line)

    def _explain(self, what: str, seen: list[JsonDict]) -> str:
        kinds = [(m.get("type"), m.get("subtype")) for m in seen]
        with self._lock:
            stderr = "\n".join(self.stderr_lines[-20:])
        return f"{what}; read {kinds}; exit={self.proc.poll()}; stderr tail:\n{stderr}"

    # -- lifetime

    def wait(self, timeout: float = 15.0) -> int:
        """Wait for the CLI to exit; its return code. TimeoutExpired at the deadline."""
        code = self.proc.wait(timeout)
        for thread in self._threads:
            thread.join(timeout=5)
        return code

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the CLI's process group (as a host's stop does)."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the CLI's whole process group (idempotent) and reap it."""
        self.close_stdin()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
            pass
        else:
            # Whatever else is still in the group (a tool's child) dies with it.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for thread in self._threads:
            thread.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> ClaudeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def transcript_records(self) -> list[JsonDict]:
        """The exchange as fixture records: ``{"dir": "in"|"out", "line": raw}``."""
        with self._lock:
            return [{"dir": line.dir, "line": line.line} for line in self.transcript]
