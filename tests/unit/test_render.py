"""agenthost.cli.render: terminal rendering of events, entries, results and tables."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from agenthost.cli.render import (
    EventRenderer,
    Style,
    fold,
    render_entry,
    render_result,
    render_status,
    table,
)
from agenthost.protocol import AgentInfo, HistoryEntry, HostInfo, StatusResponse, StreamEvent

import hostiletext as hostile

T0 = datetime(2024, 1, 1, tzinfo=UTC)
PLAIN = Style(False)
COLOR = Style(True)


def _event(etype: str, **fields: Any) -> StreamEvent:
    return StreamEvent(type=etype, agent_id="a", offset=1, timestamp=T0, **fields)


def _chat(**fields: Any) -> StreamEvent:
    return _event("chat_entry", chat_entry=HistoryEntry(timestamp=T0, **fields))


INTERRUPTED = _chat(role="assistant", content="turn interrupted", interrupted=True)
EVENTS: dict[str, StreamEvent] = {
    "stdout": _event("output", data="raw line", stream="stdout"),
    "stderr": _event("output", data="warning: x", stream="stderr"),
    "user": _chat(role="user", content="fix the bug"),
    "assistant": _chat(role="assistant", content="On it."),
    "tool call": _chat(role="tool", tool_name="Bash", tool_input="ls -la"),
    "tool result": _chat(role="tool", tool_result="a\nb\nc\nd\ne", tool_use_id="t"),
    "tool error": _chat(role="tool", tool_result="boom", is_error=True),
    "state": _event("state", state="running"),
    "state error": _event("state", state="error"),
    "error": _event("error", error="agent exited with exit code 1"),
    "api error": _event("error", error="overloaded", http_status=529),
    "failed turn": _chat(role="assistant", content="API Error: 500 oops", is_error=True),
    "result": _event(
        "result",
        result={
            "is_error": False,
            "duration_ms": 2500,
            "cost_usd": 0.0523,
            "turn_cost_usd": 0.0123,
            "usage": {"input_tokens": 100, "output_tokens": 50},
        },
    ),
}


def test_structured_stdout_is_hidden_unless_raw() -> None:
    event = EVENTS["stdout"]
    assert EventRenderer(PLAIN, structured=True).render(event) is None
    assert EventRenderer(PLAIN, structured=True, raw=True).render(event) == "raw line"
    assert EventRenderer(PLAIN, structured=False).render(event) == "raw line"


def test_output_without_stream_is_stdout() -> None:
    event = _event("output", data="x")
    assert EventRenderer(PLAIN, structured=True).render(event) is None
    assert EventRenderer(PLAIN, structured=False).render(event) == "x"


@pytest.mark.parametrize("structured", [True, False])
def test_stderr_is_always_shown(structured: bool) -> None:
    out = EventRenderer(PLAIN, structured=structured).render(EVENTS["stderr"])
    assert out is not None
    assert out.endswith("warning: x")
    assert "stderr" in out


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("user", "› fix the bug"),
        ("assistant", "On it."),
        ("tool call", "● Bash(ls -la)"),
        ("tool error", "  ⎿ boom"),
        ("state", "· running"),
        ("state error", "· error"),
        ("error", "! agent exited with exit code 1"),
        ("api error", "! overloaded (HTTP 529)"),
        ("failed turn", "✗ turn failed: API Error: 500 oops"),
        ("result", "✓ turn done · 2.5s · $0.0123 · 100 in / 50 out tokens"),
    ],
)
def test_render_plain(name: str, expected: str) -> None:
    assert EventRenderer(PLAIN, structured=True).render(EVENTS[name]) == expected


def test_tool_result_is_folded_to_three_lines() -> None:
    out = EventRenderer(PLAIN, structured=True).render(EVENTS["tool result"])
    assert out == "  ⎿ a\n    b\n    c\n    … (+2 lines)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("one", "one"),
        ("a\nb\nc", "a\n    b\n    c"),
        ("a\nb\nc\n", "a\n    b\n    c"),  # a trailing newline is not a line
        ("a\nb\nc\nd", "a\n    b\n    c\n    … (+1 lines)"),
        ("\n".join(str(i) for i in range(100)), "0\n    1\n    2\n    … (+97 lines)"),
    ],
)
def test_fold(text: str, expected: str) -> None:
    assert fold(text) == expected


def test_a_thought_is_shown_apart_from_the_answer() -> None:
    entry = HistoryEntry(timestamp=T0, role="assistant", content="Let me look.", thought=True)
    assert render_entry(entry, PLAIN) == "✻ Let me look."
    assert render_entry(entry, COLOR) != render_entry(entry, PLAIN)  # dimmed


def test_empty_tool_result() -> None:
    entry = HistoryEntry(role="tool", tool_result="", timestamp=T0)
    assert render_entry(entry, PLAIN) == "  ⎿ (no output)"


def test_tool_call_without_name_or_input() -> None:
    entry = HistoryEntry(role="tool", timestamp=T0)
    assert render_entry(entry, PLAIN) == "● tool()"


def test_failed_result() -> None:
    assert render_result({"is_error": True}, PLAIN) == "✗ turn failed"
    assert render_result({"is_error": True, "interrupted": True}, PLAIN) == "⏹ turn interrupted"
    assert render_result({}, PLAIN) == "✓ turn done"
    assert render_result({"duration_ms": 150_000, "usage": {"input_tokens": "x"}}, PLAIN) == (
        "✓ turn done · 2m30s"
    )


@pytest.mark.parametrize("name", list(EVENTS))
def test_plain_style_has_no_ansi(name: str) -> None:
    out = EventRenderer(PLAIN, structured=False).render(EVENTS[name])
    assert out is not None
    assert "\x1b" not in out


@pytest.mark.parametrize(
    "result",
    [
        {"is_error": True, "interrupted": True},
        # results journaled before the ``interrupted`` field
        {"is_error": True, "subtype": "error_during_execution", "terminal_reason": "aborted_tools"},
        {"is_error": True, "subtype": "interrupted"},  # codex
    ],
)
def test_interrupted_result_is_not_a_failure(result: dict[str, object]) -> None:
    assert render_result({**result, "duration_ms": 700}, PLAIN) == "⏹ turn interrupted · 0.7s"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, "! API Error: 500 boom"),  # the message says it already
        (429, "! API Error: 500 boom (HTTP 429)"),
        ("429", "! API Error: 500 boom"),  # garbage from a peer: ignored
        (None, "! API Error: 500 boom"),
    ],
)
def test_error_event_shows_the_http_status_once(status: object, expected: str) -> None:
    event = _event("error", error="API Error: 500 boom", http_status=status)
    assert EventRenderer(PLAIN, structured=True).render(event) == expected


FAILED_RESULT = _event(
    "result", result={"subtype": "success", "is_error": True, "duration_ms": 0, "turn_cost_usd": 0}
)


def test_a_failed_turn_is_shown_once_in_attach_and_kept_in_history() -> None:
    # the host publishes the error event, then the same text as a history entry, then
    # the result: one line, in the words of docs/agents.md, the text once (issue 28)
    renderer = EventRenderer(PLAIN, structured=True)
    failed = EVENTS["failed turn"]
    marked = _event("error", error="API Error: 500 oops", turn_failed=True)
    assert renderer.render(marked) is None
    assert renderer.render(failed) is None
    assert renderer.render(_event("output", data="{}")) is None
    assert renderer.render(FAILED_RESULT) == "✗ turn failed: API Error: 500 oops · 0.0s · $0.00"
    assert renderer.render(FAILED_RESULT) == "✗ turn failed · 0.0s · $0.00"  # no text twice
    # a host older than the mark: the error as it came, the entry not again
    assert renderer.render(_event("error", error="API Error: 500 oops")) == "! API Error: 500 oops"
    assert renderer.render(failed) is None
    # on its own (attached after the error event) the entry is shown
    assert renderer.render(failed) == "✗ turn failed: API Error: 500 oops"
    # the "turn interrupted" entry: the result line says it
    assert renderer.render(INTERRUPTED) is None
    # history shows both
    assert failed.chat_entry is not None
    assert render_entry(failed.chat_entry, PLAIN) == "✗ turn failed: API Error: 500 oops"
    interrupted = INTERRUPTED.chat_entry
    assert interrupted is not None
    assert render_entry(interrupted, PLAIN) == "⏹ turn interrupted"


def test_a_failed_turn_without_a_result_is_said_before_what_follows() -> None:
    renderer = EventRenderer(PLAIN, structured=True)
    assert renderer.render(_event("error", error="codex turn failed", turn_failed=True)) is None
    assert (
        renderer.render(_event("state", state="idle")) == "✗ turn failed: codex turn failed\n· idle"
    )
    assert renderer.render(_event("state", state="running")) == "· running"
    assert renderer.render(_event("error", error="again", turn_failed=True)) is None
    user = _chat(role="user", content="next")
    assert renderer.render(user) == "✗ turn failed: again\n› next"


def test_an_interrupted_turn_never_also_reads_failed() -> None:
    renderer = EventRenderer(PLAIN, structured=True)
    assert renderer.render(INTERRUPTED) is None
    result = {"subtype": "error_during_execution", "is_error": True, "interrupted": True}
    assert renderer.render(_event("result", result=result)) == "⏹ turn interrupted"


@pytest.mark.parametrize(
    ("result", "figures"),
    [
        # this turn's cost and tokens, never the session's total beside a turn's tokens
        ({"cost_usd": 0.0009, "turn_cost_usd": 0.0005, "usage": {"input_tokens": 40,
          "output_tokens": 21}}, "$0.0005 · 40 in / 21 out tokens"),
        # a host that reports only the total: labelled so
        ({"cost_usd": 0.0009, "usage": {"input_tokens": 40, "output_tokens": 21}},
         "40 in / 21 out tokens · total $0.0009"),
        ({"cost_usd": "free", "turn_cost_usd": float("nan"), "duration_ms": True}, ""),
    ],
)  # fmt: skip
def test_a_turn_shows_its_own_cost(result: dict[str, object], figures: str) -> None:
    line = render_result(result, PLAIN)
    assert line == "✓ turn done" + (f" · {figures}" if figures else "")


@pytest.mark.parametrize("name", ["user", "tool call", "tool error", "state", "error", "result"])
def test_color_style_uses_ansi(name: str) -> None:
    colored = EventRenderer(COLOR, structured=True).render(EVENTS[name])
    plain = EventRenderer(PLAIN, structured=True).render(EVENTS[name])
    assert colored is not None and plain is not None
    assert "\x1b[" in colored
    assert _strip_ansi(colored) == plain


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.parametrize(
    "event",
    [
        _event("sparkle", data="x"),
        _event("future_thing"),
        _event("chat_entry"),  # no entry
        _event("result"),  # no result
    ],
    ids=["unknown with data", "unknown", "chat without entry", "result without payload"],
)
def test_unknown_or_empty_events_render_as_none(event: StreamEvent) -> None:
    assert EventRenderer(PLAIN, structured=False, raw=True).render(event) is None


def test_a_chat_entry_of_an_unknown_shape_shows_its_raw_json() -> None:
    # what decode_message makes of a 1.0 host's {"Role": ..., "Content": ...} entry
    event = _event("chat_entry", data='{"Content":"hi","Role":"assistant"}')
    shown = EventRenderer(PLAIN, structured=True, raw=False).render(event)
    assert shown == 'entry│ {"Content":"hi","Role":"assistant"}'


# --- status and tables -------------------------------------------------------------------


def test_render_status_plain() -> None:
    status = StatusResponse(
        host=HostInfo(
            pid=100, version="0.1.0", protocol_version="1.0", started_at=T0, socket_path="/s.sock"
        ),
        agent=AgentInfo(
            id="a1",
            state="error",
            pid=0,
            started_at=T0,
            ended_at=datetime(2024, 1, 1, 1, 2, 3, tzinfo=UTC),
            exit_code=-9,
            signal="SIGKILL",
            cost_usd=0.5,
            last_error="boom",
        ),
    )
    out = render_status(status, PLAIN)
    assert "\x1b" not in out
    lines = out.splitlines()
    values = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines}
    assert values["agent"] == "a1"
    assert values["state"] == "error"
    assert values["pid"] == "-"
    assert values["uptime"] == "1h2m3s"
    assert values["exit code"] == "-9 (SIGKILL)"
    assert values["cost"] == "$0.50"
    assert values["last error"] == "boom"
    assert values["socket"] == "/s.sock"
    # values start in one column
    starts = {
        len(line) - len(line.split(":", 1)[1].lstrip())
        for line in lines
        if line.split(":", 1)[1].strip()
    }
    assert len(starts) == 1


def test_table_aligns_columns() -> None:
    out = table(
        ["id", "state", "pid"],
        [["agent-long-name", "running", "12"], ["b", "idle", "3456789"], ["c", "", "1"]],
    )
    lines = out.split("\n")
    assert lines[0].split() == ["ID", "STATE", "PID"]
    assert len(lines) == 4
    # every cell of a column starts at the same position
    header = lines[0]
    state_col = header.index("STATE")
    pid_col = header.index("PID")
    assert state_col == len("agent-long-name") + 2
    assert pid_col == state_col + len("running") + 2
    assert lines[1][state_col:].startswith("running")
    assert lines[2][state_col:].startswith("idle")
    assert lines[2][pid_col:] == "3456789"
    assert lines[3][pid_col:] == "1"
    assert all(line == line.rstrip() for line in lines[1:])


def test_table_without_rows() -> None:
    assert table(["a", "bb"], []).rstrip() == "A  BB"


def test_permission_events_render_with_how_to_answer() -> None:
    from agenthost.protocol import StreamEvent

    renderer = EventRenderer(Style(False), structured=True)
    asked = StreamEvent.model_validate(
        {
            "type": "permission_request",
            "agent_id": "web",
            "offset": 5,
            "timestamp": "2026-01-01T00:00:00Z",
            "request": {
                "request_id": "r-1",
                "tool_name": "Bash",
                "tool_input": "rm -rf build",
                "created_at": "2026-01-01T00:00:00Z",
            },
        }
    )
    text = renderer.render(asked)
    assert text is not None and "Bash wants to run: rm -rf build" in text
    assert "agenthost respond web r-1 allow|deny" in text
    decided = StreamEvent.model_validate(
        {
            "type": "permission_response",
            "agent_id": "web",
            "offset": 6,
            "timestamp": "2026-01-01T00:00:00Z",
            "decision": {"request_id": "r-1", "behavior": "deny", "message": "no"},
        }
    )
    assert renderer.render(decided) == "· denied: no"
    # a 1.3 host says who decided, and records it as a `permission` entry, shown instead
    recorded = decided.model_copy(
        update={"decision": decided.decision.model_copy(update={"actor": "web:phone"})}
    )
    assert renderer.render(recorded) is None


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("short", 10, "short"),
        ("exactly ten", 11, "exactly ten"),
        ("a bit too long", 10, "a bit too…"),
        ("日本語のテキスト", 9, "日本語の…"),  # wide characters count two columns
        ("two\nlines\there", 40, "two lines here"),
        ("anything", None, "anything"),
    ],
)
def test_fit(text: str, width: int | None, expected: str) -> None:
    from wcwidth import wcswidth

    from agenthost.cli.render import fit

    assert fit(text, width) == expected
    if width is not None:
        assert wcswidth(fit(text, width)) <= width


def test_parse_since() -> None:
    import click

    from agenthost.cli.attach import parse_since

    now = datetime.now(UTC)
    assert abs((now - parse_since("10m")).total_seconds() - 600) < 5
    assert parse_since("2026-11-22T09:30:00Z") == datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    with pytest.raises(click.BadParameter):
        parse_since("yesterday-ish")


# --- agent text is escaped, a command to approve is whole ------------------------------

H = hostile.TEXT
HOSTILE_EVENTS: dict[str, StreamEvent] = {
    "stdout": _event("output", data=hostile.LINE, stream="stdout"),
    "stderr": _event("output", data=hostile.LINE, stream="stderr"),
    "user": _chat(role="user", content=H),
    "assistant": _chat(role="assistant", content=H),
    "thought": _chat(role="assistant", content=H, thought=True),
    "failed turn": _chat(role="assistant", content=H, is_error=True),
    "interrupted": _chat(role="assistant", content=H, aborted=True),
    "tool call": _chat(role="tool", tool_name=hostile.TOOL, tool_input=H),
    "tool result": _chat(role="tool", tool_result=H),
    "tool error": _chat(role="tool", tool_result=H, is_error=True),
    "decision": _chat(role="permission", tool_name=hostile.TOOL, content=H, decision={}),
    "governance": _chat(role="governance", content=H),
    "unknown entry": _event("chat_entry", data=H),
    "state": _event("state", state=H),
    "error": _event("error", error=H, http_status=500),
    "asked": _event(
        "permission_request",
        request={
            "request_id": hostile.LINE,
            "tool_name": hostile.TOOL,
            "tool_input": H,
            "input": {"command": H},
            "created_at": T0,
        },
    ),
    "answered": _event("permission_response", decision={"request_id": "r", "behavior": H}),
    "denied": _event(
        "permission_response", decision={"request_id": "r", "behavior": "deny", "message": H}
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE_EVENTS))
@pytest.mark.parametrize("style", [PLAIN, COLOR], ids=["plain", "colour"])
@pytest.mark.parametrize("width", [None, 40])
def test_agent_text_in_any_event_is_escaped(name: str, style: Style, width: int | None) -> None:
    for interactive in (False, True):
        renderer = EventRenderer(
            style, structured=False, raw=True, width=width, interactive=interactive
        )
        out = renderer.render(HOSTILE_EVENTS[name])
        assert out is not None
        assert hostile.raw_controls(_strip_ansi(out)) == []  # only our own colours remain
        assert "\\x1b" in out or "\\u202e" in out  # shown, not dropped


def test_a_permission_request_shows_its_command_whole_on_any_terminal() -> None:
    command = "cat > notes.txt <<'EOF'\n" + "a long line of text " * 20 + "\nEOF\nrm -rf ~"
    event = _event(
        "permission_request",
        request={
            "request_id": "r-1",
            "tool_name": "Bash",
            "tool_input": command[:200] + "…",  # a host's summary: cut
            "input": {"command": command},
            "created_at": T0,
        },
    )
    out = EventRenderer(PLAIN, structured=True, width=40).render(event)
    assert out is not None and "…" not in out
    assert out.splitlines()[:4] == [
        "? Bash wants to run: cat > notes.txt <<'EOF'",
        "    " + "a long line of text " * 20,  # wraps on the terminal, never cut
        "    EOF",
        "    rm -rf ~",
    ]


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"input": {"command": "rm -rf x"}, "tool_input": "rm…"}, "rm -rf x"),
        ({"input": {"cmd": "ls"}}, "ls"),
        ({"input": {"command": ["sh", "-c", "rm -rf a b"]}}, "sh -c 'rm -rf a b'"),
        ({"input": {"file_path": "/a"}, "tool_input": "/a"}, "/a"),  # no command: summary
        ({"input": {"command": 3}, "tool_input": "summary"}, "summary"),
        ({}, ""),
    ],
)
def test_approval_text(fields: dict[str, Any], shown: str) -> None:
    from agenthost.protocol import PermissionRequest

    request = PermissionRequest(request_id="r", tool_name="T", created_at=T0, **fields)
    assert request.approval_text() == shown


def test_status_shows_agent_and_host_text_escaped() -> None:
    status = StatusResponse(
        host=HostInfo(
            pid=1, version=H, protocol_version="1.4", started_at=T0, socket_path=hostile.LINE
        ),
        agent=AgentInfo(
            id="a",
            state=H,
            started_at=T0,
            backend=H,
            project=H,
            task=H,
            description=H,
            worktree=H,
            model=H,
            session_id=H,
            last_error=H,
            exit_code=1,
            signal=H,
            paused_until=T0,
            paused_reason=H,
            budget={"usd": 1, "spent_usd": 2, "spent_tokens": 3, "exceeded": H},
        ),
    )
    for style in (PLAIN, COLOR):
        out = render_status(status, style)
        assert hostile.raw_controls(_strip_ansi(out)) == [], out
        assert out.count("\\x1b]52;c;") >= 12  # each field shown, escaped
