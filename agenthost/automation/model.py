"""What automation hands the daemon, and what it records: run targets, runs, schedules.

A *run* is one thing automation does to an agent: send it a message, or start a new
agent with a message and stop it when that turn ends. Schedules (``agenthost
schedule``) and signed webhooks (``POST /hooks/NAME``) both end in runs; the daemon
starts them (``daemon.run`` for a hook, its own clock for a schedule), records each one
in its registry and as a ``governance`` event in the agent's journal, and never lets
one source's runs overlap.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal, Self

from pydantic import Field, StrictStr, field_validator, model_validator

from agenthost.daemon.spec import SpawnSpec
from agenthost.errors import InvalidAgentId
from agenthost.models import OpenModel, PeerModel
from agenthost.paths import AGENT_ID_MAX, validate_agent_id

MESSAGE_LIMIT: Final = 100_000
"""Characters of one run's message (a template's output is cut to it before)."""
NAME_LIMIT: Final = 64
PREFIX_MAX: Final = AGENT_ID_MAX - len("-YYYYMMDD-HHMMSS-99")
"""The longest agent id of a ``new`` target: each run's agent is ``PREFIX-YYYYMMDD-HHMMSS``
(``-2``, ``-3``... when two runs start in one second)."""

RunSource = Literal["schedule", "hook"]
RunResult = Literal["running", "done", "failed", "skipped", "stopped"]
"""``running`` until the turn ends; ``done`` (the turn ended), ``failed`` (it could not
start, or the turn ended in an error), ``skipped`` (not started: missed while no daemon
ran under ``--missed skip``, or its previous run was still going), ``stopped`` (the
agent was stopped or went away before the turn ended)."""


def check_name(value: str) -> str:
    """A schedule's or hook's name: the rules of an agent id (it names files and agent
    ids derived from it), at most 64 characters."""
    if len(value) > NAME_LIMIT:
        raise ValueError(f"a name has at most {NAME_LIMIT} characters")
    try:
        return validate_agent_id(value)
    except InvalidAgentId as exc:
        raise ValueError(exc.message.replace("agent id", "name")) from None


class RunTarget(PeerModel):
    """Where a run goes: the agent ``agent_id`` (the message is sent to it, queued
    behind a turn it is running), or a new agent started from ``new`` for each run
    (its ``agent_id`` is the prefix of the runs' ids, ``PREFIX-YYYYMMDD-HHMMSS``; it is
    stopped when the run's turn ends, its journal kept). Exactly one of the two."""

    agent_id: StrictStr | None = None
    new: SpawnSpec | None = None

    @field_validator("agent_id")
    @classmethod
    def _check_agent(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate_agent_id(value)
        except InvalidAgentId as exc:
            raise ValueError(exc.message) from None

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.agent_id is None) == (self.new is None):
            raise ValueError("a run goes to an agent (agent_id) or starts one (new): one of them")
        if self.new is not None and len(self.new.agent_id) > PREFIX_MAX:
            raise ValueError(
                f"the agent id of a new agent per run is a prefix of at most {PREFIX_MAX} "
                "characters (each run's id adds -YYYYMMDD-HHMMSS)"
            )
        if self.new is not None and self.new.agent == "pty":
            raise ValueError(
                "a new terminal agent (pty) has no turns: a run could not tell when it "
                "answered, nor stop it then; start one with agenthost run and send to it"
            )
        return self

    def describe(self) -> str:
        """``agent ID`` or ``new KIND agent`` (for tables)."""
        if self.agent_id is not None:
            return self.agent_id
        assert self.new is not None
        return f"new {self.new.agent} agent ({self.new.agent_id}-...)"


class RunRecord(OpenModel):
    """One run, as ``schedule list``, ``hook list`` and ``daemon.runs`` show it."""

    run_id: int
    source: RunSource
    name: str
    key: str | None = None
    """What makes the run unique for its source: a webhook's delivery id; the due time
    of a schedule's run (so a daemon killed while starting it never runs it twice)."""
    agent_id: str | None = None
    offset: int | None = None
    """The offset of the message in the agent's stream, once sent."""
    started_at: datetime
    ended_at: datetime | None = None
    result: RunResult
    reason: str = ""
    detail: dict[str, str] = Field(default_factory=dict)


class RunRequest(PeerModel):
    """``daemon.run`` (1.8): start a run now (a webhook's delivery)."""

    source: RunSource = "hook"
    name: StrictStr
    key: StrictStr | None = Field(default=None, max_length=200)
    """A run with the same source, name and key is not started twice: the answer is the
    first run, with ``duplicate``."""
    target: RunTarget
    message: StrictStr = Field(min_length=1, max_length=MESSAGE_LIMIT)
    detail: dict[StrictStr, StrictStr] = Field(default_factory=dict, max_length=20)

    _check_name = field_validator("name")(check_name)


class RunResponse(OpenModel):
    run: RunRecord
    duplicate: bool = False


class RunsRequest(PeerModel):
    """``daemon.runs`` (1.8): the newest runs, newest first."""

    source: RunSource | None = None
    name: StrictStr | None = None
    limit: int = Field(default=20, ge=1, le=1000, strict=True)


class RunsResponse(OpenModel):
    runs: list[RunRecord]


MissedPolicy = Literal["run", "skip"]


class ScheduleSpec(PeerModel):
    """``daemon.schedule.add`` (1.8): a cron schedule of runs.

    ``cron`` is a five-field expression read in ``tz`` (an IANA zone; the daemon's
    local zone when absent). ``missed``: what a daemon that was not running at a due
    time does when it starts: run the schedule once (however many times it was due),
    or skip to the next time; either way the miss is recorded."""

    name: StrictStr
    cron: StrictStr = Field(max_length=200)
    tz: StrictStr | None = Field(default=None, max_length=100)
    missed: MissedPolicy = "skip"
    target: RunTarget
    message: StrictStr = Field(min_length=1, max_length=MESSAGE_LIMIT)
    replace: bool = Field(default=False, strict=True)
    """Replace a schedule of the same name (else: refused)."""

    _check_name = field_validator("name")(check_name)

    @model_validator(mode="after")
    def _check_cron(self) -> Self:
        from agenthost.automation.cron import check_cron

        check_cron(self.cron, self.tz)  # a ValueError: refused with its reason
        return self


class ScheduleInfo(OpenModel):
    """A schedule, its last run and its next due time."""

    spec: ScheduleSpec
    created_at: datetime
    next_at: datetime | None
    last: RunRecord | None = None
    running: bool = False


class ScheduleRequest(PeerModel):
    """``daemon.schedule.rm`` and ``daemon.schedule.run`` (1.8): one schedule."""

    name: StrictStr


class ScheduleListResponse(OpenModel):
    schedules: list[ScheduleInfo]
