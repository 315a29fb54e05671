"""agenthost.agents.codex: the ``codex app-server`` adapter, driven by recorded transcripts.

The transcripts in tests/fixtures/codex were recorded from the real Codex CLI (see
tests/e2e/CODEX_FINDINGS.md). A replay feeds the adapter every line Codex printed, in
order, and at each line the recording client wrote, makes the adapter produce it (a
send, an interrupt, an answer to an approval) and checks it wrote the same request.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.agents import adapter_class, make_adapter
from agenthost.agents.base import (
    DEFERRED,
    AdapterEvent,
    AdapterOptions,
    Chat,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    Write,
)
from agenthost.agents.codex import BINARY_ENV, CodexAdapter
from agenthost.errors import ConfigError, InvalidPayload
from agenthost.protocol import AgentState, HistoryEntry

from jsonvalues import json_values

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex"
IDLE = StateChange(AgentState.IDLE)
RUNNING = StateChange(AgentState.RUNNING)
THREAD = "thread-1"
Msg = dict[str, Any]

# --- replaying a recording ------------------------------------------------------------------


def _essence(msg: Msg, recorded: bool = False) -> tuple[Any, ...]:
    """What must match between a recorded client line and the adapter's: the id, the
    method and the params that matter (the recorder's clientInfo and thread options
    differ from agenthost's on purpose)."""
    if "method" not in msg:
        result = dict(msg.get("result") or {})
        if recorded and result.get("decision") == "cancel":  # agenthost denies with decline
            result["decision"] = "decline"
        return (msg["id"], "response", result)
    keep = {
        "thread/start": ("cwd",),
        "thread/resume": ("threadId",),
        "turn/start": ("threadId", "input"),
        "turn/interrupt": ("threadId", "turnId"),
    }.get(msg["method"], ())
    params = msg.get("params") or {}
    return (msg.get("id"), msg["method"], {k: params.get(k) for k in keep})


@dataclass
class Replay:
    """The adapter after a replay, what it reported, and what it still wanted to write."""

    adapter: CodexAdapter
    events: list[AdapterEvent] = field(default_factory=list)  # no Output, no Write
    pending: deque[Msg] = field(default_factory=deque)  # written, not in the recording
    held: list[str] = field(default_factory=list)  # sends that wrote nothing

    def take(self, events: list[AdapterEvent]) -> None:
        for ev in events:
            if isinstance(ev, Write):
                self.pending.append(_decode(ev.data))
            elif not isinstance(ev, Output):
                self.events.append(ev)

    def asks(self) -> dict[Any, PermissionAsk]:
        return {e.native["rpc_id"]: e for e in self.events if isinstance(e, PermissionAsk)}


def _rows(name: str) -> list[tuple[str, str]]:
    rows = [json.loads(raw) for raw in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]
    return [(row["dir"], row["line"]) for row in rows]


def _first_in(rows: list[tuple[str, str]], method: str) -> Msg:
    return next(m for d, line in rows if d == "in" and (m := json.loads(line))["method"] == method)


def replay(name: str, **params: str) -> Replay:
    """Replay a recording through a fresh adapter, in lockstep with the recorded client."""
    rows = _rows(name)
    thread_msg = next(
        json.loads(line) for d, line in rows if d == "in" and '"method":"thread/' in line
    )
    resume = thread_msg["params"]["threadId"] if thread_msg["method"] == "thread/resume" else None
    worktree = thread_msg["params"].get("cwd") or "/w"
    adapter = CodexAdapter(AdapterOptions(worktree=worktree, resume=resume, params=params))
    run = Replay(adapter)
    run.take(adapter.startup())
    for direction, line in rows:
        msg = json.loads(line)
        if direction == "out":
            events = adapter.parse_line(line)
            assert events[0] == Output(line), "the raw line must come first"
            run.take(events)
            continue
        method = msg.get("method")
        if method == "turn/steer":
            continue  # the recorder steered on purpose; agenthost never does
        if method == "turn/start":
            before = len(run.pending)
            run.take(adapter.send(msg["params"]["input"][0]["text"]))
            if len(run.pending) == before:
                run.held.append(msg["params"]["input"][0]["text"])
                continue
        elif method == "turn/interrupt":
            run.pending.append(_decode(adapter.encode_interrupt()))
        elif method is None:  # the client's answer to an approval request
            ask = run.asks()[msg["id"]]
            allow = msg["result"]["decision"] == "accept"
            run.pending.append(_decode(adapter.encode_permission_response(ask, allow, None, None)))
        assert run.pending, f"{name}: the adapter did not write {line}"
        assert _essence(run.pending.popleft()) == _essence(msg, recorded=True)
    return run


def _decode(data: bytes) -> Msg:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    msg = json.loads(data)
    assert isinstance(msg, dict) and msg["jsonrpc"] == "2.0"
    return msg


def _summary(ev: AdapterEvent) -> tuple[Any, ...] | None:
    if isinstance(ev, StateChange):
        return ("state", ev.state.value)
    if isinstance(ev, Chat):
        e = ev.entry
        if e["role"] == "assistant" and e.get("is_error"):  # a failed turn, in history
            return ("failed", e["content"], e.get("http_status"))
        if e["role"] == "assistant" and e.get("interrupted"):
            return ("interrupted", e["content"])
        if e["role"] == "assistant":
            return ("aborted" if e.get("aborted") else "assistant", e["content"])
        if "tool_result" in e:
            return ("tool_result", e["tool_result"], e["is_error"])
        return ("tool", e["tool_name"], e["tool_input"])
    if isinstance(ev, TurnResult):
        return ("result", ev.result["subtype"])
    if isinstance(ev, ErrorNote):
        status = () if ev.http_status is None else (ev.http_status,)
        return ("error", ev.message, *status)
    if isinstance(ev, PermissionAsk):
        return ("ask", ev.request_id, ev.tool_input)
    if isinstance(ev, PermissionDecided):
        return ("decided", ev.request_id, ev.behavior)
    return None  # InfoUpdate: checked on its own


def summaries(events: list[AdapterEvent]) -> list[tuple[Any, ...]]:
    return [s for s in map(_summary, events) if s is not None]


def info(events: list[AdapterEvent]) -> dict[str, Any]:
    """AgentInfo fields as the host would have them after these events."""
    fields: dict[str, Any] = {}
    for ev in events:
        if isinstance(ev, InfoUpdate):
            fields.update(ev.fields)
        elif isinstance(ev, ErrorNote):  # the host keeps the latest as last_error
            fields["last_error"] = ev.message
    return fields


ASKS = {"approval_policy": "untrusted"}
HIGH_DEMAND = "We’re currently experiencing high demand, which may cause temporary errors."
RATE_LIMITED = "exceeded retry limit, last status: 429 Too Many Requests"
STREAM_CUT = "stream disconnected before completion: the model failed"
IDLE_S = ("state", "idle")
INTERRUPTED = ("interrupted", "turn interrupted")
TURN = [IDLE_S, ("state", "running")]  # ready, then a send
APPROVAL = [
    *TURN,
    ("tool", "shell", "echo hello | tee approved.txt"),
    ("ask", "codex-0", "echo hello | tee approved.txt"),
]

# recording -> (--agent-opt params, the events the adapter reports)
EXPECTED: dict[str, tuple[dict[str, str], list[tuple[Any, ...]]]] = {
    "text_turn": (
        {},
        [*TURN, ("assistant", "Hello from the fake model."), ("result", "completed"), IDLE_S],
    ),
    "command_turn": (
        {},
        [
            *TURN,
            ("tool", "shell", "echo hello"),
            ("tool_result", "hello", False),
            ("assistant", "The command printed hello."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "command_streaming": (
        {},
        [
            *TURN,
            (
                "tool",
                "shell",
                "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo oops >&2; exit 3",
            ),
            # the whole output, although Codex never sent line1 as a delta
            ("tool_result", "line1\nline2\nline3\noops", True),
            ("assistant", "The command failed with code 3."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "two_messages": (
        {},
        [
            *TURN,
            ("assistant", "First answer."),
            ("result", "completed"),
            IDLE_S,
            ("state", "running"),
            ("assistant", "Second answer."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "message_during_turn": (
        {},  # the recorder's second turn/start is held here, and sent after the turn
        [
            *TURN,
            ("state", "running"),
            ("assistant", "Answer to both messages."),
            ("aborted", "word "),
            ("result", "completed"),
        ],
    ),
    "steer_during_turn": (
        {},
        [
            *TURN,
            ("assistant", "Answer to both messages."),
            ("aborted", "word "),  # the answer Codex cut when it was steered
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "interrupt": (
        {},
        [
            *TURN,
            ("aborted", "word "),
            INTERRUPTED,
            ("result", "interrupted"),
            IDLE_S,
            ("state", "running"),
            ("assistant", "Back after the interrupt."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "approval_allow": (
        ASKS,
        [
            *APPROVAL,
            ("tool_result", "hello", False),
            ("assistant", "Finished."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "approval_deny": (
        ASKS,
        [
            *APPROVAL,
            ("tool_result", "declined", True),
            ("assistant", "Finished."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "approval_cancel": (
        ASKS,
        [
            *APPROVAL,
            ("tool_result", "declined", True),
            INTERRUPTED,
            ("result", "interrupted"),
            IDLE_S,
        ],
    ),
    "approval_escalation": (
        {"approval_policy": "on-request"},
        [
            *APPROVAL,
            ("tool_result", "hello", False),
            ("assistant", "Finished."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "api_error": (
        {},
        [
            *TURN,
            ("error", f"codex error (will retry): Reconnecting... 1/1 ({HIGH_DEMAND})"),
            # the last error fails the turn: an error note and a history entry
            ("error", HIGH_DEMAND),
            ("failed", HIGH_DEMAND, None),
            ("result", "failed"),
            IDLE_S,
            ("state", "running"),
            ("assistant", "Recovered after the errors."),
            ("result", "completed"),
            IDLE_S,
        ],
    ),
    "rate_limited": (
        {},
        [
            *TURN,
            (
                "error",
                "codex error (will retry): Reconnecting... 1/1 "
                "(exceeded retry limit, last status: 429 Too Many Requests)",
                429,
            ),
            ("error", RATE_LIMITED, 429),
            ("failed", RATE_LIMITED, 429),
            ("result", "failed"),
            IDLE_S,
        ],
    ),
    "response_failed": (
        {},
        [
            *TURN,
            ("error", STREAM_CUT),
            ("failed", STREAM_CUT, None),
            ("result", "failed"),
            IDLE_S,
        ],
    ),
    "connection_refused": (
        {},
        [
            *TURN,
            ("error", "Connection failed: error sending request"),
            ("failed", "Connection failed: error sending request", None),
            ("result", "failed"),
            IDLE_S,
        ],
    ),
    "eof_during_turn": ({}, TURN),  # Codex exits: the host reports the end
    "resume": (
        {},
        [*TURN, ("assistant", "The word was banana."), ("result", "completed"), IDLE_S],
    ),
}


def test_every_recording_is_in_the_table() -> None:
    names = {p.name.removesuffix(".jsonl") for p in FIXTURES.glob("*.jsonl")}
    assert names - {"resume.run1"} == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_replay(name: str) -> None:
    params, expected = EXPECTED[name]
    run = replay(name, **params)
    assert summaries(run.events) == expected
    assert all(isinstance(ev, Output) for ev in run.adapter.parse_line("")), "a blank line"


def test_text_turn_info_and_result() -> None:
    run = replay("text_turn")
    fields = info(run.events)
    thread_id = run.adapter.thread_id
    assert thread_id and fields["session_id"] == thread_id
    assert fields["model"] == "fake-codex-model"
    assert fields["usage"] == {
        "total_tokens": 110,
        "input_tokens": 100,
        "cached_input_tokens": 0,
        "cache_write_input_tokens": 0,
        "output_tokens": 10,
        "reasoning_output_tokens": 0,
    }
    assert fields["context_window"] == 258400 and fields["turns"] == 1
    assert "last_error" not in fields
    (result,) = [e.result for e in run.events if isinstance(e, TurnResult)]
    assert result == {
        "subtype": "completed",
        "is_error": False,
        "duration_ms": 87,
        "usage": fields["usage"],
        "session_id": thread_id,
    }
    assert not run.pending and not run.held


def test_chat_entries_are_valid_history_entries() -> None:
    for name in ("command_turn", "approval_deny", "interrupt"):
        for ev in replay(name, **EXPECTED[name][0]).events:
            if isinstance(ev, Chat):
                HistoryEntry.model_validate({**ev.entry, "timestamp": "2026-01-01T00:00:00Z"})


def test_command_entries() -> None:
    run = replay("command_turn")
    call, done = [e.entry for e in run.events if isinstance(e, Chat) and e.entry["role"] == "tool"]
    assert call["tool_use_id"] == done["tool_use_id"] and call["tool_use_id"].startswith("call_")
    assert call["input"]["command"] == "/bin/bash -lc 'echo hello'"
    assert call["input"]["cwd"].endswith("/work") and "commandActions" in call["input"]
    assert done == {
        "role": "tool",
        "tool_name": "shell",
        "tool_result": "hello",
        "exit_code": 0,
        "is_error": False,
        "tool_use_id": call["tool_use_id"],
    }
    declined = [e.entry for e in replay("approval_deny", **ASKS).events if isinstance(e, Chat)]
    assert "exit_code" not in declined[1] and declined[1]["is_error"] is True


def test_interrupt_writes_turn_interrupt_and_failures_set_last_error() -> None:
    run = replay("interrupt")
    results = [e.result for e in run.events if isinstance(e, TurnResult)]
    assert [(r["subtype"], r["is_error"]) for r in results] == [
        ("interrupted", True),
        ("completed", False),
    ]
    events = replay("api_error").events
    first_turn = events[: next(i for i, e in enumerate(events) if isinstance(e, TurnResult)) + 2]
    assert info(first_turn)["last_error"] == HIGH_DEMAND
    assert info(events)["turns"] == 2


def test_held_message_is_sent_when_the_turn_completes() -> None:
    run = replay("message_during_turn")
    assert run.held == ["Second message."]
    (turn,) = run.pending
    assert turn["method"] == "turn/start" and turn["id"] == 4
    assert turn["params"]["input"][0]["text"] == "Second message."
    assert IDLE not in run.events[-3:]  # still running: the held message has its turn


def test_resumed_turn_usage_excludes_the_restated_total() -> None:
    rows = _rows("resume")
    assert _first_in(rows, "thread/resume")["params"]["threadId"]
    run = replay("resume")
    (result,) = [e.result for e in run.events if isinstance(e, TurnResult)]
    assert result["usage"]["total_tokens"] == 110  # this turn's, not the thread's 220
    assert info(run.events)["usage"]["total_tokens"] == 220


def test_approval_request_and_answers() -> None:
    run = replay("approval_allow", **ASKS)
    (ask,) = run.asks().values()
    assert ask.request_id == "codex-0" and ask.tool_name == "shell"
    assert ask.tool_use_id and ask.tool_use_id.startswith("call_")
    assert ask.input["command"] == "/bin/bash -lc 'echo hello | tee approved.txt'"
    assert not {"threadId", "turnId", "itemId", "availableDecisions"} & set(ask.input)
    adapter = run.adapter
    allow = _decode(adapter.encode_permission_response(ask, True, None, dict(ask.input)))
    assert allow == {"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}}
    deny = _decode(adapter.encode_permission_response(ask, False, "no way", None))
    assert deny["result"] == {"decision": "decline"}  # Codex takes no reason
    with pytest.raises(InvalidPayload):
        adapter.encode_permission_response(ask, True, None, {"command": "rm -rf /"})


# --- synthetic conversations ------------------------------------------------------------------


def line(**msg: Any) -> str:
    return json.dumps(msg)


def ready(**params: str) -> tuple[CodexAdapter, list[AdapterEvent]]:
    """An adapter that went through initialize and thread/start."""
    adapter = CodexAdapter(AdapterOptions(worktree="/w", params=params))
    events = adapter.startup()
    events += adapter.parse_line(line(id=1, result={"userAgent": "codex/0.169.0"}))
    events += adapter.parse_line(line(id=2, result={"thread": {"id": THREAD}, "model": "m"}))
    return adapter, events


def writes(events: list[AdapterEvent]) -> list[Msg]:
    return [_decode(e.data) for e in events if isinstance(e, Write)]


def notify(adapter: CodexAdapter, method: str, **params: Any) -> list[AdapterEvent]:
    return adapter.parse_line(line(method=method, params={"threadId": THREAD, **params}))


def complete(adapter: CodexAdapter, turn_id: str, status: str = "completed") -> list[AdapterEvent]:
    return notify(adapter, "turn/completed", turn={"id": turn_id, "status": status})


def test_handshake_writes() -> None:
    adapter, events = ready()
    init, initialized, start = writes(events)
    assert init["method"] == "initialize" and init["id"] == 1
    assert init["params"]["clientInfo"]["name"] == "agenthost"
    assert initialized == {"jsonrpc": "2.0", "method": "initialized"}
    assert start == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "thread/start",
        "params": {"approvalPolicy": "on-request", "sandbox": "workspace-write", "cwd": "/w"},
    }
    assert info(events) == {"session_id": THREAD, "model": "m"}
    assert events[-1] == IDLE and adapter.initial_state() is AgentState.RUNNING


def test_thread_options_and_resume() -> None:
    opts = {
        "approval_policy": "never",
        "sandbox": "danger-full-access",
        "model": "gpt-5.5",
        "model_provider": "mine",
        "developer_instructions": "Be brief.",
        "effort": "high",
    }
    adapter = CodexAdapter(AdapterOptions(worktree="/w", resume="t-old", params=opts))
    adapter.startup()
    (_, resume) = writes(adapter.parse_line(line(id=1, result={})))
    assert resume["method"] == "thread/resume"
    assert resume["params"] == {
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
        "model": "gpt-5.5",
        "modelProvider": "mine",
        "developerInstructions": "Be brief.",
        "cwd": "/w",
        "threadId": "t-old",
        "excludeTurns": True,
    }
    adapter.parse_line(line(id=2, result={"thread": {"id": "t-old"}}))
    (turn,) = writes(adapter.send("go on"))
    assert turn["params"] == {
        "threadId": "t-old",
        "input": [{"type": "text", "text": "go on", "text_elements": []}],
        "effort": "high",
    }


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"colour": "blue"}, "unknown option"),
        ({"approval_policy": "sometimes"}, "approval_policy must be one of"),
        ({"sandbox": "none"}, "sandbox must be one of"),
    ],
)
def test_bad_options(params: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_adapter("codex", AdapterOptions(params=params))


def test_registered_and_command(monkeypatch: pytest.MonkeyPatch) -> None:
    assert adapter_class("codex") is CodexAdapter and CodexAdapter.resumable
    monkeypatch.delenv(BINARY_ENV, raising=False)
    assert CodexAdapter().build_command([]) == ["codex", "app-server"]
    monkeypatch.setenv(BINARY_ENV, "/opt/codex")
    assert CodexAdapter().build_command(["-c", "x=1"]) == ["/opt/codex", "app-server", "-c", "x=1"]


def test_message_before_the_thread_is_ready_is_held() -> None:
    adapter = CodexAdapter(AdapterOptions(worktree="/w"))
    adapter.startup()
    assert adapter.send("early") == [RUNNING]  # held: nothing written
    adapter.parse_line(line(id=1, result={}))
    events = adapter.parse_line(line(id=2, result={"thread": {"id": THREAD}}))
    (turn,) = writes(events)
    assert turn["method"] == "turn/start" and turn["params"]["input"][0]["text"] == "early"
    assert IDLE not in events


def test_messages_during_a_turn_get_one_turn_each() -> None:
    adapter, _ = ready()
    first = adapter.send("one")
    assert [w["params"]["input"][0]["text"] for w in writes(first)] == ["one"]
    assert first[-1] == RUNNING
    assert adapter.send("two") == [RUNNING] and adapter.send("three") == [RUNNING]
    adapter.parse_line(line(id=3, result={"turn": {"id": "u1", "status": "inProgress"}}))
    events = complete(adapter, "u1")
    assert [w["params"]["input"][0]["text"] for w in writes(events)] == ["two"]
    assert IDLE not in events and any(isinstance(e, TurnResult) for e in events)
    notify(adapter, "turn/started", turn={"id": "u2"})  # before its response: fine too
    events = complete(adapter, "u2")
    assert [w["params"]["input"][0]["text"] for w in writes(events)] == ["three"]
    events = complete(adapter, "u3")
    assert events[-1] == IDLE and not writes(events)


def test_interrupt() -> None:
    adapter, _ = ready()
    assert adapter.encode_interrupt() == b""  # no turn
    adapter.send("long")
    assert adapter.encode_interrupt() is DEFERRED  # Codex has not named the turn yet...
    events = adapter.parse_line(line(id=3, result={"turn": {"id": "u1"}}))
    (interrupt,) = writes(events)  # ...so it is interrupted as soon as it does
    assert interrupt == {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "turn/interrupt",
        "params": {"threadId": THREAD, "turnId": "u1"},
    }
    assert adapter.send("held") == [RUNNING]
    again = _decode(adapter.encode_interrupt())
    assert again["method"] == "turn/interrupt" and again["id"] == 5
    events = adapter.parse_line(line(id=5, error={"code": -32600, "message": "no active turn"}))
    assert ErrorNote("codex turn/interrupt failed: no active turn") in events
    events = complete(adapter, "u1", "interrupted")
    (turn,) = writes(events)  # held messages stay held, then get their turn
    assert turn["params"]["input"][0]["text"] == "held"


def test_turn_usage_is_the_difference_of_totals() -> None:
    adapter, _ = ready()
    for turn_id, total in (("u1", 110), ("u2", None)):
        adapter.send("x")
        notify(adapter, "turn/started", turn={"id": turn_id})
        if total is not None:
            usage = {"total": {"totalTokens": total, "inputTokens": 100}, "last": {}}
            events = notify(adapter, "thread/tokenUsage/updated", turnId=turn_id, tokenUsage=usage)
            assert info(events)["usage"] == {"total_tokens": total, "input_tokens": 100}
        (result,) = [e.result for e in complete(adapter, turn_id) if isinstance(e, TurnResult)]
        if total is None:  # nothing reported for this turn: no made-up zeros
            assert "usage" not in result
        else:
            assert result["usage"] == {"total_tokens": 110, "input_tokens": 100}


def test_response_out_of_order_is_ignored() -> None:
    adapter, _ = ready()
    adapter.send("x")
    notify(adapter, "turn/started", turn={"id": "u1"})
    complete(adapter, "u1")
    late = line(id=3, result={"turn": {"id": "u1"}})
    assert adapter.parse_line(late) == [Output(late)] and adapter.encode_interrupt() == b""


def test_thread_start_error_drops_held_messages_and_next_send_retries() -> None:
    adapter = CodexAdapter(AdapterOptions(worktree="/w"))
    adapter.startup()
    adapter.parse_line(line(id=1, result={}))
    adapter.send("lost")
    events = adapter.parse_line(line(id=2, error={"code": -32600, "message": "no cwd"}))
    assert [e for e in events if not isinstance(e, Output)] == [
        ErrorNote("codex thread/start failed: no cwd"),
        ErrorNote("1 message(s) not delivered: no thread"),
        IDLE,
    ]
    events = adapter.send("retry")
    (start,) = writes(events)
    assert start["method"] == "thread/start" and start["id"] == 3
    events = adapter.parse_line(line(id=3, result={"thread": {"id": THREAD}}))
    (turn,) = writes(events)
    assert turn["params"]["input"][0]["text"] == "retry"


def test_initialize_error_and_thread_without_id() -> None:
    adapter = CodexAdapter(AdapterOptions(worktree="/w"))
    adapter.startup()
    events = adapter.parse_line(line(id=1, error="weird"))
    assert ErrorNote('codex initialize failed: "weird"') in events and events[-1] == IDLE
    (init,) = writes(adapter.send("hi"))
    assert init["method"] == "initialize"
    adapter.parse_line(line(id=2, result=None))
    events = adapter.parse_line(line(id=3, result={"thread": None}))
    assert ErrorNote("codex thread/start answered without a thread id") in events


def test_turn_start_error_moves_on() -> None:
    adapter, _ = ready()
    adapter.send("a")
    adapter.send("b")
    events = adapter.parse_line(line(id=3, error={"code": -32600, "message": "bad input"}))
    assert ErrorNote("codex turn/start failed: bad input") in events
    (turn,) = writes(events)
    assert turn["params"]["input"][0]["text"] == "b"
    events = adapter.parse_line(line(id=4, error={"message": "bad again"}))
    assert events[-1] == IDLE


def test_file_change_approval() -> None:
    adapter, _ = ready(approval_policy="untrusted")
    adapter.send("patch it")
    change = {"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+hi"}
    item = {"type": "fileChange", "id": "call_p", "changes": [change], "status": "inProgress"}
    (started,) = [e for e in notify(adapter, "item/started", item=item) if isinstance(e, Chat)]
    assert started.entry["tool_name"] == "apply_patch" and started.entry["tool_input"] == "/w/a.txt"
    request = {"threadId": THREAD, "turnId": "u", "itemId": "call_p", "reason": None}
    events = adapter.parse_line(
        line(method="item/fileChange/requestApproval", id=7, params=request)
    )
    (ask,) = [e for e in events if isinstance(e, PermissionAsk)]
    assert (ask.request_id, ask.tool_name, ask.tool_input) == ("codex-7", "apply_patch", "/w/a.txt")
    assert ask.tool_use_id == "call_p" and ask.input["changes"] == [change]
    answer = _decode(adapter.encode_permission_response(ask, False, None, None))
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": {"decision": "decline"}}
    done = {**item, "status": "declined"}
    (result,) = [e for e in notify(adapter, "item/completed", item=done) if isinstance(e, Chat)]
    assert result.entry == {
        "role": "tool",
        "tool_name": "apply_patch",
        "tool_result": "declined",
        "is_error": True,
        "tool_use_id": "call_p",
    }


def test_permissions_approval_grants_what_was_asked() -> None:
    adapter, _ = ready()
    asked = {"network": {"enabled": True}}
    params = {"threadId": THREAD, "turnId": "u", "itemId": "i", "cwd": "/w", "reason": "fetch"}
    events = adapter.parse_line(
        line(
            method="item/permissions/requestApproval", id=3, params={**params, "permissions": asked}
        )
    )
    (ask,) = [e for e in events if isinstance(e, PermissionAsk)]
    assert (ask.tool_name, ask.tool_input) == ("permissions", "fetch")
    allow = _decode(adapter.encode_permission_response(ask, True, None, None))
    assert allow["result"] == {"permissions": asked, "scope": "turn"}
    deny = _decode(adapter.encode_permission_response(ask, False, None, None))
    assert deny["result"] == {"permissions": {}, "scope": "turn"}


def test_withdrawn_and_leftover_questions_are_cancelled() -> None:
    adapter, _ = ready()
    adapter.send("x")
    adapter.parse_line(line(id=3, result={"turn": {"id": "u1"}}))
    for rpc_id in (0, 1, 2):
        request = {"threadId": THREAD, "itemId": f"c{rpc_id}", "command": "ls"}
        adapter.parse_line(
            line(method="item/commandExecution/requestApproval", id=rpc_id, params=request)
        )
    resolved = notify(adapter, "serverRequest/resolved", requestId=0)
    assert PermissionDecided("codex-0", "cancelled", "withdrawn by the agent") in resolved
    assert notify(adapter, "serverRequest/resolved", requestId=0)[1:] == []  # once only
    ask = PermissionAsk("codex-1", "shell", "ls", native={"rpc_id": 1, "method": "x"})
    adapter.encode_permission_response(ask, True, None, None)  # answered: not withdrawn
    assert notify(adapter, "serverRequest/resolved", requestId=1)[1:] == []
    events = complete(adapter, "u1", "interrupted")
    decided = [e for e in events if isinstance(e, PermissionDecided)]
    assert decided == [PermissionDecided("codex-2", "cancelled", "the turn ended")]


def test_unknown_server_request_is_refused_at_once() -> None:
    adapter, _ = ready()
    events = adapter.parse_line(
        line(method="item/tool/requestUserInput", id=9, params={"threadId": THREAD})
    )
    (refusal,) = writes(events)
    assert refusal["id"] == 9 and refusal["error"]["code"] == -32601 and "result" not in refusal
    assert (
        ErrorNote("codex asked item/tool/requestUserInput, which agenthost cannot answer; refused")
        in events
    )


def test_other_threads_are_raw_output_only() -> None:
    adapter, _ = ready()
    item = {"type": "agentMessage", "id": "m", "text": "from a sub-agent"}
    other = line(method="item/completed", params={"threadId": "other", "item": item})
    assert adapter.parse_line(other) == [Output(other)]
    ours = adapter.parse_line(
        line(method="item/completed", params={"threadId": THREAD, "item": item})
    )
    assert Chat({"role": "assistant", "content": "from a sub-agent"}) in ours


def test_mcp_tool_call_entries() -> None:
    adapter, _ = ready()
    item = {
        "type": "mcpToolCall",
        "id": "mcp1",
        "server": "docs",
        "tool": "search",
        "arguments": {"query": "codex"},
        "status": "inProgress",
    }
    (call,) = [e.entry for e in notify(adapter, "item/started", item=item) if isinstance(e, Chat)]
    assert (call["tool_name"], call["tool_input"]) == ("mcp__docs__search", "codex")
    done = {**item, "status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}}
    (res,) = [e.entry for e in notify(adapter, "item/completed", item=done) if isinstance(e, Chat)]
    assert (res["tool_result"], res["is_error"]) == ("ok", False)
    failed = {**item, "status": "failed", "error": {"message": "boom"}}
    (res,) = [
        e.entry for e in notify(adapter, "item/completed", item=failed) if isinstance(e, Chat)
    ]
    assert (res["tool_result"], res["is_error"], res["tool_name"]) == (
        "boom",
        True,
        "mcp__docs__search",
    )


@pytest.mark.parametrize(
    ("raw", "note"),
    [
        ("this is not json", "agent printed a line that is not JSON: this is not json"),
        ('{"method": "item/started", ', 'agent printed a line that is not JSON: {"method":'),
        ("[1, 2]", "agent printed a line that is not JSON-RPC: [1, 2]"),
        ('"text"', 'agent printed a line that is not JSON-RPC: "text"'),
        ('{"result": {}}', 'agent printed a line that is not JSON-RPC: {"result": {}}'),
        ("[" * 100_000, "agent printed a line that is not JSON: [[[["),
    ],
)
def test_garbage_lines(raw: str, note: str) -> None:
    adapter, _ = ready()
    events = adapter.parse_line(raw)
    assert events[0] == Output(raw) and len(events) == 2
    assert isinstance(events[1], ErrorNote) and events[1].message.startswith(note)


@pytest.mark.parametrize(
    "raw",
    [
        line(method="thread/goal/cleared", params={"threadId": THREAD}),  # unknown
        line(method="warning", params={"message": "model metadata not found"}),
        line(method="item/started", params=None),
        line(method="item/started", params={"threadId": THREAD, "item": None}),
        line(method="item/started", params={"threadId": THREAD, "item": {"type": "reasoning"}}),
        line(method="item/completed", params={"threadId": THREAD, "item": {"type": "userMessage"}}),
        line(method="item/completed", params={"threadId": THREAD, "item": []}),
        line(method="item/agentMessage/delta", params={"threadId": THREAD, "delta": 5}),
        line(method="thread/tokenUsage/updated", params={"threadId": THREAD, "tokenUsage": None}),
        line(method="serverRequest/resolved", params={"requestId": 99}),
        line(id=42, result={}),  # a response to nothing we asked
        line(id=True, result={}),
        line(id=[1], result={}),
        '{"method": "item/started", "params": {"item": {"id": NaN}}}',
    ],
)
def test_raw_output_only(raw: str) -> None:
    adapter, _ = ready()
    assert adapter.parse_line(raw) == [Output(raw)]


def test_missing_fields_still_end_the_turn() -> None:
    adapter, _ = ready()
    adapter.send("x")
    events = adapter.parse_line(line(method="turn/completed", params={"threadId": THREAD}))
    (result,) = [e.result for e in events if isinstance(e, TurnResult)]
    assert result == {"subtype": "unknown", "is_error": True, "session_id": THREAD}
    assert info(events)["last_error"] == "turn unknown" and events[-1] == IDLE
    note = adapter.parse_line(line(method="error", params=None))[1]
    assert note == ErrorNote("codex error: unknown error")


def test_over_long_line_is_kept_raw() -> None:
    adapter, _ = ready()
    assert adapter.parse_fragment("x" * 100, True) == [Output("x" * 100, continued=True)]
    events = adapter.parse_line('"}')
    assert events[0] == Output('"}') and isinstance(events[1], ErrorNote)
    assert "about 102 characters" in events[1].message
    ok = line(id=77, result={})
    assert adapter.parse_line(ok) == [Output(ok)]  # the next line is parsed again


def test_sent_text_is_always_a_valid_line() -> None:
    adapter, _ = ready()
    (turn,) = writes(adapter.send('lone \ud800 surrogate, "quotes"\nand a newline'))
    assert turn["params"]["input"][0]["text"] == 'lone ? surrogate, "quotes"\nand a newline'


JSON = json_values()
METHODS = st.sampled_from(
    [
        "turn/started",
        "turn/completed",
        "item/started",
        "item/completed",
        "item/agentMessage/delta",
        "thread/tokenUsage/updated",
        "error",
        "serverRequest/resolved",
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    method=METHODS,
    params=JSON,
    item=JSON,
    rpc_id=st.none() | st.integers(-2, 5) | st.text(max_size=3),
)
def test_fuzz_never_raises(method: str, params: Any, item: Any, rpc_id: Any) -> None:
    adapter, _ = ready()
    adapter.send("x")
    msgs: list[Msg] = [
        {"method": method, "params": params},
        {"method": method, "params": {"threadId": THREAD, "item": item, "turn": item}},
        {"method": method, "id": rpc_id, "params": params},
        {"id": rpc_id, "result": params},
        {"id": 3, "error": params},
    ]
    for msg in msgs:
        raw = json.dumps(msg)
        events = adapter.parse_line(raw)
        assert events[0] == Output(raw)
        for ev in events:
            if isinstance(ev, Chat):
                HistoryEntry.model_validate({**ev.entry, "timestamp": "2026-01-01T00:00:00Z"})
            if isinstance(ev, Write):
                _decode(ev.data)


def started(adapter: CodexAdapter, turn_id: str = "u1") -> None:
    adapter.send("x")
    adapter.parse_line(line(id=3, result={"turn": {"id": turn_id}}))


def test_a_failed_turn_without_an_error_notification_is_reported_at_its_end() -> None:
    adapter, _ = ready()
    started(adapter)
    error = {
        "message": "boom",
        "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 502}},
    }
    events = notify(
        adapter, "turn/completed", turn={"id": "u1", "status": "failed", "error": error}
    )
    assert summaries(events)[:3] == [
        ("error", "boom", 502),
        ("failed", "boom", 502),
        ("result", "failed"),
    ]
    assert info(events)["last_error"] == "boom"


def test_an_error_of_another_turn_or_a_retry_does_not_fail_the_running_one() -> None:
    adapter, _ = ready()
    started(adapter)
    other = notify(adapter, "error", error={"message": "old"}, willRetry=False, turnId="u0")
    retry = notify(adapter, "error", error={"message": "hm"}, willRetry=True, turnId="u1")
    assert summaries(other + retry) == [
        ("error", "codex error: old"),
        ("error", "codex error (will retry): hm"),
    ]
    # so the turn's end reports its failure (once)
    events = complete(adapter, "u1", "failed")
    assert summaries(events)[:2] == [("error", "turn failed"), ("failed", "turn failed", None)]


@pytest.mark.parametrize(
    "info_value",
    [
        None,
        "internalServerError",
        [429],
        {"x": None},
        {"x": {"httpStatusCode": "429"}},
        {"x": {"httpStatusCode": True}},
        {"x": {"httpStatusCode": None}},
        {"x": [{"httpStatusCode": 429}]},
    ],
    ids=repr,
)
def test_garbage_error_info_gives_no_http_status(info_value: Any) -> None:
    adapter, _ = ready()
    started(adapter)
    error = {"message": "bad", "codexErrorInfo": info_value, "additionalDetails": 5}
    events = notify(adapter, "error", error=error, willRetry=False, turnId="u1")
    assert summaries(events) == [("error", "bad"), ("failed", "bad", None)]
