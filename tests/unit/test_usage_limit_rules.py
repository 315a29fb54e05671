"""Usage limits, sans-IO (agenthost.governance.usagelimits), with an injected clock:
reading reset times from what the agents say, deciding the pause, and the message the
agent gets when it resumes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agenthost.governance.usagelimits import (
    MARGIN,
    MAX_PAUSE,
    MESSAGE_LIMIT,
    MINUTE_PRECISION,
    looks_like_limit,
    pause_for,
    reset_from_event,
    reset_from_text,
    resume_message,
)

NOW = datetime(2026, 11, 24, 0, 30, 39, tzinfo=UTC)
PARIS = timezone(timedelta(hours=1))


def at(hour: int, minute: int, *, day: int = 24, tz: Any = UTC) -> float:
    return datetime(2026, 11, day, hour, minute, tzinfo=tz).timestamp()


def test_claude_rate_limit_event_gives_the_exact_reset() -> None:
    event = {"rate_limit_info": {"status": "rejected", "resetsAt": 1795480324}}
    assert reset_from_event(event) == 1795480324.0


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"rate_limit_info": "x"},
        {"rate_limit_info": {"status": "allowed", "resetsAt": 1795480324}},
        {"rate_limit_info": {"status": "rejected"}},
        {"rate_limit_info": {"status": "rejected", "resetsAt": "1795480324"}},
        {"rate_limit_info": {"status": "rejected", "resetsAt": True}},
        {"rate_limit_info": {"status": "rejected", "resetsAt": -5}},
        {"rate_limit_info": {"status": "rejected", "resetsAt": 10**15}},
        {"rate_limit_info": {"status": "rejected", "resetsAt": float("nan")}},
    ],
)
def test_garbage_rate_limit_events_give_no_reset(event: dict[str, Any]) -> None:
    assert reset_from_event(event) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Claude Code, signed in: a time of day with its zone, minute precision
        ("You've hit your 5-hour limit · resets 12:32am (UTC)", at(0, 32) + MINUTE_PRECISION),
        ("You've hit your weekly limit · resets 3pm (UTC)", at(15, 0) + MINUTE_PRECISION),
        # Codex: the agent's local time (here UTC)
        ("You’ve hit your usage limit. ... or try again at 12:32 AM.", at(0, 32) + 60),
        ("... try again at 11:59 PM.", at(23, 59) + 60),
        # a time of day that has passed is tomorrow's
        ("resets 12:10am (UTC)", at(0, 10, day=25) + 60),
        # the minute that is running now is still today's
        ("try again at 12:30 AM", at(0, 30) + 60),
        # with a date
        ("try again at Nov 26th, 2026 9:05 AM.", at(9, 5, day=26) + 60),
        ("try again at Dec 1st 10:00 AM", datetime(2026, 12, 1, 10, tzinfo=UTC).timestamp() + 60),
        # durations
        ("Rate limit reached; try again in 5 minutes", NOW.timestamp() + 300),
        ("try again in 2 days 3 hours", NOW.timestamp() + 2 * 86400 + 3 * 3600),
        ("try again in 1 hour and 30 mins", NOW.timestamp() + 5400),
        # the older Claude Code message: an epoch
        ("Claude AI usage limit reached|1795480324", 1795480324.0),
    ],
)
def test_reset_times_in_the_agents_words(text: str, expected: float) -> None:
    assert reset_from_text(text, NOW) == pytest.approx(expected)


def test_a_named_zone_wins_over_the_local_one() -> None:
    local_paris = NOW.astimezone(PARIS)
    assert reset_from_text("resets 3pm (UTC)", local_paris) == at(15, 0) + 60
    assert reset_from_text("try again at 3:00 PM", local_paris) == at(15, 0, tz=PARIS) + 60
    assert reset_from_text("resets 3pm (Europe/Paris)", NOW) == pytest.approx(
        datetime(2026, 11, 24, 14, 0, tzinfo=UTC).timestamp() + 60
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "API Error: Request rejected (429) · This request would exceed your account's rate limit.",
        "resets 25:00",
        "resets 13pm",
        "try again at 12:61 AM",
        "try again at Feb 30th 10:00 AM",
        "try again at Smarch 3rd 10:00 AM",
        "try again in a while",
        "try again in 0 minutes",
        "usage limit reached|12",
        "🙂" * 1000,
    ],
)
def test_garbage_texts_give_no_reset(text: str) -> None:
    assert reset_from_text(text, NOW) is None


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError):
        reset_from_text("resets 3pm", datetime(2026, 1, 1))


def test_which_failures_are_usage_limits() -> None:
    assert looks_like_limit("You've hit your 5-hour limit · resets 12:32am (UTC)")
    assert looks_like_limit("You’ve hit your usage limit. Upgrade to Pro")
    assert looks_like_limit("Claude AI usage limit reached|1795480324")
    assert not looks_like_limit("API Error: 500 Internal server error")
    assert not looks_like_limit("")


def test_a_pause_ends_a_margin_after_the_reset() -> None:
    now = NOW.timestamp()
    pause = pause_for(now + 100, "limit", now)
    assert pause is not None and pause.until == now + 100 + MARGIN and pause.reason == "limit"
    # a reset that has passed already (clocks differ): resume soon
    past = pause_for(now - 30, "  ", now)
    assert past is not None and past.until == now + MARGIN
    assert past.reason == "usage limit reached"


@pytest.mark.parametrize("reset", [None, float("nan"), float("inf")])
def test_no_reset_no_pause(reset: float | None) -> None:
    assert pause_for(reset, "x", NOW.timestamp()) is None


def test_a_reset_beyond_a_week_is_no_pause() -> None:
    now = NOW.timestamp()
    assert pause_for(now + MAX_PAUSE + 1, "x", now) is None
    assert pause_for(now + MAX_PAUSE - 10, "x", now) is not None


def test_the_resume_message_names_the_request_the_partial_answer_and_open_tools() -> None:
    history = [
        {"role": "user", "content": "Old request"},
        {"role": "assistant", "content": "Old answer"},
        {"role": "user", "content": "Build the project"},
        {"role": "assistant", "content": "Starting on it: step one is done."},
        {"role": "tool", "tool_name": "Bash", "tool_input": "ls", "tool_use_id": "t1"},
        {"role": "tool", "tool_name": "Bash", "tool_result": "a b", "tool_use_id": "t1"},
        {"role": "tool", "tool_name": "Bash", "tool_input": "make build", "tool_use_id": "t2"},
        {"role": "permission", "tool_name": "Bash", "tool_input": "ls", "content": "allowed"},
        {"role": "assistant", "content": "You've hit your limit", "is_error": True},
    ]
    message = resume_message(history, "You've hit your 5-hour limit · resets 12:32am (UTC)")
    assert message.splitlines() == [
        "Your previous turn was stopped by a usage limit (You've hit your 5-hour limit · "
        "resets 12:32am (UTC)). The limit has reset: please continue the work where you "
        "left off.",
        "The request was: Build the project",
        "What you had answered so far: Starting on it: step one is done.",
        "Tool calls that did not finish: Bash: make build",
    ]


def test_the_resume_message_is_bounded_and_copes_with_no_history() -> None:
    assert resume_message([], "x").startswith("Your previous turn was stopped")
    huge = [
        {"role": "user", "content": "r" * 50_000},
        {"role": "assistant", "content": "a" * 50_000},
    ]
    assert len(resume_message(huge, "y" * 10_000)) <= MESSAGE_LIMIT
