"""Record the real Claude Code CLI's stream-json exchanges as parser fixtures.

Runs the real ``claude`` binary (see ``clis.ensure_cli``) against the fake Anthropic API
for each scenario, talking to it directly over stdin/stdout, and writes
``tests/fixtures/claude/<scenario>.jsonl``: one ``{"dir": "in"|"out", "line": <raw line>}``
object per line, in the order sent/received. ``tests/fixtures/claude/index.json`` adds,
per scenario, what the lines cannot show: the argv and extra environment, the exit
code, stderr, timings and the model calls the fake server saw.

Usage (from the repository root)::

    .venv/bin/python tests/e2e/record_claude.py            # every scenario
    .venv/bin/python tests/e2e/record_claude.py interrupt  # just some
    .venv/bin/python tests/e2e/record_claude.py --list
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_env import (  # noqa: E402 - after the sys.path tweak, for direct runs
    FAST_RETRY_ENV,
    ClaudeDirs,
    ClaudeProcess,
    allow_response,
    claude_args,
    claude_env,
    deny_response,
    interrupt_request,
    temp_dirs,
    user_message,
)
from clis import ensure_cli  # noqa: E402
from fakes.anthropic import (  # noqa: E402
    FakeAnthropic,
    error,
    overloaded,
    slow_text,
    text,
    tool_use,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"
READ_TIMEOUT = 20.0
JsonDict = dict[str, Any]

#: The Bash command the permission scenarios use. ``echo hello`` alone is read-only and
#: auto-approved without asking; writing a file is not.
PERMISSION_COMMAND = "touch marker.txt && echo hello"


@dataclass
class Run:
    """What one recorded process did, beyond its stdout."""

    fixture: str
    argv: list[str]
    env_extra: dict[str, str]
    process: ClaudeProcess
    exit_code: int | None = None
    seconds: float = 0.0


@dataclass
class Ctx:
    """The environment of one scenario: private dirs, a fake server, its processes."""

    binary: Path
    name: str
    dirs: ClaudeDirs
    server: FakeAnthropic
    stack: ExitStack
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def start(
        self,
        *,
        fixture: str | None = None,
        env: dict[str, str] | None = None,
        **args: Any,
    ) -> ClaudeProcess:
        """Start one CLI process in this scenario's dirs (killed when the scenario ends)."""
        argv = claude_args(self.binary, **args)
        process = ClaudeProcess(
            argv, claude_env(self.server.url, self.dirs, extra=env), self.dirs.worktree
        )
        self.stack.callback(process.kill)
        self.runs.append(Run(fixture or self.name, argv, dict(env or {}), process))
        return process

    def finish(self, process: ClaudeProcess, *, close_stdin: bool = True) -> int:
        """Close stdin, read stdout to EOF and wait for the exit; the exit code."""
        if close_stdin:
            process.close_stdin()
        process.read_to_eof(READ_TIMEOUT)
        code = process.wait(READ_TIMEOUT)
        run = next(r for r in self.runs if r.process is process)
        run.exit_code = code
        run.seconds = round(time.monotonic() - process.started_at, 2)
        return code


# --------------------------------------------------------------------------- scenarios

Scenario = Callable[[Ctx], None]
SCENARIOS: dict[str, tuple[str, Scenario]] = {}


def scenario(func: Scenario) -> Scenario:
    """Register a scenario under its function name; its docstring describes it."""
    SCENARIOS[func.__name__] = (" ".join((func.__doc__ or "").split()), func)
    return func


@scenario
def text_turn(ctx: Ctx) -> None:
    """One user message, a text answer, then stdin EOF."""
    ctx.server.add(text("Hello from the fake API."))
    p = ctx.start()
    p.send(user_message("Say hello."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def tool_turn(ctx: Ctx) -> None:
    """The model runs Bash `echo hello` (allowed by --allowedTools Bash), then answers."""
    ctx.server.add(
        tool_use("Bash", {"command": "echo hello", "description": "Print hello"}),
        text("The command printed hello."),
    )
    p = ctx.start(allowed_tools=["Bash"])
    p.send(user_message("Run echo hello."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def tool_error(ctx: Ctx) -> None:
    """A Bash command that fails (stderr, exit 3): the tool_result has is_error true; the
    model then answers.
    """
    ctx.server.add(
        tool_use("Bash", {"command": "echo oops >&2; exit 3", "description": "Fail"}),
        text("The command failed."),
    )
    p = ctx.start(allowed_tools=["Bash"])
    p.send(user_message("Run the failing command."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def two_messages(ctx: Ctx) -> None:
    """Two user messages in one process, the second sent after the first's result."""
    ctx.server.add(text("First answer."), text("Second answer."))
    p = ctx.start()
    p.send(user_message("First question."))
    p.read_type("result", timeout=READ_TIMEOUT)
    p.send(user_message("Second question."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def message_during_turn(ctx: Ctx) -> None:
    """A second user message sent while the first turn still streams (slowly): it is
    queued, the first turn ends with its own result, then the second runs.
    """
    ctx.server.add(slow_text("This answer streams slowly. " * 2, delay=0.1), text("Second answer."))
    p = ctx.start()
    p.send(user_message("First question."))
    ctx.server.wait_for_deltas(2, timeout=READ_TIMEOUT)
    p.send(user_message("Second question, sent mid-turn."))
    p.read_type("result", timeout=READ_TIMEOUT)
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def interrupt(ctx: Ctx) -> None:
    """An interrupt control_request while a slow answer streams; then a new message works
    in the same process.
    """
    ctx.server.add(
        slow_text("A long story that never ends. " * 10, delay=0.2), text("Fresh start.")
    )
    p = ctx.start()
    p.send(user_message("Tell me a long story."))
    ctx.server.wait_for_deltas(3, timeout=READ_TIMEOUT)
    p.send(interrupt_request("interrupt-1"))
    p.read_type("result", timeout=READ_TIMEOUT)
    disconnected = ctx.server.wait_for_disconnect(timeout=READ_TIMEOUT, turn_index=0)
    ctx.notes.append(
        f"the fake server saw the streaming request abandoned after "
        f"{disconnected.deltas_sent} deltas"
    )
    p.send(user_message("Never mind. Say something short."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


def _permission(ctx: Ctx, answer: Callable[[JsonDict], JsonDict]) -> None:
    ctx.server.add(
        tool_use("Bash", {"command": PERMISSION_COMMAND, "description": "Create a marker file"}),
        text("Done."),
    )
    p = ctx.start(permission_prompt_stdio=True)
    p.send(user_message("Create the marker file."))
    request, _ = p.read_type("control_request", timeout=READ_TIMEOUT)
    p.send(answer(request))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)
    ctx.notes.append(f"marker.txt exists afterwards: {(ctx.dirs.worktree / 'marker.txt').exists()}")


@scenario
def permission_allow(ctx: Ctx) -> None:
    """--permission-prompt-tool stdio: the CLI asks can_use_tool for Bash; the answer
    allows it with updatedInput (the unchanged input).
    """
    _permission(ctx, lambda req: allow_response(req["request_id"], req["request"]["input"]))


@scenario
def permission_deny(ctx: Ctx) -> None:
    """--permission-prompt-tool stdio: the answer denies Bash with a message; the model
    gets an error tool_result and the turn goes on.
    """
    _permission(ctx, lambda req: deny_response(req["request_id"], "The host refused: no files."))


@scenario
def permission_deny_interrupt(ctx: Ctx) -> None:
    """--permission-prompt-tool stdio: a deny with interrupt: true ends the turn at once
    (result error_during_execution) instead of letting the model continue.
    """

    def answer(req: JsonDict) -> JsonDict:
        response = deny_response(req["request_id"], "Stop right there.")
        response["response"]["response"]["interrupt"] = True
        return response

    _permission(ctx, answer)


@scenario
def interrupt_during_permission(ctx: Ctx) -> None:
    """An interrupt while a can_use_tool request is unanswered: the CLI withdraws it with
    control_cancel_request; a late answer to it is ignored; the next message works.
    """
    command = {"command": PERMISSION_COMMAND, "description": "Create a marker file"}
    ctx.server.add(tool_use("Bash", command), text("Fresh start."))
    p = ctx.start(permission_prompt_stdio=True)
    p.send(user_message("Create the marker file."))
    request, _ = p.read_type("control_request", timeout=READ_TIMEOUT)
    p.send(interrupt_request("interrupt-1"))
    p.read_type("result", timeout=READ_TIMEOUT)
    p.send(allow_response(request["request_id"], command))  # too late: ignored
    p.send(user_message("Never mind."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)
    ctx.notes.append(f"marker.txt exists afterwards: {(ctx.dirs.worktree / 'marker.txt').exists()}")


@scenario
def api_error(ctx: Ctx) -> None:
    """API errors with CLAUDE_CODE_MAX_RETRIES=1: a 500 twice (one retry), then for a
    second message a 529 overloaded twice; then stdin EOF.
    """
    ctx.server.add(error(500), error(500), overloaded(), overloaded())
    p = ctx.start(env=FAST_RETRY_ENV)
    p.send(user_message("First question."))
    p.read_type("result", timeout=READ_TIMEOUT)
    p.send(user_message("Second question."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def partial_messages(ctx: Ctx) -> None:
    """--include-partial-messages: stream_event lines for a tool call (input_json_delta)
    and a text answer (text_delta).
    """
    ctx.server.add(
        tool_use("Bash", {"command": "echo hello", "description": "Print hello"}, preamble="Ok."),
        text("The command printed hello."),
    )
    p = ctx.start(allowed_tools=["Bash"], partial_messages=True)
    p.send(user_message("Run echo hello."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def resume(ctx: Ctx) -> None:
    """--resume <session_id> in a second process (same HOME and worktree): resume_setup is
    the first run, resume the second; the model call carries the old history.
    """
    ctx.server.add(text("I will remember: banana."), text("The word was banana."))
    first = ctx.start(fixture="resume_setup")
    first.send(user_message("Remember the word banana."))
    result, _ = first.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(first)
    second = ctx.start(resume=str(result["session_id"]))
    second.send(user_message("What was the word?"))
    second.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(second)
    history = [m.get("role") for m in ctx.server.turn_requests()[-1].messages]
    ctx.notes.append(f"roles of the resumed model call's messages: {history}")


@scenario
def invalid_stdin_line(ctx: Ctx) -> None:
    """A non-JSON line on stdin after a completed turn: the CLI dies (exit 1)."""
    ctx.server.add(text("Hello."))
    p = ctx.start()
    p.send(user_message("Say hello."))
    p.read_type("result", timeout=READ_TIMEOUT)
    p.send_raw("this is not json")
    ctx.finish(p, close_stdin=False)


@scenario
def eof_idle(ctx: Ctx) -> None:
    """stdin closed before any message: no output at all, exit 0."""
    p = ctx.start()
    ctx.finish(p)


@scenario
def eof_during_turn(ctx: Ctx) -> None:
    """stdin closed while a turn streams: the turn completes, then exit 0."""
    ctx.server.add(slow_text("Still answering after EOF.", delay=0.1))
    p = ctx.start()
    p.send(user_message("Say something slowly."))
    ctx.server.wait_for_deltas(2, timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def sigterm_during_turn(ctx: Ctx) -> None:
    """SIGTERM to the CLI's process group while a turn streams: what it prints, how fast it
    exits and with which code.
    """
    ctx.server.add(slow_text("A long answer that will be cut short. " * 10, delay=0.2))
    p = ctx.start()
    p.send(user_message("Tell me a long story."))
    ctx.server.wait_for_deltas(2, timeout=READ_TIMEOUT)
    signalled = time.monotonic()
    p.signal_group(signal.SIGTERM)
    code = ctx.finish(p, close_stdin=False)
    ctx.notes.append(f"exited {time.monotonic() - signalled:.2f}s after SIGTERM, code {code}")


@scenario
def replay_user_messages(ctx: Ctx) -> None:
    """--replay-user-messages with a client uuid on each user message: the CLI echoes each
    user message and reports command_lifecycle queued/started/completed; the second
    message is sent mid-turn.
    """
    ctx.server.add(slow_text("First answer, slowly. ", delay=0.1), text("Second answer."))
    p = ctx.start(extra=["--replay-user-messages"])
    p.send({**user_message("First question."), "uuid": "00000000-0000-4000-8000-000000000001"})
    ctx.server.wait_for_deltas(2, timeout=READ_TIMEOUT)
    p.send({**user_message("Second question."), "uuid": "00000000-0000-4000-8000-000000000002"})
    p.read_type("result", timeout=READ_TIMEOUT)
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


def _uuid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


@scenario
def message_during_tool(ctx: Ctx) -> None:
    """--replay-user-messages, uuids on user messages: a second message sent while the
    first turn's Bash tool (`sleep 3`) runs is folded into the running turn (one result
    whose user_message_uuids lists both), not queued as a turn of its own.
    """
    ctx.server.add(
        tool_use("Bash", {"command": "sleep 3", "description": "Wait"}),
        text("Slept, and read your second message."),
        text("An answer nobody asked for."),
    )
    p = ctx.start(allowed_tools=["Bash"], extra=["--replay-user-messages"])
    p.send({**user_message("Sleep for three seconds."), "uuid": _uuid(1)})
    p.read_until(lambda m: m.get("type") == "assistant" and "tool_use" in json.dumps(m))
    p.send({**user_message("Also say hi."), "uuid": _uuid(2)})
    result, _ = p.read_type("result", timeout=READ_TIMEOUT)
    ctx.notes.append(f"user_message_uuids of the result: {result.get('user_message_uuids')}")
    ctx.notes.append(f"model calls: {len(ctx.server.turn_requests())}")
    ctx.finish(p)


@scenario
def message_during_permission(ctx: Ctx) -> None:
    """--replay-user-messages, uuids on user messages: a second message sent while a
    can_use_tool question is open, then the question is allowed: what becomes of it.
    """
    command = {"command": PERMISSION_COMMAND, "description": "Create a marker file"}
    ctx.server.add(
        tool_use("Bash", command),
        text("Marker made, and read your second message."),
        text("An answer nobody asked for."),
    )
    p = ctx.start(permission_prompt_stdio=True, extra=["--replay-user-messages"])
    p.send({**user_message("Create the marker file."), "uuid": _uuid(1)})
    request, _ = p.read_type("control_request", timeout=READ_TIMEOUT)
    p.send({**user_message("Also say hi."), "uuid": _uuid(2)})
    p.read_until(
        lambda m: m.get("type") == "command_lifecycle" and m.get("command_uuid") == _uuid(2)
    )
    p.send(allow_response(request["request_id"], command))
    result, _ = p.read_type("result", timeout=READ_TIMEOUT)
    ctx.notes.append(f"user_message_uuids of the result: {result.get('user_message_uuids')}")
    ctx.notes.append(f"model calls: {len(ctx.server.turn_requests())}")
    ctx.finish(p)


@scenario
def interrupt_with_queued_message(ctx: Ctx) -> None:
    """--replay-user-messages, uuids on user messages: an interrupt while the first
    answer streams and a second message waits in the CLI's queue: what becomes of the
    queued message (its command_lifecycle, the results that list it).
    """
    ctx.server.add(
        slow_text("A long story that never ends. " * 10, delay=0.2), text("Second answer.")
    )
    p = ctx.start(extra=["--replay-user-messages"])
    p.send({**user_message("Tell me a long story."), "uuid": _uuid(1)})
    ctx.server.wait_for_deltas(2, timeout=READ_TIMEOUT)
    p.send({**user_message("Second question."), "uuid": _uuid(2)})
    p.read_until(
        lambda m: m.get("type") == "command_lifecycle" and m.get("command_uuid") == _uuid(2)
    )
    p.send(interrupt_request("interrupt-1"))
    result, _ = p.read_type("result", timeout=READ_TIMEOUT)
    ctx.notes.append(f"first result lists {result.get('user_message_uuids')}")
    try:
        second, _ = p.read_type("result", timeout=5)
        ctx.notes.append(f"second result lists {second.get('user_message_uuids')}")
    except TimeoutError:
        ctx.notes.append("no second result within 5 s")
    ctx.finish(p)


@scenario
def message_during_tool_no_replay(ctx: Ctx) -> None:
    """Without --replay-user-messages: a second message sent while the first turn's Bash
    tool (`sleep 3`) runs is folded into the running turn: one result for two sends.
    """
    ctx.server.add(
        tool_use("Bash", {"command": "sleep 3", "description": "Wait"}),
        text("Slept, and read your second message."),
        text("An answer nobody asked for."),
    )
    p = ctx.start(allowed_tools=["Bash"])
    p.send(user_message("Sleep for three seconds."))
    p.read_until(lambda m: m.get("type") == "assistant" and "tool_use" in json.dumps(m))
    p.send(user_message("Also say hi."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.notes.append(f"model calls: {len(ctx.server.turn_requests())}")
    ctx.finish(p)


@scenario
def control_misc(ctx: Ctx) -> None:
    """Control requests outside a turn: an interrupt while idle, and an unknown subtype
    (answered with an error control_response); then a normal turn.
    """
    ctx.server.add(text("Still fine."))
    p = ctx.start()
    p.send(interrupt_request("idle-interrupt"))
    p.read_type("control_response", timeout=READ_TIMEOUT)
    p.send({"type": "control_request", "request_id": "bogus-1", "request": {"subtype": "bogus"}})
    p.read_type("control_response", timeout=READ_TIMEOUT)
    p.send(user_message("Are you fine?"))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


@scenario
def control_initialize(ctx: Ctx) -> None:
    """The SDK's optional handshake: an initialize control_request before any message
    (answered with commands, models, account, pid, session_state, ...), then
    set_permission_mode, then a normal turn.
    """
    ctx.server.add(text("Initialized and answering."))
    p = ctx.start()
    p.send(
        {"type": "control_request", "request_id": "init-1", "request": {"subtype": "initialize"}}
    )
    p.read_type("control_response", timeout=READ_TIMEOUT)
    p.send(
        {
            "type": "control_request",
            "request_id": "mode-1",
            "request": {"subtype": "set_permission_mode", "mode": "acceptEdits"},
        }
    )
    p.read_type("control_response", timeout=READ_TIMEOUT)
    p.send(user_message("Hello after initialize."))
    p.read_type("result", timeout=READ_TIMEOUT)
    ctx.finish(p)


# --------------------------------------------------------------------------- driver


def _call_summary(server: FakeAnthropic) -> list[JsonDict]:
    calls = []
    for request in server.requests:
        entry: JsonDict = {"method": request.method, "path": request.path}
        if request.is_messages:
            entry.update(
                side=request.side,
                turn=request.turn,
                deltas_sent=request.deltas_sent,
                disconnected=request.disconnected,
                retry_count=request.headers.get("X-Stainless-Retry-Count"),
                at=round(request.received_at - server.requests[0].received_at, 2),
            )
        calls.append(entry)
    return calls


@contextmanager
def _context(binary: Path, name: str) -> Iterator[Ctx]:
    with ExitStack() as stack:
        dirs = stack.enter_context(temp_dirs())
        server = stack.enter_context(FakeAnthropic())
        yield Ctx(binary, name, dirs, server, stack)


def _write_jsonl(path: Path, records: list[JsonDict]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def record(binary: Path, name: str) -> JsonDict:
    """Run one scenario; write its fixture(s); return its index entry."""
    description, func = SCENARIOS[name]
    started = time.monotonic()
    with _context(binary, name) as ctx:
        func(ctx)
        runs = []
        for run in ctx.runs:
            _write_jsonl(FIXTURES / f"{run.fixture}.jsonl", run.process.transcript_records())
            runs.append(
                {
                    "fixture": f"{run.fixture}.jsonl",
                    "argv": ["claude", *run.argv[1:]],
                    "env_extra": run.env_extra,
                    "exit_code": run.exit_code,
                    "seconds": run.seconds,
                    "stderr": run.process.stderr_lines,
                }
            )
        return {
            "description": description,
            "runs": runs,
            "api_calls": _call_summary(ctx.server),
            "notes": ctx.notes,
            "seconds": round(time.monotonic() - started, 2),
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Record the named scenarios (default: all) and update the index."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (description, _) in SCENARIOS.items():
            print(f"{name}: {description}")
        return 0
    names = args.scenarios or list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    binary = ensure_cli("claude")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    index_path = FIXTURES / "index.json"
    index: JsonDict = json.loads(index_path.read_text()) if index_path.exists() else {}
    index["cli_version"] = _version(binary)
    failed = []
    for name in names:
        print(f"recording {name} ...", end=" ", flush=True)
        try:
            entry = record(binary, name)
        except Exception as exc:  # keep recording the others; report at the end
            failed.append(name)
            print(f"FAILED: {type(exc).__name__}: {exc}")
            continue
        index.setdefault("scenarios", {})[name] = entry
        codes = [run["exit_code"] for run in entry["runs"]]
        print(f"ok ({entry['seconds']}s, exit {codes})")
    index["scenarios"] = dict(sorted(index.get("scenarios", {}).items()))
    tmp = index_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, index_path)
    return 1 if failed else 0


def _version(binary: Path) -> str:
    with temp_dirs() as dirs:
        result = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            env=claude_env("http://127.0.0.1:9", dirs),
        )
    return result.stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
