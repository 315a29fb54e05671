"""agenthost.errors (the exception tree, code mapping) and agenthost.timefmt."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.errors import (
    AgentCannotStart,
    AgentHostError,
    AgentNotRunning,
    BudgetExceeded,
    Busy,
    ConfigError,
    ErrorCode,
    Forbidden,
    FrameTooLarge,
    HostAlreadyRunning,
    HostNotFound,
    InternalError,
    InvalidAgentId,
    InvalidPayload,
    LimitReached,
    NotConnected,
    ProtocolError,
    RequestTimeout,
    UnknownRequest,
    UnknownType,
    VersionUnsupported,
    WorktreeError,
    error_from_code,
)
from agenthost.timefmt import format_datetime, go_duration, now_rfc3339, rfc3339, short_duration

EXPECTED_CLASS = {
    ErrorCode.BAD_REQUEST: ProtocolError,
    ErrorCode.UNKNOWN_TYPE: UnknownType,
    ErrorCode.INVALID_PAYLOAD: InvalidPayload,
    ErrorCode.FRAME_TOO_LARGE: FrameTooLarge,
    ErrorCode.VERSION_UNSUPPORTED: VersionUnsupported,
    ErrorCode.AGENT_NOT_RUNNING: AgentNotRunning,
    ErrorCode.FORBIDDEN: Forbidden,
    ErrorCode.BUSY: Busy,
    ErrorCode.INTERNAL: InternalError,
    ErrorCode.UNKNOWN_REQUEST: UnknownRequest,
    ErrorCode.BUDGET_EXCEEDED: BudgetExceeded,
    ErrorCode.LIMIT_REACHED: LimitReached,
    ErrorCode.CANNOT_START: AgentCannotStart,
    ErrorCode.WORKTREE_FAILED: WorktreeError,
}


def test_every_code_is_mapped() -> None:
    assert set(EXPECTED_CLASS) == set(ErrorCode)


def test_wire_codes_are_the_documented_strings() -> None:
    assert {c.value for c in ErrorCode} == {
        "bad_request",
        "unknown_type",
        "invalid_payload",
        "frame_too_large",
        "version_unsupported",
        "agent_not_running",
        "forbidden",
        "busy",
        "unknown_request",
        "internal",
        "budget_exceeded",
        "limit_reached",
        "cannot_start",
        "worktree_failed",
    }


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
@pytest.mark.parametrize("as_string", [False, True])
def test_error_from_code(code: ErrorCode, as_string: bool) -> None:
    err = error_from_code(code.value if as_string else code, "it broke")
    assert type(err) is EXPECTED_CLASS[code]
    assert isinstance(err, AgentHostError)
    assert err.code == code
    assert err.message == "it broke"
    assert str(err) == "it broke"


@pytest.mark.parametrize("code", ["nope", "", "BAD_REQUEST", "Internal", "bad_request "])
def test_error_from_unknown_code(code: str) -> None:
    err = error_from_code(code, "msg")
    assert type(err) is InternalError
    assert err.code == ErrorCode.INTERNAL
    assert "msg" in err.message
    assert repr(code) in err.message


def test_error_from_no_code() -> None:
    err = error_from_code(None, "msg")
    assert type(err) is InternalError
    assert err.message == "msg"


def test_bad_request_does_not_change_the_class_default() -> None:
    err = error_from_code("bad_request", "x")
    assert err.code == ErrorCode.BAD_REQUEST
    # ProtocolError's instance code must not leak into the class attribute
    other = ProtocolError("y", code=ErrorCode.FRAME_TOO_LARGE)
    assert other.code == ErrorCode.FRAME_TOO_LARGE
    assert ProtocolError.code == ErrorCode.BAD_REQUEST
    assert ProtocolError("z").code == ErrorCode.BAD_REQUEST


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (ConfigError, ErrorCode.INVALID_PAYLOAD),
        (InvalidAgentId, ErrorCode.INVALID_PAYLOAD),
        (HostAlreadyRunning, ErrorCode.BUSY),
        (HostNotFound, ErrorCode.AGENT_NOT_RUNNING),
        (NotConnected, ErrorCode.INTERNAL),
        (RequestTimeout, ErrorCode.INTERNAL),
        (AgentHostError, ErrorCode.INTERNAL),
    ],
)
def test_local_error_codes(cls: type[AgentHostError], code: ErrorCode) -> None:
    err = cls("m", hint="do this")
    assert err.code == code
    assert err.hint == "do this"
    assert isinstance(err, AgentHostError)


def test_one_tree() -> None:
    for cls in (UnknownType, InvalidPayload, FrameTooLarge, VersionUnsupported):
        assert issubclass(cls, ProtocolError)
    assert issubclass(InvalidAgentId, ConfigError)
    assert issubclass(AgentHostError, Exception)


# --- timefmt -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (1, "1s"),
        (59, "59s"),
        (60, "1m0s"),
        (61.5, "1m1s"),
        (3599, "59m59s"),
        (3600, "1h0m0s"),
        (3723, "1h2m3s"),
        (86400 + 1, "24h0m1s"),
        (-5, "0s"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**7))
def test_go_duration_parses_back(seconds: int) -> None:
    text = go_duration(seconds)
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(\d+)s", text)
    assert match is not None
    h, m, s = (int(g) if g else 0 for g in match.groups())
    assert h * 3600 + m * 60 + s == seconds
    assert m < 60 and s < 60


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0.0s"), (2.5, "2.5s"), (0.04, "0.0s"), (59.9, "59.9s"), (60, "1m0s"), (184, "3m4s")],
)
def test_short_duration(seconds: float, text: str) -> None:
    assert short_duration(seconds) == text


RFC3339_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        (0, "1970-01-01T00:00:00.000000Z"),
        (1_700_000_000.25, "2023-11-14T22:13:20.250000Z"),
    ],
)
def test_rfc3339(ts: float, text: str) -> None:
    assert rfc3339(ts) == text


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False))
def test_rfc3339_shape_and_roundtrip(ts: float) -> None:
    text = rfc3339(ts)
    assert RFC3339_Z.fullmatch(text)
    back = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs(back.timestamp() - ts) < 1e-5


def test_now_rfc3339() -> None:
    text = now_rfc3339()
    assert RFC3339_Z.fullmatch(text)
    back = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - back).total_seconds()) < 60


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "2024-01-02T03:04:05.000000Z"),
        (datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05.000000Z"),
        (
            datetime(2024, 1, 2, 0, 4, 5, 7, tzinfo=timezone(timedelta(hours=-3))),
            "2024-01-02T03:04:05.000007Z",
        ),
    ],
)
def test_format_datetime(value: datetime, text: str) -> None:
    assert format_datetime(value) == text
