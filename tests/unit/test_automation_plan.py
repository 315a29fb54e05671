"""The schedules' timing and the runs' ends, in memory, on a clock the test sets."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agenthost.automation.cron import check_cron, next_after
from agenthost.automation.model import RunRequest, RunTarget, ScheduleSpec
from agenthost.automation.plan import GRACE, Turns, decide


def ts(text: str, tz: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


NIGHTLY = "0 3 * * *"


def test_next_due_time_is_read_in_the_schedules_zone_through_dst() -> None:
    # 03:00 in Paris is 02:00 UTC in winter, 01:00 UTC in summer
    winter = next_after(NIGHTLY, "Europe/Paris", ts("2026-01-10T12:00:00"))
    summer = next_after(NIGHTLY, "Europe/Paris", ts("2026-07-10T12:00:00"))
    assert datetime.fromtimestamp(winter, UTC).hour == 2
    assert datetime.fromtimestamp(summer, UTC).hour == 1
    # 02:30 does not exist in Paris on 2026-03-29: taken once, after the gap, then daily
    gap = next_after("30 2 * * *", "Europe/Paris", ts("2026-03-29T00:00:00", "Europe/Paris"))
    after = next_after("30 2 * * *", "Europe/Paris", gap)
    assert gap < after and after - gap < 86400 + 3600


def test_on_time_and_late_within_grace_run() -> None:
    due = ts("2026-11-28T03:00:00")
    assert decide(NIGHTLY, None, "skip", due, due - 1, running=False).action == "wait"
    for late in (0.0, 1.0, GRACE):
        d = decide(NIGHTLY, "UTC", "skip", due, due + late, running=False)
        assert (d.action, d.due_at, d.missed) == ("run", due, 0)
        assert d.next_at == ts("2026-11-29T03:00:00")


def test_missed_while_no_daemon_ran_skip_or_run_once() -> None:
    due = ts("2026-11-28T03:00:00")
    now = ts("2026-11-30T12:00:00")  # due three times while down
    skip = decide(NIGHTLY, "UTC", "skip", due, now, running=False)
    assert (skip.action, skip.missed) == ("skip", 3)
    assert "3 times" in skip.reason and "--missed skip" in skip.reason
    run = decide(NIGHTLY, "UTC", "run", due, now, running=False)
    assert (run.action, run.missed, run.due_at) == ("run", 3, due)
    assert run.next_at == ts("2026-12-01T03:00:00")  # once for all three, then onwards
    just = decide(NIGHTLY, "UTC", "run", due, due + GRACE + 1, running=False)
    assert (just.action, just.missed) == ("run", 1) and "once" in just.reason


def test_a_run_never_overlaps_its_schedule() -> None:
    due = ts("2026-11-28T03:00:00")
    busy = decide(NIGHTLY, "UTC", "run", due, due, running=True)
    assert busy.action == "skip" and "still goes" in busy.reason
    assert busy.next_at > due  # skipped, not retried in a loop
    missed_busy = decide(NIGHTLY, "UTC", "run", due, due + 7200, running=True)
    assert missed_busy.action == "skip"


def test_every_minute_missed_for_a_month_is_counted_without_a_month_of_work() -> None:
    due = ts("2026-11-01T00:00:00")
    d = decide("* * * * *", "UTC", "skip", due, due + 30 * 86400, running=False)
    assert d.action == "skip" and d.missed == 1000 and "often" in d.reason


@pytest.mark.parametrize(
    ("expr", "tz", "why"),
    [
        ("0 3 * *", None, "five fields"),
        ("0 3 * * * *", None, "five fields"),
        ("61 * * * *", None, "not a cron expression"),
        ("", None, "five fields"),
        ("0 3 * * *", "Mars/Olympus", "unknown time zone"),
        ("0 3 * * *", "../../etc/passwd", "unknown time zone"),
        ("0 3 * * *", "", "unknown time zone"),
        ("@sometimes", None, "not a cron expression"),
    ],
)
def test_garbage_cron_and_zones_are_refused_with_the_reason(
    expr: str, tz: str | None, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        check_cron(expr, tz)


@given(st.text(max_size=40), st.one_of(st.none(), st.text(max_size=30)))
def test_any_text_is_a_schedule_or_a_clear_refusal(expr: str, tz: str | None) -> None:
    try:
        check_cron(expr, tz)
    except ValueError as exc:
        assert str(exc)
        return
    assert next_after(expr, tz, ts("2026-11-28T03:00:00")) > ts("2026-11-28T03:00:00")


def test_models_refuse_garbage() -> None:
    with pytest.raises(ValidationError, match="one of them"):
        RunTarget()
    with pytest.raises(ValidationError, match="one of them"):
        RunTarget.model_validate({"agent_id": "a", "new": {"agent_id": "b"}})
    with pytest.raises(ValidationError):
        RunTarget(agent_id="../x")
    with pytest.raises(ValidationError, match="prefix of at most 45"):
        RunTarget.model_validate({"new": {"agent_id": "p" * 46}})
    assert RunTarget.model_validate({"new": {"agent_id": "p" * 45}}).new is not None
    with pytest.raises(ValidationError, match="terminal agent"):
        RunTarget.model_validate({"new": {"agent_id": "t", "agent": "pty"}})
    target = RunTarget(agent_id="a")
    with pytest.raises(ValidationError, match="cron"):
        ScheduleSpec(name="n", cron="every day", target=target, message="m")
    with pytest.raises(ValidationError):
        ScheduleSpec(name="a/b", cron=NIGHTLY, target=target, message="m")
    with pytest.raises(ValidationError):
        ScheduleSpec(name="n" * 65, cron=NIGHTLY, target=target, message="m")
    with pytest.raises(ValidationError):
        ScheduleSpec(name="n", cron=NIGHTLY, target=target, message="")
    with pytest.raises(ValidationError):
        RunRequest(name="h", target=target, message="x" * 100_001)


def test_a_run_ends_when_its_agent_goes_idle_after_its_message() -> None:
    turns = Turns()
    # someone else's message, then the run's: one idle answers both
    assert turns.message(10) == []
    assert turns.message(20, run_id=1) == []
    assert turns.waiting == [1]
    turns.turn(failed=False)
    assert turns.idle(21) == [(1, "done")]
    assert turns.waiting == []


def test_an_idle_before_the_runs_message_does_not_end_it() -> None:
    """The send is answered before the daemon's follow has caught up: the agent's idle
    of before the message arrives after the run registered it."""
    turns = Turns()
    assert turns.message(4, run_id=1) == []
    assert turns.idle(2) == []  # the idle of its start
    turns.message(4)  # the stream reaches the message
    assert turns.waiting == [1]
    assert turns.idle(9) == [(1, "done")]


def test_the_stream_may_see_the_answer_before_the_run_hears_its_offset() -> None:
    turns = Turns()
    turns.message(7)  # the stream: the user entry, then the turn, then idle
    turns.turn(failed=True)
    assert turns.idle(9) == []  # nobody claimed it yet
    assert turns.message(7, run_id=3) == [(3, "failed")]  # the send's answer came late


def test_the_stream_and_the_run_claim_the_same_message_once() -> None:
    turns = Turns()
    assert turns.message(5, run_id=2) == []
    turns.message(5)  # the stream's copy of it
    assert turns.waiting == [2]
    assert turns.idle(float("inf"), stopped=True) == [(2, "stopped")]
    assert turns.idle(10) == []


def test_an_agent_that_never_goes_idle_does_not_grow_the_open_messages() -> None:
    turns = Turns()
    turns.message(0, run_id=1)
    for offset in range(1, 10_000):
        turns.message(offset)
    assert len(turns._open) <= Turns.OPEN_KEPT + 1  # noqa: SLF001 - the bound is the point
    assert turns.waiting == [1]  # a run's message is never dropped
