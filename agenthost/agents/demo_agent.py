"""The built-in demo agent: a scripted stand-in for Claude Code, no API key needed.

Run as ``python -m agenthost.agents.demo_agent [--pace SECONDS]``. It reads
stream-json user messages on stdin, one JSON object per line, and answers each with
what Claude Code prints in ``-p --input-format stream-json --output-format
stream-json`` mode: a ``system``/``init`` line, assistant text, a ``Bash`` tool call,
the tool's result, a final assistant text and a ``result`` line with usage and cost.
The "tool" is computed in-process; nothing is executed.

Like the real CLI, it exits with status 1 on a stdin line that is not JSON, and with
status 0 at end of input. A user message may carry a ``uuid``: the ``result`` of its
turn lists it in ``user_message_uuids``, and with ``--replay-user-messages`` the message
is echoed (``"isReplay": true``) when its turn starts. (Claude Code folds a message that
arrives while a tool runs into the running turn; the demo runs every message as a turn
of its own, which the same uuid accounting covers.) It understands the control protocol
too: an ``interrupt`` control request stops the current turn, and ``/ask`` makes it ask
permission for a tool (a ``can_use_tool`` control request) and wait for the answer.
Messages starting with ``/`` are demo commands (``/help`` lists them); the test suite
uses them to make the agent flood, fail, hang or crash.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
from typing import Any

MODEL = "demo-1"
TOOLS = ["Bash", "Read", "Edit", "Write", "Glob", "Grep"]
HELP = """I am the agenthost demo agent. Say anything and I will count your words with a \
(simulated) Bash tool call. Commands:
/help            this text
/flood N         print N assistant messages as fast as possible
/sleep S         a turn that takes S seconds (interrupt it!)
/ask [COMMAND]   ask permission to run a command (touch demo-was-here), and wait
                 for the answer
/edit PATH       ask permission to edit the file PATH, and wait for the answer
/tool COMMAND    a (simulated) Bash call of COMMAND, whose output is COMMAND
/error           a turn that ends with an API error result
/limit S         start, then hit a usage limit that resets in S seconds (as Claude Code
                 signed in with a subscription reports it)
/stderr TEXT     print TEXT on stderr, then answer normally
/garbage         print lines that are not valid stream-json, then answer normally
/exit [CODE]     exit with CODE (default 0)
/signal NAME     kill myself with a signal (e.g. KILL, TERM)"""


class Interrupted(Exception):
    """The current turn was interrupted by a control request."""


class Demo:
    """One demo agent session.

    A reader thread handles control messages as they come (an interrupt must reach a
    running turn); user messages queue up for the main thread, one turn at a time.
    """

    def __init__(self, pace: float, replay: bool = False) -> None:
        self.pace = pace
        self.replay = replay
        self.message_uuid: str | None = None  # of the user message being answered
        self.session_id = str(uuid.uuid4())
        self.counter = 0
        self.cost = 0.0
        self.interrupted = threading.Event()
        # An interrupt stops the running turn or, when none runs yet, the turn of the
        # message queued next (the host already counts that one as running): it is not
        # lost when it comes between a message and the start of its turn.
        self._turns = threading.Lock()
        self._received = 0  # user messages queued by the reader
        self._started = 0  # turns the main thread started
        self._running = False
        self._interrupted_turn = 0  # the number of the turn the last interrupt stops
        self._out = threading.Lock()
        self._answers: dict[str, dict[str, Any]] = {}
        self._answered = threading.Condition()

    def emit(self, obj: dict[str, Any]) -> None:
        with self._out:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def wait(self, factor: float = 1.0) -> None:
        if self.pace > 0 and self.interrupted.wait(self.pace * factor):
            raise Interrupted

    def queued(self) -> None:
        """A user message was queued for a turn (from the reader thread)."""
        with self._turns:
            self._received += 1

    def interrupt(self) -> None:
        """Stop the running turn, or the next one if a message waits for it (from the
        reader thread); with nothing running or waiting it stops nothing."""
        with self._turns:
            if self._running:
                self._interrupted_turn = self._started
            else:
                self._interrupted_turn = min(self._received, self._started + 1)
            self.interrupted.set()

    def _start_turn(self) -> None:
        with self._turns:
            self._started += 1
            self._running = True
            if self._interrupted_turn != self._started:
                self.interrupted.clear()

    def _end_turn(self) -> None:
        with self._turns:
            self._running = False

    def deliver(self, request_id: str, answer: dict[str, Any]) -> None:
        """The answer to one of our control requests (from the reader thread)."""
        with self._answered:
            self._answers[request_id] = answer
            self._answered.notify_all()

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send a control request and wait for its answer (or an interrupt)."""
        request_id = self.next_id("req")
        self.emit({"type": "control_request", "request_id": request_id, "request": request})
        with self._answered:
            while request_id not in self._answers:
                if self.interrupted.is_set():
                    self.emit({"type": "control_cancel_request", "request_id": request_id})
                    raise Interrupted
                self._answered.wait(0.05)  # also wakes up for an interrupt
            return self._answers.pop(request_id)

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_demo_{self.counter:04d}"

    def assistant(self, content: list[dict[str, Any]], model: str = MODEL, **extra: Any) -> None:
        message: dict[str, Any] = {
            "id": self.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
        }
        if model == MODEL:  # a synthetic message (an API error) has no usage
            message.update(
                stop_reason=None,
                stop_sequence=None,
                usage={"input_tokens": 10, "output_tokens": 5},
            )
        self.emit(
            {
                "type": "assistant",
                "message": message,
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
                **extra,
            }
        )

    def tool_result(self, tool_id: str, text: str, is_error: bool = False) -> None:
        self.emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": tool_id,
                            "type": "tool_result",
                            "content": text,
                            "is_error": is_error,
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
            }
        )

    def result(
        self,
        text: str,
        started: float,
        turns: int,
        *,
        error: bool = False,
        subtype: str | None = None,
        **extra: Any,
    ) -> None:
        in_tokens, out_tokens = 20 * turns, 5 * turns + len(text.split())
        cost = round((in_tokens * 3 + out_tokens * 15) / 1_000_000, 6)
        self.cost += cost
        duration = int((time.monotonic() - started) * 1000)
        if self.message_uuid is not None:  # like Claude Code: which messages it answered
            extra["user_message_uuid"] = self.message_uuid
            extra["user_message_uuids"] = [self.message_uuid]
        self.emit(
            {
                "type": "result",
                "subtype": subtype or ("error_during_execution" if error else "success"),
                "is_error": error,
                "duration_ms": duration,
                "duration_api_ms": duration,
                "num_turns": turns,
                "result": text,
                "session_id": self.session_id,
                "total_cost_usd": round(self.cost, 6),  # like Claude: for the session
                "usage": {
                    "input_tokens": in_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": out_tokens,
                },
                "permission_denials": [],
                "uuid": str(uuid.uuid4()),
                **extra,
            }
        )

    def init(self) -> None:
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": os.getcwd(),
                "session_id": self.session_id,
                "tools": TOOLS,
                "mcp_servers": [],
                "model": MODEL,
                "permissionMode": "default",
                "apiKeySource": "none",
                "uuid": str(uuid.uuid4()),
            }
        )

    # --- turns -------------------------------------------------------------------

    def turn(self, text: str, message_uuid: str | None = None) -> None:
        self._start_turn()
        try:
            self._turn(text, message_uuid)
        finally:
            self._end_turn()

    def _turn(self, text: str, message_uuid: str | None) -> None:
        started = time.monotonic()
        self.message_uuid = message_uuid
        self.init()
        if self.replay and message_uuid is not None:
            self.emit(
                {
                    "type": "user",
                    "message": {"role": "user", "content": [{"type": "text", "text": text}]},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": message_uuid,
                    "isReplay": True,
                }
            )
        command, _, arg = text.strip().partition(" ")
        handler = COMMANDS.get(command) if command.startswith("/") else None
        try:
            if handler is not None:
                handler(self, arg.strip(), started)
            else:
                self.normal_turn(text, started)
        except Interrupted:
            self.emit(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": "[Request interrupted by user]"}],
                    },
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                }
            )
            self.result("interrupted", started, 1, error=True, terminal_reason="aborted_streaming")

    def normal_turn(self, text: str, started: float) -> None:
        self.wait()
        self.assistant([{"type": "text", "text": "Let me count the words in your message."}])
        self.wait()
        tool_id = self.next_id("toolu")
        self.assistant(
            [
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": "wc -w", "description": "Count the words"},
                }
            ]
        )
        self.wait(2)
        words = len(text.split())
        self.tool_result(tool_id, str(words))
        self.wait()
        answer = f'You said "{_clip(text)}". That is {words} word{"s" if words != 1 else ""}.'
        self.assistant([{"type": "text", "text": answer}])
        self.result(answer, started, 2)

    def cmd_help(self, arg: str, started: float) -> None:
        self.assistant([{"type": "text", "text": HELP}])
        self.result(HELP, started, 1)

    def cmd_flood(self, arg: str, started: float) -> None:
        count = _int(arg, 100)
        for i in range(1, count + 1):
            self.assistant([{"type": "text", "text": f"flood {i}/{count}"}])
        self.result(f"flooded {count}", started, 1)

    def cmd_sleep(self, arg: str, started: float) -> None:
        seconds = _float(arg, 5.0)
        tool_id = self.next_id("toolu")
        self.assistant(
            [
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": f"sleep {seconds:g}"},
                }
            ]
        )
        if self.interrupted.wait(seconds):
            raise Interrupted
        self.tool_result(tool_id, "")
        self.assistant([{"type": "text", "text": f"Slept {seconds:g}s."}])
        self.result(f"slept {seconds:g}s", started, 2)

    def cmd_ask(self, arg: str, started: float) -> None:
        command = arg.strip() or "touch demo-was-here"
        tool_input = {"command": command, "description": "Leave a mark"}
        self.ask_tool("Bash", tool_input, "I would like to run a command.", started)

    def cmd_edit(self, arg: str, started: float) -> None:
        tool_input = {"file_path": arg.strip(), "old_string": "", "new_string": "demo"}
        self.ask_tool("Edit", tool_input, "I would like to edit a file.", started)

    def ask_tool(self, tool: str, tool_input: dict[str, Any], says: str, started: float) -> None:
        """Ask permission to use ``tool`` as Claude Code does, then say how it went
        (nothing is run or edited: the demo only pretends)."""
        tool_id = self.next_id("toolu")
        self.assistant([{"type": "text", "text": says}])
        self.assistant([{"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input}])
        answer = self.ask(
            {
                "subtype": "can_use_tool",
                "tool_name": tool,
                "input": tool_input,
                "permission_suggestions": [],
                "tool_use_id": tool_id,
            }
        )
        decision = _dict(answer.get("response"))
        if decision.get("behavior") == "allow":
            used = decision.get("updatedInput") or tool_input
            done = used.get("command") or used.get("file_path") or "?"
            self.tool_result(tool_id, f"(demo) ran: {done}")
            text = "Done: permission granted, command run."
        else:
            reason = decision.get("message") or "denied"
            self.tool_result(tool_id, f"Permission denied: {reason}", is_error=True)
            text = "Understood, I did not run it."
        self.assistant([{"type": "text", "text": text}])
        self.result(text, started, 2)

    def cmd_tool(self, arg: str, started: float) -> None:
        tool_id = self.next_id("toolu")
        self.assistant(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": arg}}]
        )
        self.wait()
        self.tool_result(tool_id, arg)
        self.result("ran it", started, 1)

    def cmd_error(self, arg: str, started: float) -> None:
        # what Claude Code prints when the model API fails
        self.api_error("API Error: 500 demo failure", 500, started, api_error_type="api_error")

    def api_error(self, text: str, status: int, started: float, **extra: Any) -> None:
        """A failed model call as Claude Code reports it: a synthetic message, then an
        error result (whose subtype is "success", as in the CLI)."""
        self.assistant(
            [{"type": "text", "text": text}],
            model="<synthetic>",
            error="server_error" if status >= 500 else "rate_limit",
            is_api_error_message=True,
            api_error_status=status,
            **extra,
        )
        self.result(
            text,
            started,
            1,
            error=True,
            subtype="success",
            terminal_reason="api_error",
            api_error_status=status,
        )

    def cmd_limit(self, arg: str, started: float) -> None:
        # Part of an answer and a tool call, then a usage limit, as Claude Code signed in
        # with a subscription reports one: a rate_limit_event that says when it resets,
        # a synthetic message and an error result (tests/e2e/CLAUDE_FINDINGS.md)
        self.assistant([{"type": "text", "text": "Starting on it: step one is done."}])
        tool_id = self.next_id("toolu")
        command = "make build"
        self.assistant(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}]
        )
        reset = int(time.time() + max(0.0, _float(arg, 60.0)))
        self.emit(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": reset,
                    "rateLimitType": "five_hour",
                    "isUsingOverage": False,
                },
                "uuid": str(uuid.uuid4()),
                "session_id": self.session_id,
            }
        )
        clock = time.strftime("%I:%M%p", time.gmtime(reset)).lstrip("0").lower()
        self.api_error(f"You've hit your 5-hour limit · resets {clock} (UTC)", 429, started)

    def cmd_stderr(self, arg: str, started: float) -> None:
        print(arg, file=sys.stderr, flush=True)
        self.normal_turn(arg, started)

    def cmd_garbage(self, arg: str, started: float) -> None:
        out = sys.stdout.buffer
        for line in GARBAGE:
            out.write(line + b"\n")
        out.flush()
        self.normal_turn("garbage survived", started)

    def cmd_exit(self, arg: str, started: float) -> None:
        sys.stdout.flush()
        os._exit(_int(arg, 0))

    def cmd_signal(self, arg: str, started: float) -> None:
        name = arg.upper() or "KILL"
        sig = getattr(signal, name if name.startswith("SIG") else "SIG" + name, signal.SIGKILL)
        sys.stdout.flush()
        os.kill(os.getpid(), sig)


GARBAGE = [
    b"this is not json",
    b'{"type": "assistant", "message": "not an object"',
    b"[1, 2, 3]",
    b'{"type": 42}',
    b'{"type": "assistant", "message": {"content": [null, 7, {"type": "text", "text": 5}]}}',
    b'{"type": "user", "message": {"content": [{"type": "tool_result", "content": {"x": 1}}]}}',
    b'{"type": "result", "total_cost_usd": "free", "usage": [], "is_error": "maybe"}',
    b"\xff\xfe invalid utf-8 \xc3\x28",
    b"[" * 100_000,
]

COMMANDS = {
    "/help": Demo.cmd_help,
    "/flood": Demo.cmd_flood,
    "/sleep": Demo.cmd_sleep,
    "/error": Demo.cmd_error,
    "/limit": Demo.cmd_limit,
    "/stderr": Demo.cmd_stderr,
    "/ask": Demo.cmd_ask,
    "/edit": Demo.cmd_edit,
    "/tool": Demo.cmd_tool,
    "/garbage": Demo.cmd_garbage,
    "/exit": Demo.cmd_exit,
    "/signal": Demo.cmd_signal,
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(text: str, default: int) -> int:
    try:
        return max(0, int(text))
    except ValueError:
        return default


def _float(text: str, default: float) -> float:
    try:
        return max(0.0, float(text))
    except ValueError:
        return default


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_text(obj: dict[str, Any]) -> str | None:
    """The text of a stream-json user message, or None if it is not one."""
    message = obj.get("message")
    if obj.get("type") != "user" or not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return None


def _exit_cleanly(_sig: int, _frame: object) -> None:
    # Not sys.exit(): the reader thread is blocked in a read of stdin, and CPython
    # aborts (SIGABRT) if it must tear down a buffered stdin another thread holds.
    try:
        sys.stdout.flush()
    except (OSError, RuntimeError):  # a reentrant flush, or nobody reading: exit anyway
        pass
    os._exit(0)


def read_stdin(demo: Demo, inbox: queue.Queue[tuple[str, str, str | None]]) -> None:
    """Reader thread: control messages at once, user messages to the main thread."""
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            inbox.put(("fatal", f"Error: stdin line is not valid JSON: {line[:200]!r}", None))
            return
        if not isinstance(obj, dict):
            inbox.put(("fatal", "Error: stdin message must be a JSON object", None))
            return
        kind = obj.get("type")
        if kind == "control_request":
            request = _dict(obj.get("request"))
            if request.get("subtype") == "interrupt":
                demo.interrupt()
            demo.emit(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": obj.get("request_id"),
                        "response": {},
                    },
                }
            )
        elif kind == "control_response":
            response = _dict(obj.get("response"))
            if isinstance(response.get("request_id"), str):
                demo.deliver(response["request_id"], response)
        elif (text := message_text(obj)) is not None:
            message_uuid = obj.get("uuid")
            demo.queued()
            inbox.put(("user", text, message_uuid if isinstance(message_uuid, str) else None))
        else:
            print(f"Error: unsupported message type {kind!r}", file=sys.stderr, flush=True)
    inbox.put(("eof", "", None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo_agent", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pace",
        type=float,
        default=float(os.environ.get("AGENTHOST_DEMO_PACE", "0.3")),
        help="seconds between the steps of a turn (default 0.3, env AGENTHOST_DEMO_PACE)",
    )
    parser.add_argument(
        "--replay-user-messages",
        action="store_true",
        help="echo each user message (with its uuid) when its turn starts, as Claude Code",
    )
    args = parser.parse_args(argv)
    # Like a well-behaved agent, finish cleanly on SIGTERM (exit status 0).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    demo = Demo(max(0.0, args.pace), replay=args.replay_user_messages)
    inbox: queue.Queue[tuple[str, str, str | None]] = queue.Queue()
    threading.Thread(target=read_stdin, args=(demo, inbox), daemon=True).start()
    while True:
        kind, value, message_uuid = inbox.get()
        if kind == "user":
            demo.turn(value, message_uuid)
        elif kind == "fatal":
            print(value, file=sys.stderr, flush=True)
            return 1
        else:
            return 0


if __name__ == "__main__":
    sys.exit(main())
