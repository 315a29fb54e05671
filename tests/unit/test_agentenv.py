"""The agent's extra environment, handed to a host in one private variable."""

from __future__ import annotations

import pytest

from agenthost.agentenv import AGENT_ENV_VAR, pack, unpack
from agenthost.errors import ConfigError


def test_round_trip_removes_the_variable() -> None:
    extra = {"API_KEY": "sk-secret=with=equals", "EMPTY": "", "UNICODE": "ünï ✓"}
    environ = {"PATH": "/bin", **pack(extra)}
    assert unpack(environ) == extra
    assert environ == {"PATH": "/bin"}  # taken out: neither the agent nor status sees it


def test_nothing_to_pack_adds_nothing() -> None:
    assert pack({}) == {}
    assert unpack({"PATH": "/bin"}) == {}


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "not json sk-secret",
        "[1, 2]",
        '"sk-secret"',
        '{"K": 1}',
        '{"K": null}',
        '{"": "sk-secret"}',
        '{"A=B": "sk-secret"}',
        '{"K": ["sk-secret"]}',
        '{"K": "sk-secret"',
        "\udcff",
    ],
)
def test_garbage_is_a_clear_error_that_never_shows_the_value(raw: str) -> None:
    environ = {AGENT_ENV_VAR: raw}
    with pytest.raises(ConfigError, match=AGENT_ENV_VAR) as info:
        unpack(environ)
    assert "sk-secret" not in str(info.value) and "sk-secret" not in (info.value.hint or "")
