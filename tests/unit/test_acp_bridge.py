"""The editor bridge in memory: editor lines and stream events in, effects out.

Every notification and answer the bridge writes is also read back with the official
ACP SDK's models (the independent reference for the messages' shapes).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from acp import schema as sdk

from agenthost.acp import jsonrpc
from agenthost.acp.bridge import Bridge
from agenthost.acp.effects import (
    Effect,
    Interrupt,
    ListSessions,
    Respond,
    Send,
    StartFollow,
    Write,
)
from agenthost.acp.params import BadParams, prompt_text
from agenthost.acp.updates import stop_reason
from agenthost.position import Gap
from agenthost.protocol import AgentInfo, PermissionRequest, StreamEvent

AGENT = "a1"
EPOCH = "e" * 32
NOW = "2026-11-23T10:00:00Z"


# --- helpers -----------------------------------------------------------------------


def request(rid: int | str, method: str, params: Any = None) -> bytes:
    return jsonrpc.request(rid, method, params)


def lines(effects: list[Effect]) -> list[dict[str, Any]]:
    """The messages written to the editor."""
    out = []
    for e in effects:
        if isinstance(e, Write):
            assert e.data.endswith(b"\n") and e.data.count(b"\n") == 1
            out.append(json.loads(e.data))
    return out


def others(effects: list[Effect]) -> list[Effect]:
    return [e for e in effects if not isinstance(e, Write)]


def updates(effects: list[Effect]) -> list[dict[str, Any]]:
    """The session/update params written, each checked against the SDK's model."""
    out = []
    for msg in lines(effects):
        if msg.get("method") == "session/update":
            sdk.SessionNotification.model_validate(msg["params"])
            out.append(msg["params"])
    return out


def answer(effects: list[Effect], rid: int | str) -> dict[str, Any]:
    found = [m for m in lines(effects) if m.get("id") == rid and "method" not in m]
    assert len(found) == 1, lines(effects)
    return found[0]


def event(offset: int, type_: str, **fields: Any) -> StreamEvent:
    data = {"kind": "event", "type": type_, "agent_id": AGENT, "offset": offset}
    return StreamEvent.model_validate({**data, "timestamp": NOW, **fields})


def entry(offset: int, role: str, **fields: Any) -> StreamEvent:
    return event(offset, "chat_entry", chat_entry={"role": role, "timestamp": NOW, **fields})


def state(offset: int, value: str) -> StreamEvent:
    return event(offset, "state", state=value)


def perm(request_id: str, **fields: Any) -> PermissionRequest:
    data = {"request_id": request_id, "tool_name": "Bash", "tool_input": "rm -rf build"}
    return PermissionRequest.model_validate({**data, "created_at": NOW, **fields})


def opened(
    *,
    head: int = 0,
    structured: bool = True,
    pending: list[PermissionRequest] | None = None,
) -> tuple[Bridge, list[Effect]]:
    """A bridge with a loaded session (attached after 0 of a stream at ``head``); the
    effects of the attach, and of the replay when ``head`` is 0."""
    bridge = Bridge(AGENT, version="9.9")
    effects = bridge.feed(request(1, "session/load", {"sessionId": AGENT, "cwd": "/w"}))
    assert others(effects) == [StartFollow(None)]
    effects = bridge.attached(
        epoch=EPOCH,
        head=head,
        position=0,
        new_epoch=True,
        pending=pending or [],
        structured=structured,
    )
    return bridge, effects


def prompt(bridge: Bridge, rid: int, text: str = "hi", offset: int = 5) -> list[Effect]:
    params = {"sessionId": AGENT, "prompt": [{"type": "text", "text": text}]}
    effects = bridge.feed(request(rid, "session/prompt", params))
    assert others(effects) == [Send(rid, text)]
    return bridge.sent(rid, offset)


# --- initialize and garbage ------------------------------------------------------------


def test_initialize_answers_version_1_and_records_the_editor() -> None:
    bridge = Bridge(AGENT, version="9.9")
    caps = {"fs": {"readTextFile": True}, "terminal": False}
    params = {"protocolVersion": 7, "clientCapabilities": caps}
    msg = answer(bridge.feed(request(1, "initialize", params)), 1)
    result = sdk.InitializeResponse.model_validate(msg["result"])
    assert result.protocol_version == 1
    assert result.agent_capabilities is not None
    assert result.agent_capabilities.load_session is True
    assert result.agent_capabilities.session_capabilities is not None
    assert result.agent_capabilities.session_capabilities.list is not None
    prompts = result.agent_capabilities.prompt_capabilities
    assert prompts is not None and not (prompts.image or prompts.audio)
    assert result.agent_info is not None and result.agent_info.version == "9.9"
    assert result.auth_methods == []
    assert bridge.client_capabilities == caps


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json at all", jsonrpc.PARSE_ERROR),
        (b"[1, 2]", jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": [1]}', -32602),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}}', -32602),
        (b'{"id": 3, "method": "initialize", "params": {"protocolVersion": "1"}}', -32602),
        (b'{"id": 3, "method": "initialize", "params": {"protocolVersion": true}}', -32602),
        (
            b'{"id": 3, "method": "initialize", "params": {"protocolVersion": 1, '
            b'"clientCapabilities": 5}}',
            -32602,
        ),
        (b'{"id": 3, "method": "session/set_mode", "params": {}}', jsonrpc.METHOD_NOT_FOUND),
        (b'{"id": 3, "method": "session/load", "params": {"sessionId": 7}}', -32602),
        (
            b'{"id": 3, "method": "session/load", "params": {"sessionId": "other"}}',
            jsonrpc.RESOURCE_NOT_FOUND,
        ),
        (
            b'{"id": 3, "method": "session/load", "params": {"sessionId": "a1", '
            b'"_meta": {"agenthost": {"after": -1}}}}',
            -32602,
        ),
        (
            b'{"id": 3, "method": "session/load", "params": {"sessionId": "a1", '
            b'"_meta": {"agenthost": {"after": "5"}}}}',
            -32602,
        ),
        (
            b'{"id": 3, "method": "session/load", "params": {"sessionId": "a1", '
            b'"_meta": {"agenthost": {"after": 5, "epoch": 5}}}}',
            -32602,
        ),
        (
            b'{"id": 3, "method": "session/load", "params": {"sessionId": "a1", "_meta": "x"}}',
            -32602,
        ),
        (b'{"id": 3, "method": "session/new", "params": {"cwd": 5}}', -32602),
        (b'{"id": 3, "method": "session/list", "params": {"cwd": ["/"]}}', -32602),
        (
            b'{"id": 3, "method": "session/prompt", "params": {"sessionId": "a1", "prompt": "hi"}}',
            -32602,
        ),
        (
            b'{"id": 3, "method": "session/prompt", "params": {"sessionId": "b", "prompt": []}}',
            jsonrpc.RESOURCE_NOT_FOUND,
        ),
        (b'{"id": {"x": 1}, "method": "initialize"}', jsonrpc.INVALID_REQUEST),
    ],
)
def test_garbage_gets_an_error_answer_and_the_bridge_goes_on(line: bytes, code: int) -> None:
    bridge = Bridge(AGENT, version="9.9")
    effects = bridge.feed(line + b"\n")
    errors = lines(effects)
    assert len(errors) == 1 and errors[0]["error"]["code"] == code, errors
    assert others(effects) == []  # nothing was started
    ok = bridge.feed(request(4, "initialize", {"protocolVersion": 1}))
    assert answer(ok, 4)["result"]["protocolVersion"] == 1


def test_notifications_and_answers_we_do_not_know_are_ignored() -> None:
    bridge = Bridge(AGENT, version="9.9")
    data = (
        jsonrpc.notification("some/thing", {"x": 1})
        + jsonrpc.notification("session/cancel", {"sessionId": AGENT})
        + jsonrpc.result(99, {"outcome": "selected"})
        + b"\n   \n\r\n"
    )
    assert bridge.feed(data) == []


def test_a_line_over_the_limit_is_refused_once_without_being_kept() -> None:
    bridge = Bridge(AGENT, version="9.9", max_line=128)
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "pad": "' + b"x" * 500
    effects = bridge.feed(huge[:200]) + bridge.feed(huge[200:]) + bridge.feed(b'"}\n')
    errors = lines(effects)
    assert len(errors) == 1 and errors[0]["error"]["code"] == jsonrpc.INVALID_REQUEST
    assert errors[0]["id"] is None
    assert len(bridge._lines._pending) <= 128  # never more than the limit buffered
    after = bridge.feed(request(2, "initialize", {"protocolVersion": 1}))
    assert answer(after, 2)["result"]["protocolVersion"] == 1


def test_a_last_line_without_newline_is_read_at_the_end_of_input() -> None:
    bridge = Bridge(AGENT, version="9.9")
    assert bridge.feed(request(1, "initialize", {"protocolVersion": 1})[:-1]) == []
    assert answer(bridge.end_of_input(), 1)["result"]["protocolVersion"] == 1


def test_authenticate_is_harmless_and_other_methods_are_not_found() -> None:
    bridge = Bridge(AGENT, version="9.9")
    assert answer(bridge.feed(request(1, "authenticate", {"methodId": "x"})), 1)["result"] == {}
    for method in ("session/resume", "session/set_config_option", "fs/read_text_file"):
        err = answer(bridge.feed(request(2, method, {})), 2)["error"]
        assert err["code"] == jsonrpc.METHOD_NOT_FOUND and method in err["message"]


# --- load, new, list -------------------------------------------------------------------


def test_load_replays_up_to_the_attach_head_then_answers_then_goes_live() -> None:
    bridge, effects = opened(head=3)
    assert effects == []  # the replay is still to come
    replay = bridge.event(entry(1, "user", content="hello"))
    replay += bridge.event(state(2, "running"))
    assert [m for m in lines(replay) if m.get("id") == 1] == []  # not answered yet
    last = bridge.event(entry(3, "assistant", content="Hi there"))
    msgs = lines(last)
    assert msgs[0]["method"] == "session/update" and msgs[1] == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": None,
    }
    assert bridge.open
    live = updates(bridge.event(entry(4, "assistant", content="more")))
    assert [u["_meta"] for u in live] == [{"agenthost": {"offset": 4, "epoch": EPOCH}}]
    seen = updates(replay + last)
    assert [u["_meta"]["agenthost"]["offset"] for u in seen] == [1, 3]
    assert [u["update"]["sessionUpdate"] for u in seen] == [
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert seen[0]["update"]["content"] == {"type": "text", "text": "hello"}


def test_load_of_an_empty_or_caught_up_stream_answers_at_once() -> None:
    bridge, effects = opened(head=0)
    assert answer(effects, 1)["result"] is None


def test_load_resumes_after_the_offset_the_editor_gives() -> None:
    bridge = Bridge(AGENT, version="9.9")
    meta = {"agenthost": {"after": 41, "epoch": EPOCH}}
    params = {"sessionId": AGENT, "cwd": "/w", "mcpServers": [], "_meta": meta}
    assert others(bridge.feed(request(1, "session/load", params))) == [StartFollow((EPOCH, 41))]
    effects = bridge.attached(
        epoch=EPOCH, head=43, position=41, new_epoch=False, pending=[], structured=True
    )
    assert effects == []
    effects = bridge.event(entry(42, "assistant", content="x"))
    assert [u["_meta"]["agenthost"]["offset"] for u in updates(effects)] == [42]
    assert [m for m in lines(effects) if m.get("id") == 1] == []
    assert answer(bridge.event(state(43, "idle")), 1)["result"] is None


def test_new_attaches_at_the_head_and_answers_the_same_session() -> None:
    bridge = Bridge(AGENT, version="9.9")
    effects = bridge.feed(request(1, "session/new", {"cwd": "/elsewhere", "mcpServers": []}))
    assert others(effects) == [StartFollow(None, from_head=True)]
    effects = bridge.attached(
        epoch=EPOCH, head=10, position=10, new_epoch=True, pending=[], structured=True
    )
    result = answer(effects, 1)["result"]
    assert sdk.NewSessionResponse.model_validate(result).session_id == AGENT
    assert result["_meta"] == {"agenthost": {"offset": 10, "epoch": EPOCH}}


def test_a_second_open_while_one_is_in_progress_is_refused() -> None:
    bridge = Bridge(AGENT, version="9.9")
    bridge.feed(request(1, "session/new", {"cwd": "/w"}))
    err = answer(bridge.feed(request(2, "session/load", {"sessionId": AGENT})), 2)["error"]
    assert err["code"] == jsonrpc.INVALID_REQUEST


def test_a_failed_follow_answers_the_load_with_the_reason() -> None:
    bridge = Bridge(AGENT, version="9.9")
    bridge.feed(request(1, "session/load", {"sessionId": AGENT}))
    err = answer(bridge.follow_failed("no host is running for agent 'a1'"), 1)["error"]
    assert err["code"] == jsonrpc.INTERNAL_ERROR and "no host" in err["message"]
    assert not bridge.open
    assert bridge.follow_failed("again") == []


def test_list_shows_the_one_session_with_the_agents_worktree() -> None:
    bridge = Bridge(AGENT, version="9.9")
    effects = bridge.feed(request(1, "session/list", {}))
    assert effects == [ListSessions(1, None)]
    info = AgentInfo.model_validate(
        {"id": AGENT, "state": "idle", "worktree": "/src/proj", "started_at": NOW, "task": "T-1"}
    )
    result = answer(bridge.listed(1, None, info), 1)["result"]
    listed = sdk.ListSessionsResponse.model_validate(result)
    assert [(s.session_id, s.cwd, s.title) for s in listed.sessions] == [
        (AGENT, "/src/proj", "T-1")
    ]
    assert listed.sessions[0].updated_at == "2026-11-23T10:00:00.000000Z"
    assert answer(bridge.listed(2, "/src/proj/", info), 2)["result"]["sessions"] != []
    assert answer(bridge.listed(3, "/other", info), 3)["result"] == {"sessions": []}
    err = answer(bridge.failed(4, "no host is running"), 4)["error"]
    assert err["code"] == jsonrpc.INTERNAL_ERROR


# --- the mapping -----------------------------------------------------------------------


def test_chat_entries_become_messages_thoughts_plans_and_tool_calls() -> None:
    bridge, _ = opened()
    plan = [{"content": "read", "priority": "high", "status": "completed"}, {"content": 5}]
    stream = [
        entry(1, "assistant", content="thinking...", thought=True),
        entry(2, "assistant", content="- [x] read", plan=plan),
        entry(
            3,
            "tool",
            tool_name="Bash",
            tool_input="ls -la",
            tool_use_id="t1",
            input={"command": "ls -la"},
        ),
        entry(4, "tool", tool_name="Bash", tool_result="a\nb", tool_use_id="t1", is_error=False),
        entry(5, "tool", tool_name="Grep", tool_input="TODO", input={"pattern": "TODO"}),
        entry(
            6,
            "tool",
            tool_name="mcp__x",
            tool_input="q",
            tool_use_id="t3",
            tool_kind="fetch",
            status="in_progress",
        ),
        entry(7, "tool", tool_name="mcp__x", tool_result="boom", tool_use_id="t3", is_error=True),
        entry(8, "tool", tool_name="Edit", tool_result="ok", tool_use_id="t9"),
        entry(9, "assistant", content=""),
        event(10, "result", result={"is_error": False}),
        state(11, "idle"),
        event(12, "output", stream="stdout", data='{"type": "assistant"}'),
        event(13, "permission_response", decision={"request_id": "r", "behavior": "allow"}),
    ]
    got = [u["update"] for e in stream for u in updates(bridge.event(e))]
    assert got[0] == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "thinking..."},
    }
    assert got[1]["sessionUpdate"] == "plan"
    assert got[1]["entries"] == [
        plan[0],
        {"content": "5", "priority": "medium", "status": "pending"},
    ]
    assert got[2] == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "title": "Bash: ls -la",
        "kind": "execute",
        "status": "in_progress",  # recorded without a status: it runs
        "rawInput": {"command": "ls -la"},
    }
    assert got[3] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "a\nb"}}],
    }
    assert got[4]["toolCallId"] == "agenthost-5" and got[4]["kind"] == "search"
    assert got[5]["kind"] == "fetch" and got[5]["status"] == "in_progress"
    assert got[6]["sessionUpdate"] == "tool_call_update" and got[6]["status"] == "failed"
    # a result whose start the editor never saw: a whole tool call, finished
    assert got[7]["sessionUpdate"] == "tool_call" and got[7]["status"] == "completed"
    assert got[7]["title"] == "Edit" and got[7]["kind"] == "edit"
    assert len(got) == 8  # empty text, result, state, raw output, permission: nothing


@pytest.mark.parametrize(("behavior", "after"), [("allow", ["in_progress"]), ("deny", [])])
def test_a_question_sets_its_call_pending_and_an_allow_sets_it_running(
    behavior: str, after: list[str]
) -> None:
    """Claude's and Codex's adapters record a call, then ask about it: the editor sees
    it wait for the answer, then run (a denied one ends with its failed result)."""
    bridge, _ = opened()
    started = updates(bridge.event(entry(1, "tool", tool_name="Bash", tool_use_id="t1")))
    assert started[0]["update"]["status"] == "in_progress"
    asked = perm("r1", tool_use_id="t1").model_dump(mode="json")
    statuses = [
        u["update"] for u in updates(bridge.event(event(2, "permission_request", request=asked)))
    ]
    assert statuses == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "pending"}
    ]
    decision = {"request_id": "r1", "behavior": behavior}
    answered = updates(bridge.event(event(3, "permission_response", decision=decision)))
    assert [u["update"]["status"] for u in answered] == after
    # a question about a call the editor never saw start changes nothing
    other = perm("r2", tool_use_id="unseen").model_dump(mode="json")
    assert updates(bridge.event(event(4, "permission_request", request=other))) == []
    decision = {"request_id": "r2", "behavior": "allow"}
    assert updates(bridge.event(event(5, "permission_response", decision=decision))) == []


def test_a_running_tool_call_updated_keeps_the_editors_title_unless_it_has_input() -> None:
    bridge, _ = opened()
    bridge.event(entry(1, "tool", tool_name="Read", tool_input="", tool_use_id="t"))
    update = updates(
        bridge.event(
            entry(
                2,
                "tool",
                tool_name="Read",
                tool_input="/etc/x",
                tool_use_id="t",
                status="in_progress",
            )
        )
    )[0]["update"]
    assert update["sessionUpdate"] == "tool_call_update"
    assert update["title"] == "Read: /etc/x" and update["status"] == "in_progress"


def test_errors_are_shown_once_and_failed_turn_records_not_twice() -> None:
    bridge, _ = opened()
    first = updates(bridge.event(event(1, "error", error="API Error: 500 boom")))
    assert first[0]["update"]["content"]["text"] == "Error: API Error: 500 boom\n"
    again = bridge.event(entry(2, "assistant", content="API Error: 500 boom", is_error=True))
    assert updates(again) == []
    alone = updates(bridge.event(entry(3, "assistant", content="other failure", is_error=True)))
    assert alone[0]["update"]["content"]["text"] == "other failure"


def test_output_of_an_agent_without_structured_output_is_the_message() -> None:
    bridge, _ = opened(structured=False)
    stream = [
        event(1, "output", stream="stdout", data="line one"),
        event(2, "output", stream="stdout", data="a long li", continued=True),
        event(3, "output", stream="stdout", data="ne"),
        event(4, "output", stream="stderr", data="warning: x"),
        event(5, "output", stream="stdout", data="caf\u00e9 \\xff", escaped=True),
    ]
    texts = [u["update"]["content"]["text"] for e in stream for u in updates(bridge.event(e))]
    assert "".join(texts) == "line one\na long line\nwarning: x\ncaf\u00e9 \\xff\n"


def test_gaps_are_said_where_they_are_and_a_new_stream_starts_over() -> None:
    bridge, _ = opened()
    bridge.event(entry(1, "tool", tool_name="Bash", tool_input="ls", tool_use_id="t"))
    evicted = updates(bridge.gap(Gap(EPOCH, 1, 9, "evicted")))
    assert evicted[0]["_meta"]["agenthost"]["offset"] == 8
    assert "events 2-8" in evicted[0]["update"]["content"]["text"]
    bridge.attached(epoch="f" * 32, head=0, position=0, new_epoch=True, pending=[], structured=True)
    note = updates(bridge.gap(Gap("f" * 32, 0, 1, "new_epoch")))
    assert note[0]["_meta"]["agenthost"] == {"offset": 0, "epoch": "f" * 32}
    done = updates(bridge.event(entry(1, "tool", tool_result="x", tool_use_id="t")))
    assert done[0]["update"]["sessionUpdate"] == "tool_call"  # the old start is not this one


# --- prompts ---------------------------------------------------------------------------


def test_a_prompt_is_sent_and_its_own_message_is_not_echoed() -> None:
    bridge, _ = opened()
    params = {"sessionId": AGENT, "prompt": [{"type": "text", "text": "do it"}]}
    assert others(bridge.feed(request(7, "session/prompt", params))) == [Send(7, "do it")]
    # the stream moves before the send's answer: held until the offset is known
    assert bridge.event(entry(1, "user", content="do it")) == []
    assert bridge.event(state(2, "running")) == []
    released = bridge.sent(7, 1)
    assert updates(released) == []
    other = updates(bridge.event(entry(3, "user", content="from the CLI")))
    assert other[0]["update"]["sessionUpdate"] == "user_message_chunk"
    bridge.event(entry(4, "assistant", content="done"))
    bridge.event(event(5, "result", result={"subtype": "success", "is_error": False}))
    assert answer(bridge.event(state(6, "idle")), 7)["result"] == {"stopReason": "end_turn"}
    sdk.PromptResponse.model_validate({"stopReason": "end_turn"})


def test_the_turn_ends_at_the_first_end_state_after_the_send() -> None:
    bridge, _ = opened()
    effects = prompt(bridge, 2, offset=5)
    effects += bridge.event(state(4, "idle"))  # before the send: another turn's end
    effects += bridge.event(state(6, "running"))
    effects += bridge.event(state(7, "waiting"))  # a question: still the turn
    assert [m for m in lines(effects) if m.get("id") == 2] == []
    assert answer(bridge.event(state(8, "idle")), 2)["result"]["stopReason"] == "end_turn"


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"stop_reason": "max_tokens"}, "max_tokens"),
        ({"stop_reason": "refusal", "interrupted": True}, "refusal"),
        ({"stop_reason": "bogus"}, "end_turn"),
        ({"subtype": "error_during_execution", "is_error": True, "interrupted": True}, "cancelled"),
        ({"is_error": True, "subtype": "success"}, "end_turn"),
        ({"interrupted": "yes"}, "end_turn"),
        (None, "end_turn"),
    ],
)
def test_stop_reasons(result: dict[str, Any] | None, reason: str) -> None:
    assert stop_reason(result) == reason
    assert stop_reason(result, cancelled=True) == "cancelled"


def test_the_turns_last_result_gives_the_stop_reason() -> None:
    bridge, _ = opened()
    prompt(bridge, 2, offset=5)
    bridge.event(event(6, "result", result={"stop_reason": "refusal"}))
    bridge.event(event(7, "result", result={"stop_reason": "max_tokens"}))
    assert answer(bridge.event(state(8, "idle")), 2)["result"]["stopReason"] == "max_tokens"


def test_cancel_interrupts_and_the_prompt_answers_cancelled() -> None:
    bridge, _ = opened()
    prompt(bridge, 2, offset=5)
    cancel = jsonrpc.notification("session/cancel", {"sessionId": AGENT})
    assert bridge.feed(cancel) == [Interrupt()]
    assert bridge.feed(cancel) == []  # once
    bridge.event(event(6, "result", result={"is_error": False}))
    assert answer(bridge.event(state(7, "idle")), 2)["result"]["stopReason"] == "cancelled"
    assert bridge.feed(cancel) == []  # no prompt runs


def test_cancelling_the_prompt_request_itself_interrupts_too() -> None:
    bridge, _ = opened()
    prompt(bridge, 2, offset=5)
    assert bridge.feed(jsonrpc.notification("$/cancel_request", {"requestId": 9})) == []
    assert bridge.feed(jsonrpc.notification("$/cancel_request", {"requestId": 2})) == [Interrupt()]


def test_an_agent_that_ends_in_error_fails_the_prompt() -> None:
    bridge, _ = opened()
    prompt(bridge, 2, offset=5)
    bridge.event(event(6, "error", error="agent exited with signal SIGKILL"))
    err = answer(bridge.event(state(7, "error")), 2)["error"]
    assert err["code"] == jsonrpc.INTERNAL_ERROR and "SIGKILL" in err["message"]


def test_one_prompt_at_a_time_and_only_in_an_open_session() -> None:
    bridge = Bridge(AGENT, version="9.9")
    params = {"sessionId": AGENT, "prompt": [{"type": "text", "text": "x"}]}
    err = answer(bridge.feed(request(1, "session/prompt", params)), 1)["error"]
    assert err["code"] == jsonrpc.INVALID_REQUEST and "session/load" in err["message"]
    bridge, _ = opened()
    prompt(bridge, 2)
    err = answer(bridge.feed(request(3, "session/prompt", params)), 3)["error"]
    assert err["code"] == jsonrpc.INVALID_REQUEST


def test_a_send_that_fails_answers_the_prompt_with_why_and_releases_the_stream() -> None:
    bridge, _ = opened()
    params = {"sessionId": AGENT, "prompt": [{"type": "text", "text": "x"}]}
    bridge.feed(request(2, "session/prompt", params))
    assert bridge.event(entry(1, "assistant", content="meanwhile")) == []
    effects = bridge.failed(2, "no host is running for agent 'a1'")
    assert answer(effects, 2)["error"]["message"] == "no host is running for agent 'a1'"
    assert len(updates(effects)) == 1
    assert others(prompt(bridge, 3)) == []  # a new prompt is welcome


def test_an_agent_without_turns_answers_once_the_send_is_accepted() -> None:
    bridge, _ = opened(structured=False)
    effects = prompt(bridge, 2, "ls", offset=3)
    assert answer(effects, 2)["result"] == {"stopReason": "end_turn"}
    assert updates(bridge.event(entry(3, "user", content="ls"))) == []


def test_prompt_blocks_become_readable_text() -> None:
    blocks = [
        {"type": "text", "text": "Look at "},
        {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "x = 1"}},
        {"type": "resource", "resource": {"uri": "file:///w/c.png", "blob": "AAAA"}},
    ]
    assert prompt_text(blocks) == (
        'Look at [a.py](file:///w/a.py)\n<context ref="file:///w/b.py">\nx = 1\n</context>\n'
        "[file:///w/c.png](file:///w/c.png)"
    )


@pytest.mark.parametrize(
    "blocks",
    [
        [],
        [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
        [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}],
        [{"type": "text", "text": 5}],
        [{"type": "text", "text": "  "}],
        ["hello"],
        [{"type": "resource", "resource": {"text": "no uri"}}],
        [{"type": "video"}],
        None,
    ],
)
def test_prompts_we_cannot_take_are_invalid(blocks: Any) -> None:
    with pytest.raises(BadParams):
        prompt_text(blocks)
    bridge, _ = opened()
    effects = bridge.feed(request(2, "session/prompt", {"sessionId": AGENT, "prompt": blocks}))
    assert answer(effects, 2)["error"]["code"] == jsonrpc.INVALID_PARAMS


# --- permissions -----------------------------------------------------------------------


def asks(effects: list[Effect]) -> list[dict[str, Any]]:
    found = [m for m in lines(effects) if m.get("method") == "session/request_permission"]
    for m in found:
        sdk.RequestPermissionRequest.model_validate(m["params"])
    return found


def cancels(effects: list[Effect]) -> list[Any]:
    return [
        m["params"]["requestId"] for m in lines(effects) if m.get("method") == "$/cancel_request"
    ]


def choose(rid: Any, option: str) -> bytes:
    return jsonrpc.result(rid, {"outcome": {"outcome": "selected", "optionId": option}})


def test_pending_requests_are_asked_after_the_replay_not_during_it() -> None:
    still = perm("r2", tool_use_id="t2", input={"command": "rm -rf build"})
    bridge, effects = opened(head=3, pending=[still])
    effects += bridge.event(event(1, "permission_request", request=perm("r1").model_dump()))
    effects += bridge.event(
        event(2, "permission_response", decision={"request_id": "r1", "behavior": "allow"})
    )
    effects += bridge.event(event(3, "permission_request", request=still.model_dump()))
    found = asks(effects)
    assert len(found) == 1  # r1 was asked and answered in the past: not asked
    params = found[0]["params"]
    assert params["toolCall"] == {
        "toolCallId": "t2",
        "title": "Bash: rm -rf build",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "rm -rf build"},
    }
    assert [o["kind"] for o in params["options"]] == ["allow_once", "reject_once"]
    msgs = lines(effects)
    assert msgs.index(found[0]) > msgs.index(answer(effects, 1))  # after the load's answer


@pytest.mark.parametrize(("option", "behavior"), [("allow", "allow"), ("deny", "deny")])
def test_the_editors_choice_goes_to_the_host(option: str, behavior: str) -> None:
    bridge, _ = opened()
    effects = bridge.event(event(1, "permission_request", request=perm("r1").model_dump()))
    rid = asks(effects)[0]["id"]
    assert bridge.feed(choose(rid, option)) == [Respond("r1", behavior)]  # type: ignore[arg-type]
    response = {"request_id": "r1", "behavior": behavior}
    assert cancels(bridge.event(event(2, "permission_response", decision=response))) == []
    assert bridge.feed(choose(rid, option)) == []  # answered already


def test_an_agents_own_options_are_offered_and_answered_by_their_id() -> None:
    bridge, _ = opened()
    options = [
        {"id": "proceed_once", "name": "Allow", "kind": "allow_once"},
        {"id": "proceed_always", "name": "Always", "kind": "allow_always"},
        {"id": "nope", "name": "", "kind": "reject_once"},
        {"id": "weird", "name": "?", "kind": "sometimes"},
    ]
    req = perm("r1", options=options)
    effects = bridge.event(event(1, "permission_request", request=req.model_dump()))
    found = asks(effects)[0]
    assert found["params"]["options"] == [
        {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
        {"optionId": "nope", "name": "reject_once", "kind": "reject_once"},
    ]
    assert bridge.feed(choose(found["id"], "proceed_always")) == [
        Respond("r1", "allow", "proceed_always")
    ]


def test_a_request_answered_elsewhere_is_withdrawn_and_its_late_answer_ignored() -> None:
    bridge, _ = opened()
    rid = asks(bridge.event(event(1, "permission_request", request=perm("r1").model_dump())))[0][
        "id"
    ]
    response = {"request_id": "r1", "behavior": "deny"}
    assert cancels(bridge.event(event(2, "permission_response", decision=response))) == [rid]
    assert bridge.feed(choose(rid, "allow")) == []
    late = jsonrpc.error(rid, jsonrpc.REQUEST_CANCELLED, "cancelled")
    assert bridge.feed(late) == []


@pytest.mark.parametrize(
    "reply",
    [
        {"outcome": {"outcome": "cancelled"}},
        {"outcome": {"outcome": "selected", "optionId": "maybe"}},
        {"outcome": "allow"},
        [1],
        None,
    ],
)
def test_an_answer_that_picks_nothing_leaves_the_request_to_others(reply: Any) -> None:
    bridge, _ = opened()
    rid = asks(bridge.event(event(1, "permission_request", request=perm("r1").model_dump())))[0][
        "id"
    ]
    assert bridge.feed(jsonrpc.result(rid, reply)) == []
    # not asked again while it stays pending, on this stream or after a reattach
    again = bridge.event(event(2, "permission_request", request=perm("r1").model_dump()))
    again += bridge.attached(
        epoch=EPOCH, head=2, position=2, new_epoch=False, pending=[perm("r1")], structured=True
    )
    assert asks(again) == []


def test_an_editor_error_answer_leaves_the_request_pending() -> None:
    bridge, _ = opened()
    rid = asks(bridge.event(event(1, "permission_request", request=perm("r1").model_dump())))[0][
        "id"
    ]
    assert bridge.feed(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, "no UI")) == []


def test_a_reattach_brings_the_questions_in_line_with_the_host() -> None:
    bridge, _ = opened()
    effects = bridge.event(event(1, "permission_request", request=perm("r1").model_dump()))
    effects += bridge.event(event(2, "permission_request", request=perm("r2").model_dump()))
    ids = {m["params"]["toolCall"]["toolCallId"]: m["id"] for m in asks(effects)}
    # the host restarted: r1 is gone, r3 is new; its replay (3..4) comes first
    effects = bridge.attached(
        epoch=EPOCH,
        head=4,
        position=2,
        new_epoch=False,
        pending=[perm("r2"), perm("r3")],
        structured=True,
    )
    effects += bridge.event(event(3, "permission_request", request=perm("r3").model_dump()))
    assert asks(effects) == [] and cancels(effects) == []
    effects = bridge.event(state(4, "waiting"))
    assert cancels(effects) == [ids["r1"]]
    assert [m["params"]["toolCall"]["toolCallId"] for m in asks(effects)] == ["r3"]


def test_events_during_a_send_keep_their_order_across_a_reattach() -> None:
    bridge, _ = opened()
    params = {"sessionId": AGENT, "prompt": [{"type": "text", "text": "x"}]}
    bridge.feed(request(2, "session/prompt", params))
    held = bridge.event(entry(1, "user", content="x"))
    held += bridge.attached(
        epoch=EPOCH, head=1, position=1, new_epoch=False, pending=[perm("r9")], structured=True
    )
    held += bridge.event(state(2, "idle"))
    assert held == []
    effects = bridge.sent(2, 1)
    msgs = lines(effects)
    assert asks(effects) and answer(effects, 2)["result"] == {"stopReason": "end_turn"}
    assert msgs.index(asks(effects)[0]) < msgs.index(answer(effects, 2))


def test_times_are_those_of_the_stream() -> None:
    bridge, _ = opened()
    bridge.event(state(1, "idle"))
    info = AgentInfo.model_validate(
        {
            "id": AGENT,
            "state": "idle",
            "worktree": "/w",
            "started_at": datetime(2020, 1, 1, tzinfo=UTC),
        }
    )
    sessions = answer(bridge.listed(1, None, info), 1)["result"]["sessions"]
    assert sessions[0]["updatedAt"].startswith("2026-11-23T10:00:00")
