"""Adapters flag a turn that failed on a usage limit (``UsageLimited``), with the reset
time when the agent gave one, and only then."""

from __future__ import annotations

import json
from typing import Any

from agenthost.agents.base import TurnResult, UsageLimited
from agenthost.agents.claude import ClaudeAdapter
from agenthost.agents.codex import _usage_limited


def lines(adapter: ClaudeAdapter, *objs: dict[str, Any]) -> list[Any]:
    events: list[Any] = []
    for obj in objs:
        events += adapter.parse_line(json.dumps(obj))
    return events


RATE_LIMIT = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "resetsAt": 1795480324, "rateLimitType": "x"},
}
LIMIT_TEXT = "You've hit your 5-hour limit · resets 12:32am (UTC)"
FAILED_MESSAGE = {
    "type": "assistant",
    "message": {"role": "assistant", "content": [{"type": "text", "text": LIMIT_TEXT}]},
    "is_api_error_message": True,
    "api_error_status": 429,
}
FAILED_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "terminal_reason": "api_error",
    "api_error_status": 429,
    "result": LIMIT_TEXT,
}


def test_claude_reports_the_limit_with_its_reset_before_the_turns_result() -> None:
    events = lines(ClaudeAdapter(), RATE_LIMIT, FAILED_MESSAGE, FAILED_RESULT)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("UsageLimited") < kinds.index("TurnResult")
    [limited] = [e for e in events if isinstance(e, UsageLimited)]
    assert limited == UsageLimited(1795480324.0, LIMIT_TEXT)


def test_an_older_claude_message_without_the_event_is_flagged_by_its_text() -> None:
    text = "Claude AI usage limit reached|1795480324"
    message = {**FAILED_MESSAGE, "message": {"content": [{"type": "text", "text": text}]}}
    events = lines(ClaudeAdapter(), message, {**FAILED_RESULT, "result": text})
    assert [e for e in events if isinstance(e, UsageLimited)] == [UsageLimited(None, text)]


def test_a_plain_api_error_or_a_success_is_no_limit() -> None:
    plain = {**FAILED_MESSAGE, "message": {"content": [{"type": "text", "text": "API Error: 500"}]}}
    events = lines(ClaudeAdapter(), plain, FAILED_RESULT)
    assert not [e for e in events if isinstance(e, UsageLimited)]
    # a rejecting event, then a turn that succeeded after all: nothing to pause for
    ok = {"type": "result", "subtype": "success", "is_error": False, "result": "done"}
    events = lines(ClaudeAdapter(), RATE_LIMIT, ok)
    assert any(isinstance(e, TurnResult) for e in events)
    assert not [e for e in events if isinstance(e, UsageLimited)]


def test_the_reset_of_one_turn_does_not_leak_into_the_next() -> None:
    adapter = ClaudeAdapter()
    lines(adapter, RATE_LIMIT, {"type": "result", "is_error": False, "result": "ok"})
    plain = {**FAILED_MESSAGE, "message": {"content": [{"type": "text", "text": "API Error: 500"}]}}
    events = lines(adapter, plain, FAILED_RESULT)
    assert not [e for e in events if isinstance(e, UsageLimited)]


def test_codex_usage_limit_is_its_error_info() -> None:
    assert _usage_limited({"codexErrorInfo": "usageLimitExceeded"})
    assert _usage_limited({"codexErrorInfo": {"usageLimitExceeded": {}}})
    assert not _usage_limited({"codexErrorInfo": {"responseTooManyFailedAttempts": {}}})
    assert not _usage_limited({"codexErrorInfo": None})
    assert not _usage_limited({})
