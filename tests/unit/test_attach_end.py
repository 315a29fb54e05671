"""When ``agenthost attach`` expects the daemon to start an ended agent again: the
decision the daemon shows, or, before it shows one, the daemon's own policy applied to
the same facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agenthost.cli.session import restart_coming
from agenthost.daemon.protocol import DaemonAgent, RestartPolicy, SpawnSpec
from agenthost.protocol import AgentInfo

T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
ON_FAILURE = RestartPolicy(policy="on-failure", max_restarts=2, reset_after=600)


def record(status: str, policy: RestartPolicy = ON_FAILURE, **fields: Any) -> DaemonAgent:
    spec = SpawnSpec(agent_id="a1", agent="lines", command=["x"], restart=policy)
    return DaemonAgent(
        agent_id="a1", status=status, created_at=T0, updated_at=T0, spec=spec, **fields
    )


def end(state: str = "error", ran: float = 5.0, **fields: Any) -> AgentInfo:
    return AgentInfo(
        id="a1", state=state, started_at=T0, ended_at=T0 + timedelta(seconds=ran), **fields
    )


FAILED = end(exit_code=3)


@pytest.mark.parametrize(
    ("daemon", "ended", "host_gone", "expected"),
    [
        (None, FAILED, False, False),  # no daemon knows it: nothing restarts it
        (record("restarting"), FAILED, False, True),  # decided, and shown
        (record("spawning"), FAILED, True, True),
        (record("stopped"), FAILED, False, False),
        (record("failed"), FAILED, True, False),  # the daemon gave up
        (record("lost"), FAILED, True, False),
        (record("incompatible"), FAILED, False, False),
        # not decided yet: the daemon's policy on the same facts
        (record("running"), FAILED, False, True),
        (record("exited"), FAILED, False, True),
        (record("unreachable"), FAILED, False, True),
        (record("exited"), end("done", exit_code=0), False, False),  # not a failure
        (record("exited"), end("done", exit_code=-15, signal="SIGTERM"), False, False),
        (record("exited"), end(exit_code=-9, signal="SIGKILL"), False, True),
        (record("running", restarts=2), FAILED, False, False),  # the limit is reached
        (record("running", restarts=2), end(ran=900, exit_code=3), False, True),  # reset
        (record("running", RestartPolicy()), FAILED, False, False),  # policy never
        (record("running", managed=False), FAILED, False, False),  # adopted: no spec use
        (record("running", exit_code=3), end(), False, True),  # the code the daemon saw
        (record("running", exit_code=0), end("done"), False, False),
        # the host is gone and the daemon still says running: it has not noticed yet
        (record("running", restarts=2), FAILED, True, True),
        (record("exited", restarts=2), FAILED, True, False),
    ],
)
def test_restart_coming(
    daemon: DaemonAgent | None, ended: AgentInfo, host_gone: bool, expected: bool
) -> None:
    assert restart_coming(daemon, ended, host_gone) is expected


def test_a_record_without_its_spec_is_never_restarted() -> None:
    bare = DaemonAgent(agent_id="a1", status="exited", created_at=T0, updated_at=T0)
    assert restart_coming(bare, FAILED, False) is False
