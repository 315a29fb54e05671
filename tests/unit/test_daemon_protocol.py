"""agenthost.daemon.protocol: daemon request validation, frames, models. Sans-IO."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agenthost.daemon.policy import Outcome, backoff_delay, decide, is_failure
from agenthost.daemon.protocol import (
    DAEMON_REQUEST_PAYLOADS,
    AgentRequest,
    DaemonMessageType,
    DaemonStopRequest,
    Notice,
    NoticeType,
    RestartPolicy,
    SpawnSpec,
    WatchRequest,
    decode_daemon_frame,
    encode_notice,
    validate_daemon_payload,
)
from agenthost.errors import ErrorCode, ProtocolError
from agenthost.protocol import (
    Request,
    RequestError,
    Response,
    StreamEvent,
    decode_request,
    encode_error,
    encode_response,
)

INVALID = ErrorCode.INVALID_PAYLOAD


def request(mtype: str, payload: dict[str, Any] | None = None) -> Request:
    obj: dict[str, Any] = {"type": mtype, "id": 7}
    if payload is not None:
        obj["payload"] = payload
    return decode_request(json.dumps(obj).encode())


@pytest.mark.parametrize(
    ("mtype", "payload", "model"),
    [
        ("daemon.ping", None, None),
        ("daemon.list", {"ignored": 1}, None),
        ("daemon.unwatch", None, None),
        ("daemon.spawn", {"agent_id": "a1"}, SpawnSpec),
        ("daemon.stop", {"agent_id": "a1", "force": True, "timeout": 5}, DaemonStopRequest),
        ("daemon.forget", {"agent_id": "a.b_c-1"}, AgentRequest),
        ("daemon.watch", {"agents": ["a1"], "since": {"a1": {"epoch": "e", "offset": 3}}}, None),
    ],
)
def test_valid_requests(mtype: str, payload: dict[str, Any] | None, model: type | None) -> None:
    kind, parsed = validate_daemon_payload(request(mtype, payload))
    assert kind == DaemonMessageType(mtype)
    assert isinstance(parsed, DAEMON_REQUEST_PAYLOADS[kind])
    if model is not None:
        assert isinstance(parsed, model)


def test_spawn_defaults_and_round_trip() -> None:
    _, spec = validate_daemon_payload(request("daemon.spawn", {"agent_id": "w1"}))
    assert isinstance(spec, SpawnSpec)
    assert spec.agent == "demo" and spec.command == [] and spec.env == {}
    assert spec.restart == RestartPolicy(policy="never")
    full = SpawnSpec(
        agent_id="w1",
        agent="lines",
        command=["bash", "-c", "echo hi"],
        cwd="/tmp",
        env={"K": "V"},
        project="p",
        agent_opts={"model": "x"},
        resume="sess",
        linger=5,
        ring_size=10,
        restart=RestartPolicy(policy="on-failure", max_restarts=2, backoff=0.5),
    )
    assert SpawnSpec.model_validate_json(full.model_dump_json()) == full


def test_watch_payload() -> None:
    _, watch = validate_daemon_payload(request("daemon.watch"))
    assert isinstance(watch, WatchRequest)
    assert watch.agents is None and watch.since == {} and watch.live_only is False


@pytest.mark.parametrize(
    ("mtype", "payload", "fragment"),
    [
        ("daemon.spawn", {}, "agent_id: Field required"),
        ("daemon.spawn", {"agent_id": "../etc"}, "invalid agent id"),
        ("daemon.spawn", {"agent_id": ".hidden"}, "invalid agent id"),
        ("daemon.spawn", {"agent_id": 5}, "agent_id"),
        ("daemon.spawn", {"agent_id": "a", "command": "ls"}, "command"),
        ("daemon.spawn", {"agent_id": "a", "command": [1]}, "command.0"),
        ("daemon.spawn", {"agent_id": "a", "env": {"K": 1}}, "env.K"),
        ("daemon.spawn", {"agent_id": "a", "linger": -1}, "linger"),
        ("daemon.spawn", {"agent_id": "a", "ring_size": 0}, "ring_size"),
        ("daemon.spawn", {"agent_id": "a", "restart": {"policy": "always"}}, "restart.policy"),
        ("daemon.spawn", {"agent_id": "a", "restart": {"max_restarts": -1}}, "max_restarts"),
        ("daemon.spawn", {"agent_id": "a", "restart": {"backoff": "1"}}, "backoff"),
        ("daemon.stop", {"agent_id": "a", "force": "yes"}, "force"),
        ("daemon.stop", {"agent_id": "a", "timeout": -2}, "timeout"),
        ("daemon.stop", {}, "agent_id"),
        ("daemon.watch", {"agents": "a1"}, "agents"),
        ("daemon.watch", {"since": {"a1": {"offset": -1}}}, "since.a1.offset"),
        ("daemon.watch", {"since": {"a1": 5}}, "since.a1"),
        ("daemon.watch", {"live_only": 1}, "live_only"),
    ],
)
def test_invalid_payloads(mtype: str, payload: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RequestError) as caught:
        validate_daemon_payload(request(mtype, payload))
    assert caught.value.code == INVALID
    assert caught.value.request_type == mtype and caught.value.request_id == 7
    assert fragment in caught.value.message


def test_unknown_types_include_host_ones() -> None:
    for mtype in ("daemon.nope", "host.ping", "ping"):
        with pytest.raises(RequestError) as caught:
            validate_daemon_payload(request(mtype))
        assert caught.value.code == ErrorCode.UNKNOWN_TYPE
        assert caught.value.message == f"unknown message type: {mtype}"


def test_notice_frames() -> None:
    frame = encode_notice(NoticeType.HOST_GONE, "a1", status="lost", reason=None, exit_code=0)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    obj = json.loads(frame)
    assert obj["kind"] == "notice" and obj["type"] == "host_gone" and obj["agent_id"] == "a1"
    assert obj["status"] == "lost" and obj["exit_code"] == 0 and "reason" not in obj
    assert obj["timestamp"].endswith("Z")
    notice = decode_daemon_frame(frame.rstrip(b"\n"))
    assert isinstance(notice, Notice) and notice.type == "host_gone"
    assert notice.model_extra == {"status": "lost", "exit_code": 0}


def test_decode_daemon_frames() -> None:
    response = decode_daemon_frame(encode_response("daemon.ping", 1, {"pid": 3}).rstrip())
    assert isinstance(response, Response) and response.payload == {"pid": 3}
    error = decode_daemon_frame(encode_error("daemon.stop", 2, "busy", "no").rstrip())
    assert isinstance(error, Response) and error.code == "busy" and not error.success
    event = decode_daemon_frame(
        b'{"kind":"event","type":"output","agent_id":"a","offset":4,'
        b'"timestamp":"2026-01-01T00:00:00.000000Z","data":"x","stream":"stdout"}'
    )
    assert isinstance(event, StreamEvent) and event.offset == 4
    for bad in (b"{}", b'{"kind":"other"}', b"[1]", b"nope"):
        with pytest.raises(ProtocolError):
            decode_daemon_frame(bad)


# --- the restart policy ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "exit_code", "state", "signal", "failure"),
    [
        (Outcome.EXITED, 0, "done", None, False),
        (Outcome.EXITED, 3, "error", None, True),
        (Outcome.EXITED, -9, "error", "SIGKILL", True),
        (Outcome.EXITED, -15, "error", "SIGTERM", False),  # `agenthost stop`: deliberate
        (Outcome.EXITED, -2, "error", "SIGINT", False),
        (Outcome.EXITED, None, "error", None, True),
        (Outcome.EXITED, None, "done", None, False),
        (Outcome.LOST, None, "running", None, True),  # the host vanished: a crash
        (Outcome.LOST, None, "", None, True),
        (Outcome.LOST, None, "done", None, False),  # it had finished: its host ended
        (Outcome.STOPPED, 1, "error", None, False),
    ],
)
def test_is_failure(
    outcome: Outcome, exit_code: int | None, state: str, signal: str | None, failure: bool
) -> None:
    assert is_failure(outcome, exit_code=exit_code, state=state, signal=signal) is failure


def test_a_stop_asked_of_the_host_is_no_failure_even_when_it_killed() -> None:
    # `agenthost stop` talks to the host; its SIGKILL escalation must not be restarted
    kill = {"exit_code": -9, "state": "error", "signal": "SIGKILL"}
    assert is_failure(Outcome.EXITED, **kill) is True
    assert is_failure(Outcome.EXITED, **kill, stop_requested=True) is False
    assert is_failure(Outcome.LOST, exit_code=None, state="running", stop_requested=True) is False


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(policy="on-failure", backoff=0.5, backoff_max=3.0)
    assert [backoff_delay(policy, n) for n in range(0, 6)] == [0.0, 0.5, 1.0, 2.0, 3.0, 3.0]
    huge = RestartPolicy(policy="on-failure", backoff=1.0, backoff_max=86400)
    assert backoff_delay(huge, 10_000) == 86400  # no overflow


def test_decide() -> None:
    never = RestartPolicy()
    assert not decide(never, failure=True, restarts=0, ran_for=1).restart
    policy = RestartPolicy(policy="on-failure", max_restarts=2, backoff=1, reset_after=60)
    assert not decide(policy, failure=False, restarts=0, ran_for=1).restart
    first = decide(policy, failure=True, restarts=0, ran_for=1)
    assert first.restart and first.attempt == 1 and first.delay == 1
    second = decide(policy, failure=True, restarts=1, ran_for=1)
    assert second.restart and second.attempt == 2 and second.delay == 2
    done = decide(policy, failure=True, restarts=2, ran_for=1)
    assert not done.restart and done.gave_up and "limit" in done.reason
    # a run that lasted past reset_after starts a new series
    fresh = decide(policy, failure=True, restarts=2, ran_for=61)
    assert fresh.restart and fresh.attempt == 1 and fresh.delay == 1
    zero = RestartPolicy(policy="on-failure", max_restarts=0)
    assert decide(zero, failure=True, restarts=0, ran_for=1).gave_up
