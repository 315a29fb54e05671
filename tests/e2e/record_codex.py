"""Record what the real ``codex app-server`` says over JSON-RPC, against the fake OpenAI API.

Each scenario starts the real CLI (``ensure_cli("codex")``) with a private CODEX_HOME
whose model provider is :class:`fakes.openai.FakeOpenAI` on 127.0.0.1, drives it over
stdio, and writes every raw line both ways to ``tests/fixtures/codex/<scenario>.jsonl``
as ``{"dir": "in"|"out", "line": "<raw line>"}`` (``in`` = written to Codex's stdin,
``out`` = read from its stdout), plus ``<scenario>.meta.json`` with what the lines do
not show: the exit code after stdin EOF, HTTP requests the fake server saw, the config,
timings and a filtered stderr tail.

Run from the repository root::

    .venv/bin/python tests/e2e/record_codex.py            # every scenario
    .venv/bin/python tests/e2e/record_codex.py interrupt  # only some
    .venv/bin/python tests/e2e/record_codex.py --list

The lines are exact. Ids and timestamps change from run to run; paths do not, because
each scenario runs under the fixed directory ``/tmp/agenthost-codex-record/<scenario>``
(removed before and after).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clis import ensure_cli
from codex_env import AppServer, CodexEnv, Message
from fakes.openai import FakeOpenAI, Script, error, shell, slow_text, stream_failure, text

RECORD_ROOT = Path("/tmp/agenthost-codex-record")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex"
APPROVAL_COMMAND = "echo hello | tee approved.txt"
STDERR_NOISE = ("Unknown model", "could not create PATH aliases")


def method_is(name: str) -> Callable[[Message], bool]:
    """A predicate for :meth:`AppServer.wait_for`: a message with this ``method``."""
    return lambda message: message.get("method") == name


@dataclass
class Recording:
    """One scenario run: the fake server, the environment, and the app-servers started."""

    name: str
    codex: Path
    server: FakeOpenAI
    env: CodexEnv
    out_dir: Path
    apps: list[AppServer] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    t0: float = field(default_factory=time.monotonic)

    def start(self, args: tuple[str, ...] = ()) -> AppServer:
        """Start a ``codex app-server`` (killed, with its commands, at the end)."""
        app = AppServer(self.codex, self.env, args).start()
        self.apps.append(app)
        return app

    def note(self, key: str, value: Any) -> None:
        """Add an observation to the meta file."""
        self.meta.setdefault("observations", {})[key] = value

    def elapsed(self) -> float:
        """Seconds since the scenario started (rounded for the meta file)."""
        return round(time.monotonic() - self.t0, 3)

    def finish(self, app: AppServer, grace: float = 10.0) -> int:
        """Close stdin and record the exit code and how long the exit took."""
        started = time.monotonic()
        app.close_stdin()
        code = app.wait(grace)
        exits = self.meta.setdefault("exits", [])
        exits.append(
            {"exit_code": code, "seconds_after_stdin_eof": round(time.monotonic() - started, 3)}
        )
        return code


@contextmanager
def recording(
    name: str,
    codex: Path,
    out_dir: Path,
    scripts: Sequence[Script],
    **config: Any,
) -> Iterator[Recording]:
    """A fake server with ``scripts`` and a fresh environment under the fixed root."""
    root = RECORD_ROOT / name
    shutil.rmtree(root, ignore_errors=True)
    with FakeOpenAI(scripts) as server:
        base_url = config.pop("base_url", server.url)
        env = CodexEnv.create(base_url, root=root, **config)
        rec = Recording(name, codex, server, env, out_dir)
        try:
            yield rec
        finally:
            for app in rec.apps:
                app.shutdown()
            write_outputs(rec)
            env.cleanup()


def write_outputs(rec: Recording) -> None:
    """Write ``<name>.jsonl`` (one per app-server run) and ``<name>.meta.json``."""
    rec.out_dir.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    for index, app in enumerate(rec.apps):
        suffix = "" if index == len(rec.apps) - 1 else f".run{index + 1}"
        path = rec.out_dir / f"{rec.name}{suffix}.jsonl"
        app.write_transcript(path)
        files.append(path.name)
    meta: dict[str, Any] = {
        "scenario": rec.name,
        "codex_version": codex_version(rec.codex),
        "argv": ["codex", "app-server"],
        "transcripts": files,
        "config_toml": rec.env.config_path.read_text() if rec.env.config_path.exists() else "",
        **rec.meta,
        "http_requests": [
            {
                "method": r.method,
                "path": r.path,
                "answered_with": r.script,
                "client_disconnected": r.disconnected,
            }
            for r in rec.server.requests
        ],
        "stderr_tail": [
            line
            for app in rec.apps
            for line in app.stderr
            if not any(noise in line for noise in STDERR_NOISE)
        ][-20:],
    }
    (rec.out_dir / f"{rec.name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")


_VERSION: dict[str, str] = {}


def codex_version(codex: Path) -> str:
    """``codex --version`` (cached)."""
    key = str(codex)
    if key not in _VERSION:
        out = subprocess.run([key, "--version"], capture_output=True, text=True, timeout=30)
        _VERSION[key] = out.stdout.strip()
    return _VERSION[key]


def turn_id_of(result: Any) -> str:
    """The turn id from a ``turn/start`` result."""
    return str(result["turn"]["id"])


def wait_turn_completed(app: AppServer, timeout: float = 30.0) -> Message:
    """The next ``turn/completed`` notification."""
    return app.wait_for(method_is("turn/completed"), timeout, "turn/completed")


def turn_status(message: Message) -> str:
    """``params.turn.status`` of a ``turn/completed`` notification."""
    return str(message["params"]["turn"]["status"])


# -- scenarios -----------------------------------------------------------------------------


def scenario_text_turn(codex: Path, out: Path) -> None:
    """One turn answered with text: deltas, the completed item, token usage."""
    with recording("text_turn", codex, out, [text("Hello from the fake model.")]) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "Say hello.")
        done = wait_turn_completed(app)
        rec.note("turn_status", turn_status(done))
        rec.finish(app)


def scenario_command_turn(codex: Path, out: Path) -> None:
    """The model runs ``echo hello``; Codex sends the output back; the model answers."""
    scripts = [shell("echo hello"), text("The command printed hello.")]
    with recording("command_turn", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "Run echo hello.")
        done = wait_turn_completed(app)
        rec.note("turn_status", turn_status(done))
        outputs = [
            o.get("output") for r in rec.server.responses_requests() for o in r.function_outputs()
        ]
        rec.note("function_call_output_sent_to_model", outputs)
        rec.note("tools_offered", rec.server.responses_requests()[0].tool_names)
        rec.finish(app)


def scenario_command_streaming(codex: Path, out: Path) -> None:
    """A slower command that writes to stdout and stderr and exits 3: output deltas."""
    command = "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo oops >&2; exit 3"
    scripts = [shell(command), text("The command failed with code 3.")]
    with recording("command_streaming", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "Run the loop.")
        done = wait_turn_completed(app)
        rec.note("turn_status", turn_status(done))
        deltas = [
            m["params"]["delta"]
            for m in app.messages
            if m.get("method") == "item/commandExecution/outputDelta"
        ]
        rec.note("output_deltas", deltas)
        rec.finish(app)


def scenario_two_messages(codex: Path, out: Path) -> None:
    """Two turns, one after the other, in one app-server process."""
    scripts = [text("First answer."), text("Second answer.")]
    with recording("two_messages", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "First message.")
        wait_turn_completed(app)
        app.start_turn(thread, "Second message.")
        wait_turn_completed(app)
        last = rec.server.responses_requests()[-1]
        rec.note("second_request_user_texts", last.user_texts()[-2:])
        rec.finish(app)


def _during_turn(codex: Path, out: Path, name: str, steer: bool) -> None:
    scripts = [slow_text("word " * 40, chunks=40, delay=0.1), text("Answer to both messages.")]
    with recording(name, codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        first = turn_id_of(app.start_turn(thread, "First message."))
        app.wait_for(method_is("item/agentMessage/delta"), 15, "the first delta")
        user_input = [{"type": "text", "text": "Second message.", "text_elements": []}]
        if steer:
            params = {"threadId": thread, "input": user_input, "expectedTurnId": first}
            response = app.response(app.request("turn/steer", params))
        else:
            params = {"threadId": thread, "input": user_input}
            response = app.response(app.request("turn/start", params))
        done = wait_turn_completed(app)
        seen = len(app.messages)
        app.drain(1.5)  # does anything follow the turn's end (a second turn?)
        extra = app.messages[seen:]
        rec.note("first_turn_id", first)
        rec.note("second_request_response", response)
        rec.note("turn_completed_status", turn_status(done))
        rec.note("messages_in_1_5s_after_turn_completed", [m.get("method") for m in extra])
        rec.note("first_stream_cut_by_codex", rec.server.responses_requests()[0].disconnected)
        rec.note(
            "second_model_request_user_texts", rec.server.responses_requests()[-1].user_texts()[-2:]
        )
        rec.finish(app)


def scenario_message_during_turn(codex: Path, out: Path) -> None:
    """A second ``turn/start`` while a turn runs: it is folded into the running turn."""
    _during_turn(codex, out, "message_during_turn", steer=False)


def scenario_steer_during_turn(codex: Path, out: Path) -> None:
    """``turn/steer`` (the explicit form) while a turn runs."""
    _during_turn(codex, out, "steer_during_turn", steer=True)


def scenario_interrupt(codex: Path, out: Path) -> None:
    """``turn/interrupt`` during a slow answer, then another turn."""
    scripts = [slow_text("word " * 50, chunks=50, delay=0.2), text("Back after the interrupt.")]
    with recording("interrupt", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        turn = turn_id_of(app.start_turn(thread, "Talk slowly."))
        app.wait_for(method_is("item/agentMessage/delta"), 15, "the first delta")
        sent = time.monotonic()
        response = app.response(app.request("turn/interrupt", {"threadId": thread, "turnId": turn}))
        done = wait_turn_completed(app)
        rec.note("interrupt_response", response)
        rec.note("seconds_interrupt_to_turn_completed", round(time.monotonic() - sent, 3))
        rec.note("turn_completed_status", turn_status(done))
        cut = rec.server.wait_for_disconnect(5)
        rec.note("model_stream_closed_by_codex", cut.disconnected)
        app.start_turn(thread, "Are you still there?")
        after = wait_turn_completed(app)
        rec.note("next_turn_status", turn_status(after))
        rec.note("next_request_user_texts", rec.server.responses_requests()[-1].user_texts()[-2:])
        rec.finish(app)


def _approval(codex: Path, out: Path, name: str, decision: Any) -> None:
    scripts = [shell(APPROVAL_COMMAND), text("Finished.")]
    with recording(name, codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        params = {"approvalPolicy": "untrusted", "sandbox": "workspace-write"}
        rec.meta["thread_start_params"] = params
        thread = app.start_thread(**params)["thread"]["id"]
        app.start_turn(thread, "Write hello to approved.txt.")
        ask = app.wait_for(
            method_is("item/commandExecution/requestApproval"), 30, "the approval request"
        )
        app.respond(ask["id"], {"decision": decision})
        done = wait_turn_completed(app)
        rec.note("approval_request", ask)
        rec.note("decision_sent", decision)
        rec.note("turn_status", turn_status(done))
        rec.note("command_ran", (rec.env.workdir / "approved.txt").exists())
        outputs = [
            o.get("output") for r in rec.server.responses_requests() for o in r.function_outputs()
        ]
        rec.note("function_call_output_sent_to_model", outputs)
        rec.finish(app)


def scenario_approval_allow(codex: Path, out: Path) -> None:
    """Approval policy ``untrusted``: Codex asks; the client answers ``accept``."""
    _approval(codex, out, "approval_allow", "accept")


def scenario_approval_deny(codex: Path, out: Path) -> None:
    """Codex asks; the client answers ``decline`` (the model is told, the turn goes on)."""
    _approval(codex, out, "approval_deny", "decline")


def scenario_approval_cancel(codex: Path, out: Path) -> None:
    """Codex asks; the client answers ``cancel`` (the turn is interrupted)."""
    _approval(codex, out, "approval_cancel", "cancel")


def scenario_approval_escalation(codex: Path, out: Path) -> None:
    """``on-request`` + workspace-write: the model asks to run unsandboxed; accepted."""
    escalate = {"sandbox_permissions": "require_escalated", "justification": "Write the file?"}
    scripts = [shell(APPROVAL_COMMAND, extra=escalate), text("Finished.")]
    with recording("approval_escalation", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        params = {"approvalPolicy": "on-request", "sandbox": "workspace-write"}
        rec.meta["thread_start_params"] = params
        thread = app.start_thread(**params)["thread"]["id"]
        app.start_turn(thread, "Write hello to approved.txt.")
        ask = app.wait_for(
            method_is("item/commandExecution/requestApproval"), 30, "the approval request"
        )
        app.respond(ask["id"], {"decision": "accept"})
        done = wait_turn_completed(app)
        rec.note("approval_request", ask)
        rec.note("turn_status", turn_status(done))
        rec.note("command_ran", (rec.env.workdir / "approved.txt").exists())
        rec.finish(app)


def scenario_api_error(codex: Path, out: Path) -> None:
    """HTTP 500 on every attempt (1 request retry x 1 stream retry), then a good turn."""
    scripts: list[Script] = [error(500) for _ in range(4)]
    scripts.append(text("Recovered after the errors."))
    config = {"request_max_retries": 1, "stream_max_retries": 1}
    with recording("api_error", codex, out, scripts, **config) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        started = time.monotonic()
        app.start_turn(thread, "This will fail.")
        errors: list[dict[str, Any]] = []
        while True:
            message = app.wait_for(
                lambda m: m.get("method") in ("error", "turn/completed"), 60, "error"
            )
            if message["method"] == "turn/completed":
                break
            at = round(time.monotonic() - started, 3)
            errors.append({"seconds_after_turn_start": at, "params": message["params"]})
        rec.note("error_notifications", errors)
        rec.note("failed_turn", message["params"]["turn"])
        rec.note("http_attempts_for_failed_turn", len(rec.server.responses_requests()))
        app.start_turn(thread, "Try again.")
        rec.note("next_turn_status", turn_status(wait_turn_completed(app)))
        rec.finish(app)


def scenario_rate_limited(codex: Path, out: Path) -> None:
    """HTTP 429 with ``Retry-After: 1``: one retry about 1 s later, then the turn fails."""
    scripts = [error(429, headers={"retry-after": "1"}) for _ in range(4)]
    config = {"request_max_retries": 1, "stream_max_retries": 1}
    with recording("rate_limited", codex, out, scripts, **config) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "This will be rate limited.")
        done = wait_turn_completed(app, 60)
        rec.note("turn", done["params"]["turn"])
        rec.note("http_attempts", len(rec.server.responses_requests()))
        rec.finish(app)


def scenario_response_failed(codex: Path, out: Path) -> None:
    """A stream that ends with ``response.failed`` (no retries configured)."""
    with recording("response_failed", codex, out, [stream_failure("the model failed")]) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "This stream fails.")
        done = wait_turn_completed(app)
        rec.note("turn", done["params"]["turn"])
        rec.finish(app)


def _refused_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scenario_connection_refused(codex: Path, out: Path) -> None:
    """The provider's port refuses connections (unbounded_connection_retries off)."""
    base_url = f"http://127.0.0.1:{_refused_port()}/v1"
    with recording("connection_refused", codex, out, [], base_url=base_url) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "Nobody is listening.")
        done = wait_turn_completed(app)
        rec.note("turn", done["params"]["turn"])
        rec.finish(app)


def scenario_eof_during_turn(codex: Path, out: Path) -> None:
    """stdin closed while a turn streams: Codex exits at once (code 0), cutting the stream."""
    scripts = [slow_text("word " * 50, chunks=50, delay=0.2)]
    with recording("eof_during_turn", codex, out, scripts) as rec:
        app = rec.start()
        app.initialize()
        thread = app.start_thread()["thread"]["id"]
        app.start_turn(thread, "Talk slowly.")
        app.wait_for(method_is("item/agentMessage/delta"), 15, "the first delta")
        rec.finish(app)
        rec.note("model_stream_closed", rec.server.wait_for_disconnect(5).disconnected)


def scenario_resume(codex: Path, out: Path) -> None:
    """A thread made by one app-server, resumed from its rollout by a second one.

    ``resume.run1.jsonl`` is the first process, ``resume.jsonl`` the second.
    """
    scripts = [text("I will remember banana."), text("The word was banana.")]
    with recording("resume", codex, out, scripts) as rec:
        first = rec.start()
        first.initialize()
        started = first.start_thread()
        thread = started["thread"]["id"]
        rec.note("rollout_path", started["thread"]["path"])
        first.start_turn(thread, "Remember the word banana.")
        wait_turn_completed(first)
        rec.finish(first)
        second = rec.start()
        second.initialize()
        resumed = second.call("thread/resume", {"threadId": thread})
        rec.note("resumed_turn_count", len(resumed["thread"]["turns"]))
        second.start_turn(thread, "What was the word?")
        wait_turn_completed(second)
        last = rec.server.responses_requests()[-1]
        rec.note("resumed_request_user_texts", last.user_texts()[-2:])
        rec.finish(second)


SCENARIOS: dict[str, Callable[[Path, Path], None]] = {
    "text_turn": scenario_text_turn,
    "command_turn": scenario_command_turn,
    "command_streaming": scenario_command_streaming,
    "two_messages": scenario_two_messages,
    "message_during_turn": scenario_message_during_turn,
    "steer_during_turn": scenario_steer_during_turn,
    "interrupt": scenario_interrupt,
    "approval_allow": scenario_approval_allow,
    "approval_deny": scenario_approval_deny,
    "approval_cancel": scenario_approval_cancel,
    "approval_escalation": scenario_approval_escalation,
    "api_error": scenario_api_error,
    "rate_limited": scenario_rate_limited,
    "response_failed": scenario_response_failed,
    "connection_refused": scenario_connection_refused,
    "eof_during_turn": scenario_eof_during_turn,
    "resume": scenario_resume,
}


def main(argv: list[str] | None = None) -> int:
    """Record the named scenarios (all by default); 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="output directory")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, func in SCENARIOS.items():
            print(f"{name:22} {(func.__doc__ or '').strip().splitlines()[0]}")
        return 0
    names = args.scenarios or list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    codex = ensure_cli("codex")
    failed = 0
    for name in names:
        started = time.monotonic()
        try:
            SCENARIOS[name](codex, args.out)
        except Exception as exc:  # report and go on with the other scenarios
            failed += 1
            print(f"FAIL {name}: {exc!r}", file=sys.stderr)
        else:
            print(f"ok   {name} ({time.monotonic() - started:.1f}s)")
    shutil.rmtree(RECORD_ROOT, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
