"""agenthost.agents.streamjson (Claude Code's stream-json) and the stream-json adapter."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.agents.base import (
    AdapterEvent,
    Chat,
    ErrorNote,
    InfoUpdate,
    Output,
    StateChange,
    TurnResult,
    Write,
)
from agenthost.agents.demo import DemoAdapter, StreamJsonAdapter
from agenthost.agents.streamjson import (
    SUMMARY_MAX,
    StreamJsonParser,
    content_text,
    summarize_tool_input,
    user_message,
)
from agenthost.protocol import AgentState, EventEncoder, HistoryEntry, StreamEvent

HYPO = settings(max_examples=200, deadline=None)
IDLE = StateChange(AgentState.IDLE)
RUNNING = StateChange(AgentState.RUNNING)


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


SYSTEM_INIT = _line(
    {
        "type": "system",
        "subtype": "init",
        "cwd": "/work/p",
        "session_id": "sess-1",
        "tools": ["Bash", "Read"],
        "mcp_servers": [],
        "model": "claude-sonnet-4-5",
        "permissionMode": "default",
        "apiKeySource": "none",
    }
)


def _assistant(*blocks: Any) -> str:
    return _line(
        {
            "type": "assistant",
            "message": {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": list(blocks),
                "stop_reason": None,
                "usage": {"input_tokens": 3, "output_tokens": 7},
            },
            "parent_tool_use_id": None,
            "session_id": "sess-1",
        }
    )


def _user(*blocks: Any) -> str:
    return _line(
        {
            "type": "user",
            "message": {"role": "user", "content": list(blocks)},
            "parent_tool_use_id": None,
            "session_id": "sess-1",
        }
    )


BASH_USE = {
    "type": "tool_use",
    "id": "toolu_01",
    "name": "Bash",
    "input": {"command": "ls -la", "description": "List files"},
}

RESULT_SUCCESS = _line(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 2500,
        "duration_api_ms": 2100,
        "num_turns": 3,
        "result": "All done.",
        "session_id": "sess-1",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }
)

RESULT_ERROR = _line(
    {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "duration_ms": 100,
        "duration_api_ms": 0,
        "num_turns": 1,
        "session_id": "sess-2",
        "total_cost_usd": 0.001,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
)

RESULT_API_ERROR = _line(
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": "API Error: 500\n  overloaded",
        "session_id": "sess-3",
    }
)


# line -> the events after the leading Output(line)
PARSE_TABLE: dict[str, tuple[str, list[AdapterEvent]]] = {
    "system init": (
        SYSTEM_INIT,
        [InfoUpdate({"session_id": "sess-1", "model": "claude-sonnet-4-5"})],
    ),
    "system other subtype": (_line({"type": "system", "subtype": "compact_boundary"}), []),
    "system init without fields": (_line({"type": "system", "subtype": "init"}), []),
    "assistant text": (
        _assistant({"type": "text", "text": "Hello there."}),
        [Chat({"role": "assistant", "content": "Hello there."})],
    ),
    "assistant string content": (
        _line({"type": "assistant", "message": {"content": "plain"}}),
        [Chat({"role": "assistant", "content": "plain"})],
    ),
    "assistant empty text": (_assistant({"type": "text", "text": ""}), []),
    "assistant text and tool_use": (
        _assistant({"type": "text", "text": "Let me look."}, BASH_USE),
        [
            Chat({"role": "assistant", "content": "Let me look."}),
            Chat(
                {
                    "role": "tool",
                    "tool_name": "Bash",
                    "tool_input": "ls -la",
                    "input": {"command": "ls -la", "description": "List files"},
                    "tool_use_id": "toolu_01",
                }
            ),
        ],
    ),
    "tool_use without input": (
        _assistant({"type": "tool_use", "id": "t2", "name": "Read"}),
        [Chat({"role": "tool", "tool_name": "Read", "tool_input": "null", "tool_use_id": "t2"})],
    ),
    "tool_use with bad name and id": (
        _assistant({"type": "tool_use", "id": 5, "name": ["x"], "input": {"path": "/p"}}),
        [Chat({"role": "tool", "tool_name": "tool", "tool_input": "/p", "input": {"path": "/p"}})],
    ),
    "thinking block": (
        _assistant({"type": "thinking", "thinking": "secret thoughts", "signature": "abc"}),
        [],
    ),
    "redacted thinking": (_assistant({"type": "redacted_thinking", "data": "xyz"}), []),
    "user tool_result string": (
        _user({"tool_use_id": "toolu_09", "type": "tool_result", "content": "a\nb"}),
        [
            Chat(
                {
                    "role": "tool",
                    "tool_result": "a\nb",
                    "is_error": False,
                    "tool_use_id": "toolu_09",
                }
            )
        ],
    ),
    "user tool_result blocks": (
        _user(
            {
                "tool_use_id": "toolu_09",
                "type": "tool_result",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "image", "source": {"type": "base64", "data": "..."}},
                    {"type": "text", "text": "second"},
                ],
            }
        ),
        [
            Chat(
                {
                    "role": "tool",
                    "tool_result": "first\n[image]\nsecond",
                    "is_error": False,
                    "tool_use_id": "toolu_09",
                }
            )
        ],
    ),
    "user tool_result error": (
        _user(
            {
                "tool_use_id": "toolu_09",
                "type": "tool_result",
                "content": "Exit code 1\nboom",
                "is_error": True,
            }
        ),
        [
            Chat(
                {
                    "role": "tool",
                    "tool_result": "Exit code 1\nboom",
                    "is_error": True,
                    "tool_use_id": "toolu_09",
                }
            )
        ],
    ),
    "user tool_result without content": (
        _user({"type": "tool_result"}),
        [Chat({"role": "tool", "tool_result": "", "is_error": False})],
    ),
    "user plain text echo": (
        _line({"type": "user", "message": {"role": "user", "content": "hi"}}),
        [],
    ),
    "user text blocks": (_user({"type": "text", "text": "hi"}), []),
    "result success": (
        RESULT_SUCCESS,
        [
            TurnResult(
                {
                    "subtype": "success",
                    "is_error": False,
                    "duration_ms": 2500,
                    "duration_api_ms": 2100,
                    "num_turns": 3,
                    "cost_usd": 0.0123,
                    "turn_cost_usd": 0.0123,
                    "usage": {"input_tokens": 100, "output_tokens": 50},
                    "session_id": "sess-1",
                }
            ),
            InfoUpdate(
                {
                    "turns": 1,
                    "cost_usd": 0.0123,
                    "usage": {"input_tokens": 100, "output_tokens": 50},
                    "session_id": "sess-1",
                }
            ),
            IDLE,
        ],
    ),
    "result error_during_execution": (
        RESULT_ERROR,
        [
            # no text and no errors: the subtype is the message
            ErrorNote("error_during_execution", turn_failed=True),
            Chat({"role": "assistant", "content": "error_during_execution", "is_error": True}),
            TurnResult(
                {
                    "subtype": "error_during_execution",
                    "is_error": True,
                    "duration_ms": 100,
                    "duration_api_ms": 0,
                    "num_turns": 1,
                    "cost_usd": 0.001,
                    "turn_cost_usd": 0.001,
                    "usage": {"input_tokens": 1, "output_tokens": 0},
                    "session_id": "sess-2",
                }
            ),
            InfoUpdate(
                {
                    "turns": 1,
                    "cost_usd": 0.001,
                    "usage": {"input_tokens": 1, "output_tokens": 0},
                    "session_id": "sess-2",
                }
            ),
            IDLE,
        ],
    ),
    "result is_error with text": (
        RESULT_API_ERROR,
        [
            ErrorNote("API Error: 500 overloaded", turn_failed=True),
            Chat({"role": "assistant", "content": "API Error: 500 overloaded", "is_error": True}),
            TurnResult({"subtype": "success", "is_error": True, "session_id": "sess-3"}),
            InfoUpdate({"turns": 1, "session_id": "sess-3"}),
            IDLE,
        ],
    ),
    "result legacy cost_usd": (
        _line({"type": "result", "subtype": "success", "cost_usd": 2}),
        [
            TurnResult({"subtype": "success", "cost_usd": 2}),
            InfoUpdate({"turns": 1, "cost_usd": 2}),
            IDLE,
        ],
    ),
    "result bool cost ignored": (
        _line({"type": "result", "total_cost_usd": True, "usage": "many", "num_turns": [1]}),
        [TurnResult({}), InfoUpdate({"turns": 1}), IDLE],
    ),
    # garbage
    "unknown type": (_line({"type": "stream_event", "event": {}}), []),
    "type number": (_line({"type": 5}), []),
    "type null": (_line({"type": None}), []),
    "no type": (_line({"message": {"content": "x"}}), []),
    "type list": (_line({"type": ["assistant"]}), []),
    "type object": (_line({"type": {"kind": "assistant"}}), []),
    "json array": ("[1, 2, 3]", []),
    "json string": ('"assistant"', []),
    "json number": ("42", []),
    "json null": ("null", []),
    "message as string": (_line({"type": "assistant", "message": "hello"}), []),
    "message as list": (_line({"type": "user", "message": [1]}), []),
    "content as dict": (_line({"type": "assistant", "message": {"content": {"type": "text"}}}), []),
    "content with non-dict blocks": (
        _assistant("x", 5, None, [1], {"type": "text", "text": "ok"}, {"type": "text", "text": 3}),
        [Chat({"role": "assistant", "content": "ok"})],
    ),
    "user content with non-dict blocks": (_user("x", 5, None, {"type": "text"}), []),
    "empty line": ("", []),
    "blank line": ("   \t", []),
}


@pytest.mark.parametrize(("line", "expected"), list(PARSE_TABLE.values()), ids=list(PARSE_TABLE))
def test_parse_table(line: str, expected: list[AdapterEvent]) -> None:
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    assert events[1:] == expected


@pytest.mark.parametrize(
    "line",
    ["not json", "{", '{"type": "assistant",', "{'type': 'assistant'}", "\x00\x01", "[" * 100_000],
    ids=["text", "brace", "truncated", "python repr", "control chars", "huge nested"],
)
def test_not_json_gives_output_and_error_note(line: str) -> None:
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    assert len(events) == 2
    note = events[1]
    assert isinstance(note, ErrorNote)
    assert note.message.startswith("agent printed a line that is not JSON: ")
    assert len(note.message) < 300  # clipped, never the whole line


def test_huge_nested_json_object_is_survived() -> None:
    line = '{"type":"assistant","message":{"content":' + "[" * 100_000 + "]" * 100_000 + "}}"
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    assert isinstance(events[1], ErrorNote)


def test_surrounding_whitespace_is_tolerated() -> None:
    line = "  " + _assistant({"type": "text", "text": "hi"}) + " \r"
    events = StreamJsonParser().parse(line)
    assert events == [Output(line), Chat({"role": "assistant", "content": "hi"})]


def test_session_tracks_tool_names_and_state() -> None:
    parser = StreamJsonParser()
    assert parser.session_id is None
    parser.parse(SYSTEM_INIT)
    assert parser.session_id == "sess-1"
    parser.parse(_assistant(BASH_USE, {**BASH_USE, "id": "toolu_02", "name": "Read"}))
    events = parser.parse(
        _user(
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "r"},
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "b"},
            {"type": "tool_result", "tool_use_id": "toolu_99", "content": "?"},
        )
    )
    chats = [e.entry for e in events if isinstance(e, Chat)]
    assert [c.get("tool_name") for c in chats] == ["Read", "Bash", None]
    # a tool id is matched once
    again = parser.parse(_user({"type": "tool_result", "tool_use_id": "toolu_01", "content": ""}))
    assert "tool_name" not in again[1].entry  # type: ignore[union-attr]
    # result counts turns and updates the session
    first = parser.parse(RESULT_SUCCESS)
    second = parser.parse(RESULT_ERROR)
    assert first[2] == InfoUpdate(
        {
            "turns": 1,
            "cost_usd": 0.0123,
            "usage": {"input_tokens": 100, "output_tokens": 50},
            "session_id": "sess-1",
        }
    )
    assert isinstance(second[4], InfoUpdate) and second[4].fields["turns"] == 2
    assert parser.session_id == "sess-2"


def test_tool_name_memory_is_bounded() -> None:
    parser = StreamJsonParser()
    for i in range(10_050):
        parser.parse(_assistant({"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}))
    assert len(parser._tool_names) <= 10_000
    events = parser.parse(_user({"type": "tool_result", "tool_use_id": "t10049", "content": "x"}))
    assert events[1].entry["tool_name"] == "Bash"  # type: ignore[union-attr]


# --- every event the parser makes can be published -------------------------------------

T = "2024-01-01T00:00:00.000000Z"


def _publish(events: list[AdapterEvent]) -> None:
    """What the host does with adapter events: encode each once (EventEncoder)."""
    enc = EventEncoder("a")
    for ev in events:
        if isinstance(ev, Output):
            line = enc.output(1, T, ev.data, ev.stream, ev.continued)
        elif isinstance(ev, Chat):
            entry = {**ev.entry, "timestamp": T}
            HistoryEntry.model_validate(entry)  # the shape clients expect
            line = enc.event("chat_entry", 1, T, {"chat_entry": entry})
        elif isinstance(ev, ErrorNote):
            line = enc.event("error", 1, T, {"error": ev.message})
        elif isinstance(ev, TurnResult):
            line = enc.event("result", 1, T, {"result": ev.result})
        elif isinstance(ev, StateChange):
            line = enc.event("state", 1, T, {"state": ev.state.value})
        else:
            assert isinstance(ev, InfoUpdate)
            json.dumps(ev.fields, allow_nan=False)
            continue
        StreamEvent.model_validate(json.loads(line))


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"result","subtype":"success","duration_ms":NaN}',
        '{"type":"result","subtype":"success","total_cost_usd":Infinity}',
        '{"type":"result","subtype":"success","usage":{"input_tokens":-Infinity}}',
        '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash",'
        '"input":{"command":"ls","timeout":NaN}}]}}',
    ],
    ids=["NaN duration", "Infinity cost", "-Infinity in usage", "NaN in tool input"],
)
def test_non_finite_numbers_from_agent_can_be_published(line: str) -> None:
    """Python's json accepts NaN/Infinity, but the host encodes events with
    allow_nan=False: the parser must not hand such values on."""
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    _publish(events)


vocab_keys = st.sampled_from(
    [
        "type",
        "subtype",
        "message",
        "content",
        "text",
        "name",
        "id",
        "input",
        "tool_use_id",
        "is_error",
        "session_id",
        "model",
        "result",
        "usage",
        "total_cost_usd",
        "duration_ms",
        "command",
    ]
)
vocab_strings = st.sampled_from(
    [
        "system",
        "init",
        "assistant",
        "user",
        "result",
        "text",
        "tool_use",
        "tool_result",
        "thinking",
        "image",
        "server_tool_use",
        "error_max_turns",
        "Bash",
        "TodoWrite",
    ]
) | st.text(max_size=10)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    vocab_strings,
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(vocab_keys, inner, max_size=6),
    max_leaves=30,
)
messages = st.fixed_dictionaries(
    {"type": st.sampled_from(["system", "assistant", "user", "result", "command_lifecycle"])},
    optional={
        "subtype": vocab_strings,
        "message": json_values,
        "session_id": json_values,
        "result": json_values,
        "usage": json_values,
        "is_error": json_values,
        "total_cost_usd": json_values,
        "is_api_error_message": json_values,
        "api_error_status": json_values,
        "terminal_reason": json_values,
        "errors": json_values,
        "user_message_uuids": json_values,
        "isReplay": json_values,
        "command_uuid": json_values,
        "state": json_values,
    },
)


@HYPO
@given(obj=messages | st.dictionaries(vocab_keys, json_values, max_size=6) | json_values)
def test_fuzz_json_lines_never_raise_and_publish(obj: Any) -> None:
    line = json.dumps(obj)
    parser = StreamJsonParser()
    events = parser.parse(line)
    assert events[0] == Output(line)
    assert not any(isinstance(e, Output) for e in events[1:])
    # it was valid JSON: an error note only reports a failed turn, with its history entry
    notes = [e.message for e in events if isinstance(e, ErrorNote)]
    failed = [e.entry for e in events if isinstance(e, Chat) and e.entry.get("is_error")]
    assert notes == [f["content"] for f in failed if f["role"] == "assistant"]
    _publish(events)


@HYPO
@given(line=st.text(max_size=200))
def test_fuzz_text_lines_never_raise(line: str) -> None:
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    _publish(events)


# --- summarize_tool_input ----------------------------------------------------------------

SUMMARIES: dict[str, tuple[str, Any, str]] = {
    "bash": ("Bash", {"command": "ls -la", "description": "List"}, "ls -la"),
    "read": ("Read", {"file_path": "/a/b.py", "offset": 10}, "/a/b.py"),
    "write": ("Write", {"file_path": "/a/c.py", "content": "x" * 1000}, "/a/c.py"),
    "edit": ("Edit", {"file_path": "/e", "old_string": "a", "new_string": "b"}, "/e"),
    "notebook": ("NotebookEdit", {"notebook_path": "/n.ipynb", "new_source": "x"}, "/n.ipynb"),
    "glob": ("Glob", {"pattern": "**/*.py", "path": "src"}, "**/*.py"),
    "grep": ("Grep", {"pattern": "def main", "path": "src"}, "def main"),
    "webfetch": ("WebFetch", {"url": "https://example.com", "prompt": "p"}, "https://example.com"),
    "websearch": ("WebSearch", {"query": "pydantic v2"}, "pydantic v2"),
    "task description": ("Task", {"description": "Find bugs", "prompt": "long"}, "Find bugs"),
    "task prompt only": ("Task", {"prompt": "long prompt"}, "long prompt"),
    "bash output": ("BashOutput", {"bash_id": "b1"}, "b1"),
    "exec_command list": ("exec_command", {"cmd": ["bash", "-lc", "ls"]}, "bash -lc ls"),
    "exec_command string": ("exec_command", {"command": "make test"}, "make test"),
    "todos": ("TodoWrite", {"todos": [{"content": "a"}, {"content": "b"}, {}]}, "3 todos"),
    "mcp tool with path": ("mcp__fs__read", {"path": "/p", "x": 1}, "/p"),
    "unknown tool": ("Frobnicate", {"a": 1, "b": "é"}, '{"a":1,"b":"é"}'),
    "empty command falls back": ("Bash", {"command": ""}, '{"command":""}'),
    "non-string command": ("Bash", {"command": 5}, '{"command":5}'),
    "string input": ("Bash", "ls", '"ls"'),
    "none input": ("Bash", None, "null"),
    "list input": ("Bash", [1, 2], "[1,2]"),
    "multi-line command": ("Bash", {"command": "echo a\n  echo b\tc"}, "echo a echo b c"),
}


@pytest.mark.parametrize(
    ("name", "tool_input", "expected"), list(SUMMARIES.values()), ids=list(SUMMARIES)
)
def test_summarize_tool_input(name: str, tool_input: Any, expected: str) -> None:
    assert summarize_tool_input(name, tool_input) == expected


def test_summary_is_clipped() -> None:
    summary = summarize_tool_input("Bash", {"command": "x" * 1000})
    assert len(summary) == SUMMARY_MAX
    assert summary.endswith("…")
    assert summary[:-1] == "x" * (SUMMARY_MAX - 1)
    assert len(summarize_tool_input("Other", {"k": "y" * 1000})) == SUMMARY_MAX


@pytest.mark.parametrize("command", ["a\rb", "one\r\ntwo", "printf x\r"])
def test_summary_has_no_line_breaks(command: str) -> None:
    """A carriage return in a summary breaks the one-line "● Bash(...)" rendering
    in a terminal (it moves the cursor back over the tool name)."""
    summary = summarize_tool_input("Bash", {"command": command})
    assert "\n" not in summary and "\r" not in summary, repr(summary)


@HYPO
@given(name=st.sampled_from(["Bash", "Read", "Other"]), command=st.text(max_size=400))
def test_summary_is_short_and_single_line(name: str, command: str) -> None:
    key = "file_path" if name == "Read" else "command"
    summary = summarize_tool_input(name, {key: command})
    assert len(summary) <= SUMMARY_MAX
    assert "\n" not in summary and "\r" not in summary, repr(summary)


# --- content_text ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("abc", "abc"),
        ("", ""),
        (None, ""),
        ([], ""),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        ([{"type": "image", "source": {}}], "[image]"),
        (["x", {"type": "text", "text": "y"}], "x\ny"),
        ([5, None, {"type": "other"}, {"type": "text", "text": 5}], ""),
        ({"a": 1}, '{"a":1}'),
        (5, "5"),
        (True, "true"),
    ],
)
def test_content_text(content: Any, expected: str) -> None:
    assert content_text(content) == expected


# --- user_message ------------------------------------------------------------------------


@HYPO
@given(
    text=st.text(st.characters(exclude_categories=()), max_size=200),
    session=st.none() | st.text(min_size=1, max_size=20),
)
def test_user_message_is_one_valid_json_line(text: str, session: str | None) -> None:
    line = user_message(text, session)
    assert isinstance(line, bytes)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert line.isascii()
    obj = json.loads(line)
    assert obj["type"] == "user"
    assert obj["message"] == {"role": "user", "content": [{"type": "text", "text": text}]}
    assert obj["session_id"] == (session or "default")
    assert obj["parent_tool_use_id"] is None


# --- the stream-json adapter's state -----------------------------------------------------


def _states(events: list[AdapterEvent]) -> list[AgentState]:
    return [e.state for e in events if isinstance(e, StateChange)]


def _sent_uuid(events: list[AdapterEvent]) -> str:
    (write,) = [e for e in events if isinstance(e, Write)]
    uuid = json.loads(write.data)["uuid"]
    assert isinstance(uuid, str)
    return uuid


def _result(**fields: Any) -> str:
    return _line({"type": "result", "subtype": "success", "is_error": False, **fields})


def test_adapter_without_uuids_in_results_counts_one_result_per_send() -> None:
    # what an older CLI that names no message does: one result answers one send
    adapter = StreamJsonAdapter()
    assert adapter.initial_state() is AgentState.IDLE
    assert adapter.send("one")[1:] == [RUNNING]
    assert adapter.send("two")[1:] == [RUNNING]
    first = adapter.parse_line(RESULT_SUCCESS)
    assert _states(first) == []  # the second turn is still queued: stays running
    assert any(isinstance(e, TurnResult) for e in first)
    assert first[0] == Output(RESULT_SUCCESS)
    second = adapter.parse_line(RESULT_SUCCESS)
    assert _states(second) == [AgentState.IDLE]
    # a result nobody asked for (e.g. the agent's own turn) still reports idle
    third = adapter.parse_line(RESULT_SUCCESS)
    assert _states(third) == [AgentState.IDLE]
    # and does not make the count negative
    adapter.send("three")
    assert _states(adapter.parse_line(RESULT_SUCCESS)) == [AgentState.IDLE]


def test_adapter_one_result_answering_two_sends_makes_it_idle() -> None:
    # Claude Code folds a message sent while a tool runs into the running turn
    adapter = StreamJsonAdapter()
    first, second = _sent_uuid(adapter.send("one")), _sent_uuid(adapter.send("two"))
    assert first != second
    events = adapter.parse_line(_result(user_message_uuids=[first, second]))
    assert _states(events) == [AgentState.IDLE]
    assert adapter.parser.unanswered == 0


def test_adapter_stays_running_while_a_listed_send_is_unanswered() -> None:
    adapter = StreamJsonAdapter()
    first, second = _sent_uuid(adapter.send("one")), _sent_uuid(adapter.send("two"))
    assert _states(adapter.parse_line(_result(user_message_uuids=[first]))) == []
    # the CLI said which message it answered: a result naming another one does not count
    assert _states(adapter.parse_line(_result(user_message_uuids=["someone-else"]))) == []
    assert _states(adapter.parse_line(_result(user_message_uuids=[second]))) == [AgentState.IDLE]


@pytest.mark.parametrize(
    "listed",
    [None, "a-uuid", 5, [], [None], [1, 2], [{"uuid": "x"}], [["nested"]], True],
    ids=repr,
)
def test_adapter_survives_garbage_user_message_uuids(listed: Any) -> None:
    # anything but a list of strings: counted as one result per send
    adapter = StreamJsonAdapter()
    adapter.send("one")
    adapter.send("two")
    assert _states(adapter.parse_line(_result(user_message_uuids=listed))) == []
    assert adapter.parser.unanswered == 1


def test_lifecycle_settles_a_message_no_result_lists() -> None:
    adapter = StreamJsonAdapter()
    first, second = _sent_uuid(adapter.send("one")), _sent_uuid(adapter.send("two"))
    assert _states(adapter.parse_line(_result(user_message_uuids=[first]))) == []

    def lifecycle(uuid: Any, state: Any) -> str:
        return _line({"type": "command_lifecycle", "command_uuid": uuid, "state": state})

    for garbage in (lifecycle(None, "cancelled"), lifecycle(second, "weird"), lifecycle(7, 7)):
        assert _states(adapter.parse_line(garbage)) == []
    # a queued message the CLI dropped: nothing will answer it
    assert _states(adapter.parse_line(lifecycle(second, "cancelled"))) == [AgentState.IDLE]
    # one that started and completed waits for its result to say so
    third = _sent_uuid(adapter.send("three"))
    assert _states(adapter.parse_line(lifecycle(third, "started"))) == []
    assert _states(adapter.parse_line(lifecycle(third, "completed"))) == []
    assert _states(adapter.parse_line(_result(user_message_uuids=[third]))) == [AgentState.IDLE]


def test_adapter_other_lines_do_not_change_state() -> None:
    adapter = StreamJsonAdapter()
    adapter.send("x")
    for line in (SYSTEM_INIT, _assistant({"type": "text", "text": "hi"}), "garbage"):
        assert _states(adapter.parse_line(line)) == []
    assert _states(adapter.parse_line(RESULT_ERROR)) == [AgentState.IDLE]


def test_replayed_user_message_is_not_history() -> None:
    # --replay-user-messages echoes each send; the host recorded it already
    parser = StreamJsonParser()
    for content in ("hello", [{"type": "text", "text": "hello"}]):
        line = _line(
            {
                "type": "user",
                "message": {"role": "user", "content": content},
                "uuid": "u1",
                "isReplay": True,
            }
        )
        assert parser.parse(line) == [Output(line)]


def test_adapter_encode_input_uses_session() -> None:
    adapter = StreamJsonAdapter()
    assert json.loads(adapter.encode_input("hi"))["session_id"] == "default"
    adapter.parse_line(SYSTEM_INIT)
    line = adapter.encode_input("hello\nworld")
    obj = json.loads(line)
    assert obj["session_id"] == "sess-1"
    assert obj["message"]["content"][0]["text"] == "hello\nworld"
    assert line.count(b"\n") == 1


def test_demo_adapter() -> None:
    adapter = DemoAdapter()
    assert adapter.kind == "demo"
    assert adapter.passthrough is False
    assert adapter.build_command(["--pace", "0"]) == [
        sys.executable,
        "-P",  # (not the agent's directory on its path: agenthost/pyargv.py)
        "-m",
        "agenthost.agents.demo_agent",
        "--replay-user-messages",
        "--pace",
        "0",
    ]
    assert adapter.environment()["PYTHONUNBUFFERED"] == "1"
    assert adapter.initial_state() is AgentState.IDLE


def test_history_entry_from_chat_validates() -> None:
    events = StreamJsonParser().parse(_assistant(BASH_USE))
    chat = events[1]
    assert isinstance(chat, Chat)
    entry = HistoryEntry.model_validate({**chat.entry, "timestamp": datetime.now(UTC)})
    assert (entry.role, entry.tool_name, entry.tool_input) == ("tool", "Bash", "ls -la")
    assert entry.input == BASH_USE["input"]


def _totals(*totals: object) -> list[object]:
    parser = StreamJsonParser()
    out = []
    for total in totals:
        events = parser.parse(
            _line({"type": "result", "subtype": "success", "total_cost_usd": total})
        )
        out += [e.result.get("turn_cost_usd") for e in events if isinstance(e, TurnResult)]
    return out


def test_each_result_says_what_its_turn_cost() -> None:
    # total_cost_usd is the process's so far (Claude Code, the demo): a turn's cost is
    # what it added; the attach line shows it, not the total (issue 28)
    assert _totals(0.0004, 0.0009, 0.0009, 0.002) == [0.0004, 0.0005, 0.0, 0.0011]
    # a total that went down started again; garbage is no total and changes nothing
    assert _totals(0.5, 0.2, "x", None, -1, True, 0.3) == [0.5, 0.2, None, None, None, None, 0.1]
