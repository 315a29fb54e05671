"""What the daemon and its host factory say to each other, in memory: round trips, and
anything else refused with FactoryError (never another exception)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.errors import AgentHostError, FactoryError
from agenthost.hostfactory.messages import (
    MAX_MESSAGE,
    Exited,
    Order,
    Refused,
    Started,
    decode_order,
    decode_reply,
    encode,
)

ORDER = Order(
    argv=("--agent-id", "a1", "--home", "/h", "--", "sh", "-c", "echo é"),
    env={"PATH": "/bin", "EMPTY": "", "UNICODE": "ü ∑"},
    cwd="/work",
    log="/h/logs/a1.log",
    title="python -m agenthost serve --agent-id a1",
)


def test_an_order_round_trips() -> None:
    assert decode_order(encode(ORDER)) == ORDER


@pytest.mark.parametrize("reply", [Started(42), Refused("no memory"), Exited(42, -9)])
def test_replies_round_trip(reply: Started | Refused | Exited) -> None:
    assert decode_reply(encode(reply)) == reply


def test_an_order_over_the_limit_is_not_encoded() -> None:
    big = Order((), {"X": "x" * MAX_MESSAGE}, "/", "/l", "t")
    with pytest.raises(FactoryError, match="over"):
        encode(big)


def body(**changes: object) -> bytes:
    base: dict[str, object] = json.loads(encode(ORDER))
    base.update(changes)
    return json.dumps(base).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"not json",
        b"[]",
        b"null",
        b'"start"',
        b"{}",
        body(order="stop"),
        body(argv="serve"),
        body(argv=[1]),
        body(argv=[None]),
        body(argv=["a\u0000b"]),
        body(env=[]),
        body(env={"": "x"}),
        body(env={"A=B": "x"}),
        body(env={"A": 1}),
        body(env={"A": "\u0000"}),
        body(cwd=None),
        body(cwd=3),
        body(log=["/l"]),
        body(title=None),
        b"{" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
        b" " * (MAX_MESSAGE + 1),
    ],
)
def test_garbage_is_not_an_order(data: bytes) -> None:
    with pytest.raises(FactoryError):
        decode_order(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{}",
        b'{"started": 0}',
        b'{"started": -1}',
        b'{"started": true}',
        b'{"started": "12"}',
        b'{"refused": 3}',
        b'{"exited": 12}',
        b'{"exited": 12, "status": "0"}',
        b'{"exited": 12, "status": false}',
        b'{"order": "start"}',
    ],
)
def test_garbage_is_not_a_reply(data: bytes) -> None:
    with pytest.raises(FactoryError):
        decode_reply(data)


@given(st.binary(max_size=512))
def test_any_bytes_decode_or_raise_factory_error(data: bytes) -> None:
    for decode in (decode_order, decode_reply):
        try:
            decode(data)
        except FactoryError:
            pass


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=12,
    )
)
def test_any_json_decodes_or_raises_factory_error(value: object) -> None:
    data = json.dumps(value).encode()
    for decode in (decode_order, decode_reply):
        try:
            decode(data)
        except AgentHostError as exc:
            assert isinstance(exc, FactoryError)
