"""agenthost.agents.acp: the ``acp`` adapter, in memory (lines in, events and bytes out).

A :class:`Peer` plays the ACP agent: it reads what the adapter writes (JSON-RPC lines)
and feeds it the agent's answers, updates and requests as lines.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.acp import jsonrpc
from agenthost.agents import adapter_class, make_adapter
from agenthost.agents.acp import OPEN_MAX, AcpAdapter
from agenthost.agents.acpupdates import KEPT, MESSAGE_MAX, diff_summary
from agenthost.agents.base import (
    DEFERRED,
    AdapterEvent,
    AdapterOptions,
    CallFailed,
    Chat,
    ClientCall,
    ErrorNote,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TurnResult,
    Write,
)
from agenthost.errors import ConfigError, InvalidPayload
from agenthost.protocol import AgentState

from jsonvalues import json_values

SID = "sess-1"
CWD = "/work/tree"
Msg = dict[str, Any]
OPTIONS = [
    {"optionId": "yes-always", "name": "Always", "kind": "allow_always"},
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    {"optionId": "never", "name": "Never", "kind": "reject_always"},
]
MODES = {"currentModeId": "default", "availableModes": [{"id": "default"}, {"id": "plan"}]}


class Peer:
    """The agent's side of one adapter: what it was sent, and what it reports."""

    def __init__(self, resume: str | None = None, **params: str) -> None:
        self.adapter = AcpAdapter(AdapterOptions(CWD, resume, params))
        self.sent: list[Msg] = []  # lines the adapter wrote, decoded
        self.events: list[AdapterEvent] = []  # everything but Output and Write
        self.take(self.adapter.startup())

    def take(self, events: list[AdapterEvent]) -> list[AdapterEvent]:
        kept = []
        for ev in events:
            if isinstance(ev, Write):
                self.sent.extend(decode(ev.data))
            elif not isinstance(ev, Output):
                kept.append(ev)
        self.events.extend(kept)
        return kept

    def line(self, line: str) -> list[AdapterEvent]:
        events = self.adapter.parse_line(line)
        assert events[0] == Output(line), "the raw line comes first"
        return self.take(events)

    def feed(self, **msg: Any) -> list[AdapterEvent]:
        return self.line(json.dumps({"jsonrpc": "2.0", **msg}))

    def last(self, method: str | None = None) -> Msg:
        """The last request (of ``method``) the adapter sent."""
        return next(m for m in reversed(self.sent) if method is None or m.get("method") == method)

    def answer(
        self, method: str, result: Any = None, error: Msg | None = None
    ) -> list[AdapterEvent]:
        rid = self.last(method)["id"]
        if error is not None:
            return self.feed(id=rid, error=error)
        return self.feed(id=rid, result={} if result is None else result)

    def update(self, sid: str = SID, **update: Any) -> list[AdapterEvent]:
        return self.feed(method="session/update", params={"sessionId": sid, "update": update})

    def chunk(
        self, text: str, kind: str = "agent_message_chunk", **more: Any
    ) -> list[AdapterEvent]:
        return self.update(sessionUpdate=kind, content={"type": "text", "text": text}, **more)

    def request(self, rid: Any, method: str, **params: Any) -> list[AdapterEvent]:
        return self.feed(id=rid, method=method, params={"sessionId": SID, **params})

    def send(self, text: str) -> list[AdapterEvent]:
        return self.take(self.adapter.send(text))

    def interrupt(self) -> bytes | Any:
        data = self.adapter.encode_interrupt()
        if isinstance(data, bytes) and data:
            self.sent.extend(decode(data))
        return data

    def respond(self, ask: PermissionAsk, allow: bool, option_id: str | None = None) -> Msg:
        data = self.adapter.encode_permission_response(ask, allow, None, None, option_id)
        (msg,) = decode(data)
        return msg


def decode(data: bytes) -> list[Msg]:
    assert data.endswith(b"\n")
    msgs = [json.loads(line) for line in data.splitlines()]
    assert all(m["jsonrpc"] == "2.0" for m in msgs)
    return msgs


def ready(peer: Peer | None = None, caps: Msg | None = None, **new: Any) -> Peer:
    """A peer whose adapter has its session (``session/new`` answered)."""
    peer = peer or Peer()
    peer.answer("initialize", {"protocolVersion": 1, "agentCapabilities": caps or {}})
    peer.answer("session/new", {"sessionId": SID, **new})
    return peer


def entries(events: list[AdapterEvent]) -> list[Msg]:
    return [ev.entry for ev in events if isinstance(ev, Chat)]


def info(events: list[AdapterEvent]) -> Msg:
    fields: Msg = {}
    for ev in events:
        if isinstance(ev, InfoUpdate):
            fields.update(ev.fields)
    return fields


def kinds(events: list[AdapterEvent]) -> list[str]:
    return [type(ev).__name__ for ev in events]


def errors(events: list[AdapterEvent]) -> list[str]:
    return [ev.message for ev in events if isinstance(ev, ErrorNote)]


IDLE = StateChange(AgentState.IDLE)
RUNNING = StateChange(AgentState.RUNNING)


# --- the kind, the command, the environment -------------------------------------------


def test_registered_as_acp_and_needs_a_command() -> None:
    assert adapter_class("acp") is AcpAdapter
    adapter = make_adapter("acp")
    assert adapter.structured and not adapter.passthrough and adapter.resumable
    assert adapter.build_command(["gemini", "--acp"]) == ["gemini", "--acp"]
    with pytest.raises(ConfigError, match="needs a command"):
        adapter.build_command([])
    with pytest.raises(ConfigError, match="unknown option"):
        make_adapter("acp", AdapterOptions(params={"sandbox": "x"}))


@pytest.mark.parametrize(
    ("value", "extra"),
    [(None, {}), ("1", {}), ("yes", {"IS_SANDBOX": "1"}), ("TRUE", {"IS_SANDBOX": "1"}), ("0", {})],
)
def test_is_sandbox_yes_becomes_1(
    value: str | None, extra: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv("IS_SANDBOX", raising=False)
    else:
        monkeypatch.setenv("IS_SANDBOX", value)
    assert AcpAdapter().environment() == extra


# --- the handshake ----------------------------------------------------------------------


def test_initialize_advertises_fs_and_terminal_then_opens_a_session() -> None:
    peer = Peer()
    (init,) = peer.sent
    assert init["method"] == "initialize"
    params = init["params"]
    assert params["protocolVersion"] == 1
    assert params["clientCapabilities"] == {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
    }
    assert params["clientInfo"]["name"] == "agenthost"
    agent_info = {"name": "gemini-cli", "version": "0.9.0"}
    events = peer.answer("initialize", {"protocolVersion": 1, "agentInfo": agent_info})
    assert info(events) == {"agent_name": "gemini-cli", "agent_version": "0.9.0"}
    new = peer.last()
    assert new["method"] == "session/new"
    assert new["params"] == {"cwd": CWD, "mcpServers": []}
    events = peer.answer("session/new", {"sessionId": SID, "modes": MODES})
    assert info(events) == {
        "session_id": SID,
        "mode": "default",
        "modes": {"current": "default", "available": ["default", "plan"]},
    }
    assert events[-1] == IDLE
    assert peer.adapter.session_id == SID


def test_authenticate_with_the_chosen_method() -> None:
    peer = Peer(auth="oauth")
    methods = [{"id": "oauth", "name": "Log in"}, {"id": "api-key", "name": "Key"}]
    peer.answer("initialize", {"protocolVersion": 1, "authMethods": methods})
    assert peer.last()["method"] == "authenticate"
    assert peer.last()["params"] == {"methodId": "oauth"}
    peer.answer("authenticate")
    assert peer.last()["method"] == "session/new"


def test_auth_required_names_the_methods_the_agent_offers() -> None:
    peer = Peer()
    methods = [{"id": "oauth-personal", "name": "Log in"}, {"id": "gemini-api-key"}]
    peer.answer("initialize", {"protocolVersion": 1, "authMethods": methods})
    events = peer.answer(
        "session/new", error={"code": -32000, "message": "Authentication required"}
    )
    (note, *_) = errors(events)
    assert "Authentication required" in note
    assert "--agent-opt auth=METHOD" in note and "oauth-personal, gemini-api-key" in note
    assert events[-1] == IDLE
    # the next send tries the session again, and is delivered once it exists
    events = peer.send("hi")
    assert events == [RUNNING] and peer.last()["method"] == "session/new"
    peer.answer("session/new", {"sessionId": SID})
    assert peer.last("session/prompt")["params"]["prompt"] == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_an_agent_of_another_acp_version_is_not_used(version: Any) -> None:
    peer = Peer()
    events = peer.answer("initialize", {"protocolVersion": version})
    assert "ACP version" in errors(events)[0] and events[-1] == IDLE
    assert peer.last()["method"] == "initialize"  # no session asked for
    peer.send("hi")  # tries again
    assert [m.get("method") for m in peer.sent] == ["initialize", "initialize"]


def test_a_failed_initialize_drops_what_was_held() -> None:
    peer = Peer()
    peer.send("one")
    events = peer.answer("initialize", error={"code": -32603, "message": "boom"})
    assert errors(events) == [
        "the agent's initialize failed: boom",
        "1 message(s) not delivered: no session",
    ]


# --- resume -------------------------------------------------------------------------------

RESUME_CASES = {
    "resume offered": (
        {"sessionCapabilities": {"resume": {}}, "loadSession": True},
        "session/resume",
    ),
    "load only": ({"loadSession": True}, "session/load"),
}


@pytest.mark.parametrize(("caps", "method"), RESUME_CASES.values(), ids=list(RESUME_CASES))
def test_resume_prefers_session_resume(caps: Msg, method: str) -> None:
    peer = Peer(resume="old-sess")
    peer.answer("initialize", {"protocolVersion": 1, "agentCapabilities": caps})
    request = peer.last()
    assert request["method"] == method
    assert request["params"] == {"sessionId": "old-sess", "cwd": CWD, "mcpServers": []}
    events = peer.answer(method, {"modes": MODES})
    assert info(events)["session_id"] == "old-sess" and events[-1] == IDLE


def test_an_agent_that_cannot_resume_starts_a_new_session_and_says_so() -> None:
    peer = Peer(resume="old-sess")
    events = peer.answer("initialize", {"protocolVersion": 1, "agentCapabilities": {}})
    assert errors(events) == ["the agent cannot resume session old-sess: a new session starts"]
    assert peer.last()["method"] == "session/new"


def test_a_failed_load_starts_a_new_session() -> None:
    peer = Peer(resume="gone")
    peer.answer("initialize", {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}})
    events = peer.answer("session/load", error={"code": -32002, "message": "Resource not found"})
    assert errors(events) == [
        "the agent's session/load failed: Resource not found",
        "could not resume session gone: a new session starts",
    ]
    assert peer.last()["method"] == "session/new"
    events = peer.answer("session/new", {"sessionId": "fresh"})
    assert info(events)["session_id"] == "fresh" and peer.adapter.session_id == "fresh"


def replayed(peer: Peer, sid: str = "old") -> list[AdapterEvent]:
    text = {"type": "text", "text": "earlier question"}
    events = peer.update(sid, sessionUpdate="user_message_chunk", content=text)
    events += peer.update(
        sid, sessionUpdate="agent_message_chunk", content={"type": "text", "text": "old answer"}
    )
    events += peer.update(
        sid, sessionUpdate="tool_call", toolCallId="t-old", title="ls", status="completed"
    )
    events += peer.update(
        sid, sessionUpdate="plan", entries=[{"content": "x", "status": "pending"}]
    )
    events += peer.update(sid, sessionUpdate="current_mode_update", currentModeId="plan")
    return events


@pytest.mark.parametrize(
    "after_answer", [False, True], ids=["replay first", "replay after (gemini)"]
)
def test_a_load_replay_is_not_recorded_again(after_answer: bool) -> None:
    peer = Peer(resume="old")
    peer.answer("initialize", {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}})
    events: list[AdapterEvent] = []
    if not after_answer:
        for ev in replayed(peer):
            events.append(ev)
    events += peer.answer("session/load", {})
    if after_answer:
        events += replayed(peer)
    assert entries(events) == []  # raw output only
    assert not errors(events)
    assert info(events)["mode"] == "plan" and info(events)["plan"][0]["content"] == "x"
    assert "t-old" not in peer.adapter.updates.tools
    # the first prompt ends the replay
    peer.send("new question")
    events = peer.update(
        "old", sessionUpdate="agent_message_chunk", content={"type": "text", "text": "new answer"}
    )
    events += peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert entries(events) == [{"role": "assistant", "content": "new answer"}]


def test_messages_before_the_first_prompt_of_a_new_session_are_recorded() -> None:
    peer = ready()
    events = peer.chunk("Warning: the config file is odd")
    events += peer.send("hi")
    assert entries(events) == [{"role": "assistant", "content": "Warning: the config file is odd"}]


# --- modes --------------------------------------------------------------------------------


def test_set_mode_once_the_session_exists_then_the_held_message() -> None:
    peer = Peer(mode="plan")
    peer.send("first")
    peer.answer("initialize", {"protocolVersion": 1})
    peer.answer("session/new", {"sessionId": SID, "modes": MODES})
    request = peer.last()
    assert request["method"] == "session/set_mode"
    assert request["params"] == {"sessionId": SID, "modeId": "plan"}
    assert not any(m.get("method") == "session/prompt" for m in peer.sent)
    events = peer.answer("session/set_mode")
    assert info(events) == {
        "mode": "plan",
        "modes": {"current": "plan", "available": ["default", "plan"]},
    }
    assert peer.last()["method"] == "session/prompt"


def test_no_set_mode_when_the_session_is_in_that_mode_already() -> None:
    peer = Peer(mode="default")
    ready(peer, modes=MODES)
    assert not any(m.get("method") == "session/set_mode" for m in peer.sent)


def test_a_refused_mode_leaves_the_session_usable() -> None:
    peer = Peer(mode="yolo")
    ready(peer, modes=MODES)
    events = peer.answer("session/set_mode", error={"code": -32602, "message": "unknown mode"})
    assert errors(events) == ["the agent's session/set_mode failed: unknown mode"]
    assert events[-1] == IDLE


# --- turns -------------------------------------------------------------------------------


def test_a_text_turn() -> None:
    peer = ready()
    events = peer.send("héllo \ud800")
    assert events == [RUNNING]
    prompt = peer.last()
    assert prompt["method"] == "session/prompt"
    assert prompt["params"] == {"sessionId": SID, "prompt": [{"type": "text", "text": "héllo ?"}]}
    events = peer.chunk("Hel") + peer.chunk("lo") + peer.chunk("!")
    assert events == []  # joined until the message ends
    usage = {"inputTokens": 10, "outputTokens": 5, "cachedReadTokens": 2, "cachedWriteTokens": 1}
    usage |= {"thoughtTokens": 3, "totalTokens": 21, "bogus": "x", "negative": -1}
    events = peer.answer("session/prompt", {"stopReason": "end_turn", "usage": usage})
    counts = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 2,
        "cache_creation_input_tokens": 1,
        "thought_tokens": 3,
        "total_tokens": 21,
    }
    assert kinds(events) == ["Chat", "InfoUpdate", "TurnResult", "InfoUpdate", "StateChange"]
    assert entries(events) == [{"role": "assistant", "content": "Hello!"}]
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result == {
        "stop_reason": "end_turn",
        "subtype": "end_turn",
        "is_error": False,
        "interrupted": False,
        "usage": counts,
        "session_id": SID,
    }
    assert info(events) == {"usage": counts, "turns": 1}
    assert events[-1] == IDLE


def test_messages_sent_during_a_turn_get_their_own_prompts() -> None:
    peer = ready()
    peer.send("one")
    assert peer.send("two") == [RUNNING]
    assert peer.send("three") == [RUNNING]
    assert [
        m["params"]["prompt"][0]["text"] for m in peer.sent if m.get("method") == "session/prompt"
    ] == ["one"]
    events = peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert IDLE not in events
    assert peer.last()["params"]["prompt"][0]["text"] == "two"
    peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert peer.last()["params"]["prompt"][0]["text"] == "three"
    events = peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert events[-1] == IDLE


def test_messages_sent_before_the_session_exists_wait_for_it() -> None:
    peer = Peer()
    assert peer.send("early") == [RUNNING]
    assert [m["method"] for m in peer.sent] == ["initialize"]
    ready(peer)
    assert peer.last()["method"] == "session/prompt"


FAILED = "failed"
STOPS = {
    "end_turn": (False, []),
    "cancelled": (False, [("interrupted", "turn interrupted")]),
    "refusal": (True, [("error", "the agent refused to continue (stop reason: refusal)")]),
    "max_tokens": (
        True,
        [("error", "the model reached its output token limit (stop reason: max_tokens)")],
    ),
    "max_turn_requests": (
        True,
        [
            (
                "error",
                "the turn reached the agent's limit of model requests"
                " (stop reason: max_turn_requests)",
            )
        ],
    ),
    "a_new_reason": (True, [("error", "the turn ended with stop reason a_new_reason")]),
}


@pytest.mark.parametrize("reason", list(STOPS))
def test_stop_reasons(reason: str) -> None:
    is_error, expected = STOPS[reason]
    peer = ready()
    peer.send("go")
    events = peer.answer("session/prompt", {"stopReason": reason})
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result["stop_reason"] == result["subtype"] == reason
    assert result["is_error"] is is_error
    assert result["interrupted"] is (reason == "cancelled")
    said = []
    for entry in entries(events):
        if entry.get("is_error"):
            said.append(("error", entry["content"]))
        elif entry.get("interrupted"):
            said.append(("interrupted", entry["content"]))
    assert said == expected
    assert [e for e in errors(events)] == [c for k, c in expected if k == "error"]
    assert events[-1] == IDLE


@pytest.mark.parametrize("answer", [{}, {"stopReason": None}, {"stopReason": 7}, "nonsense", None])
def test_a_prompt_answer_without_a_stop_reason(answer: Any) -> None:
    peer = ready()
    peer.send("go")
    events = peer.answer("session/prompt", answer if answer is not None else {})
    assert "without a stopReason" in errors(events)[0]
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result["is_error"] and result["stop_reason"] == "unknown"
    assert events[-1] == IDLE


def test_an_error_answer_to_the_prompt_fails_the_turn() -> None:
    peer = ready()
    peer.send("go")
    peer.chunk("Partial")
    peer.send("next")
    error = {"code": -32603, "message": "Internal error", "data": {"details": "API Error: 500"}}
    events = peer.answer("session/prompt", error=error)
    text = 'the agent\'s turn failed: Internal error ({"details": "API Error: 500"})'
    assert entries(events) == [
        {"role": "assistant", "content": "Partial"},
        {"role": "assistant", "content": text, "is_error": True},
    ]
    assert errors(events) == [text]
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result["is_error"] and result["stop_reason"] == "error" and result["error"] == text
    assert peer.last()["params"]["prompt"][0]["text"] == "next"  # the next one goes on


# --- message chunks ------------------------------------------------------------------------


def test_one_entry_per_message_and_per_thought() -> None:
    peer = ready()
    peer.send("go")
    events = peer.chunk("Let me ", "agent_thought_chunk") + peer.chunk(
        "think", "agent_thought_chunk"
    )
    # codex-acp: a warning without messageId, then the model's message with one
    events += peer.chunk("Warning: no metadata")
    events += peer.chunk("Answer ", messageId="m1") + peer.chunk("one", messageId="m1")
    events += peer.chunk("Answer two", messageId="m2")  # a new message id: a new message
    events += peer.update(sessionUpdate="usage_update", used=5, size=100)  # does not cut it
    events += peer.chunk(" continued", messageId="m2")
    events += peer.chunk("", "agent_thought_chunk")  # an empty thought records nothing
    events += peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert entries(events) == [
        {"role": "assistant", "content": "Let me think", "thought": True},
        {"role": "assistant", "content": "Warning: no metadata"},
        {"role": "assistant", "content": "Answer one"},
        {"role": "assistant", "content": "Answer two continued"},
    ]


@pytest.mark.parametrize(
    ("block", "text"),
    [
        ({"type": "image", "data": "...", "mimeType": "image/png"}, "[image]"),
        ({"type": "audio", "data": "..."}, "[audio]"),
        ({"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}, "[a.txt]"),
        ({"type": "resource_link", "uri": "file:///a.txt"}, "[file:///a.txt]"),
        ({"type": "resource", "resource": {"uri": "file:///b", "text": "inline"}}, "inline"),
        ({"type": "resource", "resource": {"uri": "file:///b", "blob": "AAA"}}, "[file:///b]"),
        ({"type": "hologram"}, "[hologram]"),
        ({"type": 5}, ""),
        ("just a string", ""),
        (None, ""),
    ],
)
def test_content_blocks_that_are_not_text(block: Any, text: str) -> None:
    peer = ready()
    peer.send("go")
    peer.chunk("see: ")
    peer.update(sessionUpdate="agent_message_chunk", content=block)
    events = peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert entries(events)[0]["content"] == "see: " + text


def test_a_huge_message_is_recorded_in_pieces() -> None:
    peer = ready()
    peer.send("go")
    piece = "x" * (MESSAGE_MAX // 2 + 1)
    events = peer.chunk(piece) + peer.chunk(piece) + peer.chunk(piece)
    events += peer.answer("session/prompt", {"stopReason": "end_turn"})
    sizes = [len(e["content"]) for e in entries(events)]
    assert sizes == [len(piece)] * 3


# --- tool calls ----------------------------------------------------------------------------


def test_claude_announces_a_call_without_input_then_sends_it() -> None:
    peer = ready()
    peer.send("go")
    peer.chunk("I will list.")
    events = peer.update(
        sessionUpdate="tool_call",
        toolCallId="t1",
        title="Terminal",
        kind="execute",
        status="pending",
        rawInput={},
    )
    assert entries(events) == [{"role": "assistant", "content": "I will list."}]  # not the call yet
    events = peer.update(
        sessionUpdate="tool_call_update",
        toolCallId="t1",
        title="`ls -la`",
        rawInput={"command": "ls -la"},
    )
    start = {
        "role": "tool",
        "tool_name": "`ls -la`",
        "tool_input": "ls -la",
        "input": {"command": "ls -la"},
        "tool_use_id": "t1",
        "status": "pending",
        "tool_kind": "execute",
    }
    assert entries(events) == [start]
    events = peer.update(sessionUpdate="tool_call_update", toolCallId="t1", status="in_progress")
    assert entries(events) == []  # never two start entries
    content = [{"type": "content", "content": {"type": "text", "text": "a\nb"}}]
    events = peer.update(
        sessionUpdate="tool_call_update", toolCallId="t1", status="completed", content=content
    )
    assert entries(events) == [
        {
            "role": "tool",
            "tool_name": "`ls -la`",
            "tool_use_id": "t1",
            "tool_result": "a\nb",
            "is_error": False,
            "status": "completed",
        }
    ]
    assert "t1" not in peer.adapter.updates.tools


def test_a_terminals_output_streamed_in_meta_is_the_result() -> None:
    """codex-acp: the call's content names a terminal; the command's output comes in
    ``_meta.terminal_output_delta`` of its updates, its end in ``_meta.terminal_exit``."""
    peer = ready()
    peer.send("go")
    terminal = [{"type": "terminal", "terminalId": "call_1"}]
    peer.update(
        sessionUpdate="tool_call",
        toolCallId="call_1",
        title="Run ls",
        kind="execute",
        status="in_progress",
        rawInput={"command": ["ls"]},
        content=terminal,
    )
    for data in ("a\n", "b\n"):
        meta = {"terminal_output_delta": {"data": data, "terminal_id": "call_1"}}
        assert (
            entries(peer.update(sessionUpdate="tool_call_update", toolCallId="call_1", _meta=meta))
            == []
        )
    events = peer.update(
        sessionUpdate="tool_call_update",
        toolCallId="call_1",
        status="completed",
        content=terminal,
        _meta={"terminal_exit": {"exit_code": 2, "signal": None}},
    )
    (end,) = entries(events)
    assert (end["tool_result"], end["exit_code"], end["is_error"]) == ("a\nb", 2, True)


def test_streamed_output_does_not_hide_real_content_and_is_bounded() -> None:
    from agenthost.agents.acpupdates import OUTPUT_MAX

    peer = ready()
    peer.send("go")
    peer.update(sessionUpdate="tool_call", toolCallId="t", title="x", status="in_progress")
    huge = {"terminal_output_delta": {"data": "y" * (OUTPUT_MAX + 10)}}
    peer.update(sessionUpdate="tool_call_update", toolCallId="t", _meta=huge)
    assert peer.adapter.updates.tools["t"].output_size == OUTPUT_MAX
    text = [{"type": "content", "content": {"type": "text", "text": "own words"}}]
    events = peer.update(
        sessionUpdate="tool_call_update", toolCallId="t", status="completed", content=text
    )
    assert entries(events)[0]["tool_result"] == "own words"


@pytest.mark.parametrize(
    ("update", "result", "is_error"),
    [
        (
            {
                "status": "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": "denied"}}],
            },
            "denied",
            True,
        ),
        (
            {
                "status": "completed",
                "content": [
                    {"type": "diff", "path": "/a.py", "oldText": "x\ny\n", "newText": "x\nz\nw\n"}
                ],
            },
            "/a.py: +2 -1",
            False,
        ),
        (
            {
                "status": "completed",
                "content": [
                    {"type": "diff", "path": "/new.py", "oldText": None, "newText": "1\n2\n"}
                ],
            },
            "/new.py: +2 -0",
            False,
        ),
        (
            {"status": "completed", "content": [{"type": "terminal", "terminalId": "term-1"}]},
            "[terminal term-1]",
            False,
        ),
        ({"status": "completed", "rawOutput": {"stdout": "hi"}}, '{"stdout":"hi"}', False),
        ({"status": "completed", "rawOutput": "plain"}, "plain", False),
        ({"status": "completed", "content": "not a list"}, "", False),
        ({"status": "completed", "content": [7, None, {"type": "weird"}]}, "", False),
    ],
)
def test_tool_results(update: Msg, result: str, is_error: bool) -> None:
    peer = ready()
    peer.send("go")
    peer.update(
        sessionUpdate="tool_call",
        toolCallId="t1",
        title="Edit a.py",
        kind="edit",
        rawInput={"path": "/a.py"},
    )
    events = peer.update(sessionUpdate="tool_call_update", toolCallId="t1", **update)
    (end,) = [e for e in entries(events) if "tool_result" in e]
    assert end["tool_result"] == result and end["is_error"] is is_error


@pytest.mark.parametrize(
    ("call", "name", "summary", "tool_input"),
    [
        (
            {"title": "Read file", "kind": "read", "rawInput": {"file_path": "/x"}},
            "Read file",
            "/x",
            {"file_path": "/x"},
        ),
        (
            {"kind": "execute", "rawInput": {"command": ["bash", "-lc", "ls"]}},
            "execute",
            "bash -lc ls",
            {"command": ["bash", "-lc", "ls"]},
        ),
        ({"title": "Search\nfor it", "rawInput": {"x": 1}}, "Search for it", "Search", {"x": 1}),
        (
            {"title": "Edit", "locations": [{"path": "/y.py", "line": 3}], "rawInput": "diff text"},
            "Edit",
            "/y.py",
            {"input": "diff text"},
        ),
        (
            {"title": 5, "kind": None, "rawInput": {"command": "ls"}},
            "tool",
            "ls",
            {"command": "ls"},
        ),
    ],
)
def test_tool_names_and_summaries(call: Msg, name: str, summary: str, tool_input: Msg) -> None:
    peer = ready()
    peer.send("go")
    events = peer.update(sessionUpdate="tool_call", toolCallId="t1", status="in_progress", **call)
    (start,) = entries(events)
    assert (start["tool_name"], start["tool_input"], start["input"]) == (name, summary, tool_input)


def test_an_update_of_a_call_never_announced_announces_it() -> None:
    peer = ready()
    peer.send("go")
    events = peer.update(sessionUpdate="tool_call_update", toolCallId="ghost", status="pending")
    assert events == []
    events = peer.update(
        sessionUpdate="tool_call_update", toolCallId="ghost2", status="completed", title="x"
    )
    start, end = entries(events)
    assert (start["tool_name"], start["tool_use_id"], "tool_result" in start) == (
        "x",
        "ghost2",
        False,
    )
    assert (end["tool_result"], end["tool_use_id"]) == ("", "ghost2")
    for bad in (None, 5, ""):
        events = peer.update(sessionUpdate="tool_call_update", toolCallId=bad)
        assert errors(events) == ["agent sent a tool_call_update without a toolCallId"]


def test_the_tool_table_is_bounded() -> None:
    peer = ready()
    peer.send("go")
    for n in range(KEPT + 50):
        peer.update(sessionUpdate="tool_call", toolCallId=f"t{n}", title="x", status="pending")
    tools = peer.adapter.updates.tools
    assert len(tools) == KEPT and "t0" not in tools and f"t{KEPT + 49}" in tools


def test_plans_and_session_info() -> None:
    peer = ready()
    peer.send("go")
    plan = [
        {"content": "Read", "priority": "high", "status": "completed"},
        {"content": "Fix", "priority": "medium", "status": "in_progress"},
        {"content": "Test", "status": "pending"},
        {"content": 5},
        "junk",
    ]
    events = peer.update(sessionUpdate="plan", entries=plan)
    (entry,) = entries(events)
    assert entry["content"] == "[x] Read\n[~] Fix\n[ ] Test"
    kept = [
        {"content": "Read", "status": "completed", "priority": "high"},
        {"content": "Fix", "status": "in_progress", "priority": "medium"},
        {"content": "Test", "status": "pending", "priority": "medium"},
    ]
    assert entry["plan"] == kept and info(events) == {"plan": kept}
    commands = [{"name": "review", "description": "r"}, {"name": 5}, "x"]
    events = peer.update(sessionUpdate="available_commands_update", availableCommands=commands)
    events += peer.update(sessionUpdate="session_info_update", title="Fixing the bug")
    events += peer.update(sessionUpdate="current_mode_update", currentModeId="plan")
    assert entries(events) == []
    assert info(events) == {
        "commands": ["review"],
        "session_title": "Fixing the bug",
        "mode": "plan",
    }


@pytest.mark.parametrize(
    ("update", "fields"),
    [
        (
            {"used": 10, "size": 100, "cost": {"amount": 0.5, "currency": "USD"}},
            {"context": {"used": 10, "size": 100}, "cost_usd": 0.5},
        ),
        (
            {"used": 10, "size": 100, "cost": {"amount": 3, "currency": "EUR"}},
            {"context": {"used": 10, "size": 100}},
        ),
        ({"used": "10", "size": 100, "cost": {"amount": "0.5", "currency": "USD"}}, {}),
        ({"used": True, "size": 1, "cost": {"amount": 10**400, "currency": "USD"}}, {}),
        ({"cost": {"amount": 1, "currency": "USD"}}, {"cost_usd": 1.0}),
    ],
)
def test_usage_updates(update: Msg, fields: Msg) -> None:
    peer = ready()
    assert info(peer.update(sessionUpdate="usage_update", **update)) == fields


# --- permissions ---------------------------------------------------------------------------


def ask(peer: Peer, rid: Any = 7, tool: Msg | None = None, options: Any = None) -> PermissionAsk:
    tool = (
        tool
        if tool is not None
        else {
            "toolCallId": "t1",
            "title": "`rm x`",
            "kind": "execute",
            "rawInput": {"command": "rm x"},
        }
    )
    events = peer.request(
        rid,
        "session/request_permission",
        toolCall=tool,
        options=OPTIONS if options is None else options,
    )
    (question,) = [ev for ev in events if isinstance(ev, PermissionAsk)]
    return question


def test_a_permission_request_becomes_a_pending_question() -> None:
    peer = ready()
    peer.send("go")
    question = ask(peer)
    assert question.request_id == "acp-7"
    assert (question.tool_name, question.tool_input, question.input) == (
        "`rm x`",
        "rm x",
        {"command": "rm x"},
    )
    assert question.tool_use_id == "t1" and question.native == {"rpc_id": 7}
    assert question.options == (
        {"id": "yes-always", "name": "Always", "kind": "allow_always"},
        {"id": "yes", "name": "Allow", "kind": "allow_once"},
        {"id": "no", "name": "Reject", "kind": "reject_once"},
        {"id": "never", "name": "Never", "kind": "reject_always"},
    )
    assert entries(peer.events) == []  # gemini announces no call before it asks


@pytest.mark.parametrize(
    ("options", "allow", "option_id", "chosen"),
    [
        (OPTIONS, True, None, "yes"),
        (OPTIONS, False, None, "no"),
        (OPTIONS, True, "yes-always", "yes-always"),
        (OPTIONS, False, "never", "never"),
        ([OPTIONS[0], OPTIONS[3]], True, None, "yes-always"),  # no allow_once: always
        ([OPTIONS[0], OPTIONS[3]], False, None, "never"),
        ([OPTIONS[1]], False, None, None),  # nothing to reject with: cancelled
    ],
)
def test_the_answer_picks_an_option(
    options: list[Msg], allow: bool, option_id: str | None, chosen: str | None
) -> None:
    peer = ready()
    peer.send("go")
    question = ask(peer, "r-1", options=options)
    answer = peer.respond(question, allow, option_id)
    assert answer["id"] == "r-1"
    if chosen is None:
        assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
    else:
        assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": chosen}}


def test_the_answer_cannot_change_the_input() -> None:
    peer = ready()
    peer.send("go")
    question = ask(peer)
    with pytest.raises(InvalidPayload, match="cannot change"):
        peer.adapter.encode_permission_response(question, True, None, {"command": "ls"})
    assert peer.adapter.encode_permission_response(question, True, "ok", {"command": "rm x"})


@pytest.mark.parametrize(
    "options",
    [[], "x", [{"optionId": "a", "kind": "maybe"}], [{"kind": "allow_once"}], [5, None]],
)
def test_a_question_without_a_valid_option_is_refused(options: Any) -> None:
    peer = ready()
    peer.send("go")
    tool = {"toolCallId": "t1", "title": "x"}
    events = peer.request(3, "session/request_permission", toolCall=tool, options=options)
    assert not any(isinstance(ev, PermissionAsk) for ev in events)
    assert errors(events) and peer.sent[-1]["id"] == 3 and peer.sent[-1]["error"]["code"] == -32602


def test_invalid_options_are_left_out_and_names_default_to_ids() -> None:
    peer = ready()
    peer.send("go")
    options = [{"optionId": "a", "kind": "allow_once"}, {"optionId": "b", "kind": "bogus"}, "x"]
    question = ask(peer, options=options)
    assert question.options == ({"id": "a", "name": "a", "kind": "allow_once"},)


def test_a_known_call_is_recorded_before_its_question() -> None:
    peer = ready()
    peer.send("go")
    peer.chunk("Let me delete it.")
    events = peer.update(
        sessionUpdate="tool_call", toolCallId="t1", title="Terminal", kind="execute", rawInput={}
    )
    assert entries(events) == [{"role": "assistant", "content": "Let me delete it."}]
    events = peer.request(
        4,
        "session/request_permission",
        toolCall={"toolCallId": "t1", "rawInput": {"command": "rm x"}},
        options=OPTIONS,
    )
    assert kinds(events) == ["Chat", "PermissionAsk"]  # the call, then its question
    (start,) = entries(events)
    assert (start["tool_use_id"], start["tool_input"]) == ("t1", "rm x")
    assert events[-1].input == {"command": "rm x"}  # type: ignore[union-attr]


def test_the_same_question_id_twice() -> None:
    peer = ready()
    peer.send("go")
    ask(peer, 9)
    events = peer.request(9, "session/request_permission", toolCall={}, options=OPTIONS)
    assert "twice" in errors(events)[0] and peer.sent[-1]["error"]["code"] == -32600


def test_the_agent_withdraws_a_question() -> None:
    peer = ready()
    peer.send("go")
    question = ask(peer, 11)
    events = peer.feed(method="$/cancel_request", params={"requestId": 11})
    assert events == [PermissionDecided("acp-11", "cancelled", "withdrawn by the agent")]
    assert peer.sent[-1] == {
        "jsonrpc": "2.0",
        "id": 11,
        "error": {"code": -32800, "message": "cancelled by the agent"},
    }
    with pytest.raises(InvalidPayload, match="withdrawn"):
        peer.respond(question, True)
    for params in ({"requestId": 11}, {"requestId": None}, {"requestId": True}, {}):
        assert peer.feed(method="$/cancel_request", params=params) == []


def test_too_many_open_questions_are_refused() -> None:
    peer = ready()
    peer.send("go")
    for n in range(OPEN_MAX):
        peer.request(
            n, "session/request_permission", toolCall={"toolCallId": f"t{n}"}, options=OPTIONS
        )
    events = peer.request("one-more", "session/request_permission", toolCall={}, options=OPTIONS)
    assert not any(isinstance(ev, PermissionAsk) for ev in events)
    assert peer.sent[-1]["id"] == "one-more" and "more than" in errors(events)[0]


# --- interrupts ----------------------------------------------------------------------------


def test_nothing_to_interrupt() -> None:
    peer = ready()
    assert peer.interrupt() == b""


def test_interrupt_cancels_and_withdraws_every_open_question() -> None:
    peer = ready()
    peer.send("go")
    first, second = ask(peer, 1), ask(peer, 2, tool={"toolCallId": "t2", "title": "b"})
    peer.chunk("Working on")
    data = peer.interrupt()
    assert isinstance(data, bytes)
    cancel, *answers = decode(data)
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}}
    assert answers == [
        {"jsonrpc": "2.0", "id": 1, "result": {"outcome": {"outcome": "cancelled"}}},
        {"jsonrpc": "2.0", "id": 2, "result": {"outcome": {"outcome": "cancelled"}}},
    ]
    with pytest.raises(InvalidPayload, match="withdrawn"):
        peer.respond(first, True)
    # reported with the agent's next line, whatever it is
    events = peer.line("a stray line")
    assert [ev for ev in events if isinstance(ev, PermissionDecided)] == [
        PermissionDecided(first.request_id, "cancelled", "the turn was cancelled"),
        PermissionDecided(second.request_id, "cancelled", "the turn was cancelled"),
    ]
    events = peer.answer("session/prompt", {"stopReason": "cancelled"})
    assert not [ev for ev in events if isinstance(ev, PermissionDecided)]
    assert entries(events) == [
        {"role": "assistant", "content": "Working on", "aborted": True},
        {"role": "assistant", "content": "turn interrupted", "interrupted": True},
    ]
    assert events[-1] == IDLE


def test_questions_still_open_when_the_turn_ends_are_cancelled() -> None:
    peer = ready()
    peer.send("go")
    question = ask(peer, 5)
    events = peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert PermissionDecided(question.request_id, "cancelled", "the turn ended") in events
    assert {"jsonrpc": "2.0", "id": 5, "result": {"outcome": {"outcome": "cancelled"}}} in peer.sent


def test_an_interrupt_before_the_prompt_is_sent_drops_it() -> None:
    peer = Peer()
    peer.send("never mind")
    peer.send("this one")
    assert peer.interrupt() is DEFERRED
    events = ready(peer).events
    prompts = [
        m["params"]["prompt"][0]["text"] for m in peer.sent if m.get("method") == "session/prompt"
    ]
    assert prompts == ["this one"]
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result["stop_reason"] == "cancelled" and result["interrupted"]
    assert {"role": "assistant", "content": "turn interrupted", "interrupted": True} in entries(
        events
    )


def test_a_cancelled_turn_that_ends_normally_is_not_aborted() -> None:
    peer = ready()
    peer.send("go")
    peer.chunk("Done anyway")
    peer.interrupt()
    events = peer.answer("session/prompt", {"stopReason": "end_turn"})
    assert entries(events)[0] == {"role": "assistant", "content": "Done anyway", "aborted": True}
    (result,) = [ev.result for ev in events if isinstance(ev, TurnResult)]
    assert result["stop_reason"] == "end_turn" and not result["is_error"]


# --- client calls --------------------------------------------------------------------------


def test_client_calls_round_trip() -> None:
    peer = ready()
    peer.send("go")
    events = peer.request(20, "fs/read_text_file", path="/work/tree/a.txt", line=1)
    (call,) = events
    assert isinstance(call, ClientCall)
    assert call.method == "fs/read_text_file"
    assert call.params == {"sessionId": SID, "path": "/work/tree/a.txt", "line": 1}
    done = peer.take(peer.adapter.call_done(call.call_id, {"content": "hi"}, None))
    assert done == [] and peer.sent[-1] == {"jsonrpc": "2.0", "id": 20, "result": {"content": "hi"}}
    assert peer.adapter.call_done(call.call_id, {}, None) == []  # answered once


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (CallFailed("no such file", not_found=True), -32002),
        (CallFailed("relative path", bad_params=True), -32602),
        (CallFailed("disk full"), -32603),
    ],
)
def test_client_call_failures(failure: CallFailed, code: int) -> None:
    peer = ready()
    peer.send("go")
    (call,) = peer.request("c1", "terminal/create", command="ls")
    assert isinstance(call, ClientCall)
    peer.take(peer.adapter.call_done(call.call_id, None, failure))
    assert peer.sent[-1] == {
        "jsonrpc": "2.0",
        "id": "c1",
        "error": {"code": code, "message": failure.message},
    }


def test_every_advertised_call_goes_to_the_host() -> None:
    peer = ready()
    methods = [
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    ]
    calls = [peer.request(n, m)[0] for n, m in enumerate(methods)]
    assert [c.method for c in calls if isinstance(c, ClientCall)] == methods
    assert len({c.call_id for c in calls if isinstance(c, ClientCall)}) == len(methods)


def test_a_call_the_agent_withdraws_is_not_answered_twice() -> None:
    peer = ready()
    (call,) = peer.request(30, "terminal/wait_for_exit", terminalId="t")
    assert isinstance(call, ClientCall)
    peer.feed(method="$/cancel_request", params={"requestId": 30})
    assert peer.sent[-1]["error"]["code"] == -32800
    assert peer.adapter.call_done(call.call_id, {"exitCode": 0}, None) == []


def test_requests_agenthost_does_not_implement_are_refused_at_once() -> None:
    peer = ready()
    events = peer.request(40, "session/elicitation", message="pick one")
    assert peer.sent[-1]["id"] == 40 and peer.sent[-1]["error"]["code"] == -32601
    assert "does not implement" in errors(events)[0]


@pytest.mark.parametrize("sid", ["other-session", None, 5])
def test_requests_for_another_session_are_refused(sid: Any) -> None:
    peer = ready()
    events = peer.feed(id=41, method="fs/read_text_file", params={"sessionId": sid, "path": "/x"})
    assert not any(isinstance(ev, ClientCall) for ev in events)
    assert peer.sent[-1]["error"]["code"] == -32602 and "unknown session" in errors(events)[0]


# --- protocol violations -------------------------------------------------------------------

GARBAGE = {
    "not json": ("hello world", "agent printed a line that is not JSON: hello world"),
    "an array": ("[1,2]", "agent printed a line that is not JSON-RPC (not a JSON object): [1,2]"),
    "no method, no id": ('{"jsonrpc":"2.0"}', "not JSON-RPC (neither a request"),
    "method not a string": ('{"jsonrpc":"2.0","method":42}', "method is not a string"),
    "unknown response": ('{"jsonrpc":"2.0","id":999,"result":{}}', "did not make (id 999)"),
    "update for another session": (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":{}}}',
        "update for another session (x): ignored",
    ),
    "update not an object": (
        f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SID}","update":[1]}}}}',
        "without an update object",
    ),
}


@pytest.mark.parametrize(("line", "note"), GARBAGE.values(), ids=list(GARBAGE))
def test_garbage_lines(line: str, note: str) -> None:
    peer = ready()
    events = peer.line(line)
    assert len(errors(events)) == 1 and note in errors(events)[0]


def test_a_request_with_bad_params_is_answered() -> None:
    peer = ready()
    events = peer.line('{"jsonrpc":"2.0","id":"x1","method":"fs/read_text_file","params":7}')
    assert "params is not an object" in errors(events)[0]
    assert peer.sent[-1] == {
        "jsonrpc": "2.0",
        "id": "x1",
        "error": {"code": -32602, "message": "params is not an object"},
    }


def test_lines_that_are_only_output() -> None:
    peer = ready()
    quiet = [
        "",
        "   ",
        f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SID}","update":{{"sessionUpdate":"future_kind","x":1}}}}}}',
        f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SID}","update":{{"sessionUpdate":"user_message_chunk","content":{{"type":"text","text":"hi"}}}}}}}}',
        '{"jsonrpc":"2.0","method":"_zed/extension","params":{}}',
    ]
    for line in quiet:
        assert peer.line(line) == []


def test_an_over_long_line_is_reported_once() -> None:
    peer = ready()
    assert peer.adapter.parse_fragment("x" * 100, True) == [Output("x" * 100, continued=True)]
    events = peer.line("tail")
    assert len(errors(events)) == 1 and "about 104 characters" in errors(events)[0]
    assert peer.line("hello") and errors(peer.line("hello"))  # parsed again (not JSON)


JSON = json_values(key_size=12)
FIELDS = st.sampled_from(
    [
        "sessionUpdate",
        "content",
        "toolCallId",
        "title",
        "kind",
        "status",
        "rawInput",
        "rawOutput",
        "locations",
        "entries",
        "used",
        "size",
        "cost",
        "messageId",
        "availableCommands",
        "currentModeId",
    ]
)
UPDATE_KINDS = st.sampled_from(
    [
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "usage_update",
        "available_commands_update",
        "current_mode_update",
        "session_info_update",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    kind=UPDATE_KINDS,
    fields=st.dictionaries(FIELDS, JSON, max_size=6),
    request=st.dictionaries(
        st.sampled_from(["toolCall", "options", "sessionId"]), JSON, max_size=3
    ),
)
def test_wrong_types_anywhere_never_raise(kind: str, fields: Msg, request: Msg) -> None:
    peer = ready()
    peer.send("go")
    peer.update(**{**fields, "sessionUpdate": kind})
    peer.feed(id=1, method="session/request_permission", params={"sessionId": SID, **request})
    peer.feed(id=peer.last("session/prompt")["id"], result=fields)
    for ev in peer.events:
        if isinstance(ev, Chat):
            json.dumps(ev.entry)


def test_diff_summary_counts_lines() -> None:
    assert diff_summary({"path": "p", "oldText": "a\nb\nc", "newText": "a\nc\nd\ne"}) == "p: +2 -1"
    assert diff_summary({"newText": 5}) == "?: +0 -0"


def test_jsonrpc_ids_of_ours_never_clash_with_the_agents() -> None:
    # the agent numbers its requests from 0 too: a request is told by its method
    peer = ready()
    peer.send("go")
    prompt_id = peer.last("session/prompt")["id"]
    events = peer.request(prompt_id, "fs/read_text_file", path="/a")
    assert isinstance(events[0], ClientCall)
    assert not any(isinstance(ev, TurnResult) for ev in events)
    assert jsonrpc.parse(
        json.dumps({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
    )
