"""The fast encoding of a terminal event's text (``chunks.json_text``) against the
json module: byte for byte the same event for any bytes, garbage included."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agenthost.agents.base import TerminalOutput
from agenthost.host.stream import AgentStream
from agenthost.protocol import EventEncoder
from agenthost.terminal.chunks import event_bytes, json_text, term_fields

TERMINALISH = st.lists(
    st.sampled_from(
        [b"\x1b[31m", b"\x1b[0m", b"\r\n", b"\t", b"\x00", b"\x7f", b'"', b"\\", b"\x08"]
        + [b"plain text ", "caf\u00e9 \u65e5\u672c \U0001f600".encode(), b"\x9b", b"\xff"]
    )
).map(b"".join)


def _events(chunk: bytes) -> tuple[bytes, bytes]:
    """The event a stream publishes for ``chunk``, and the one the json module encodes
    for the same offset and timestamp."""
    sent: list[bytes] = []
    stream = AgentStream(
        "t",
        lambda _first, batch, _count: sent.append(batch),
        lambda _data: None,
        ring_size=10,
        ring_bytes=1 << 20,
        history_size=10,
        history_bytes=1 << 20,
    )
    stream.publish([TerminalOutput(chunk)])
    (fast,) = sent
    event = json.loads(fast)
    slow = EventEncoder("t").event(
        "terminal", event["offset"], event["timestamp"], term_fields(chunk)
    )
    return fast, slow


@given(st.binary() | TERMINALISH)
def test_the_fast_path_is_the_json_modules_event(chunk: bytes) -> None:
    fast, slow = _events(chunk)
    assert fast == slow
    event = json.loads(fast)
    assert event_bytes(event) == chunk
    assert ("data" in event) == (json_text(chunk) is not None)


@given(st.text())
def test_any_text_is_escaped_as_json_escapes_it(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    try:
        raw.decode()
    except UnicodeDecodeError:  # a lone surrogate is not UTF-8
        assert json_text(raw) is None
        return
    dumped = json.dumps(text, ensure_ascii=False).encode()
    assert json_text(raw) == dumped[1:-1]


def test_every_control_byte_and_quote() -> None:
    dense = bytes(range(0x80))  # escaped by json's C escaper
    sparse = b"x" * 1000 + dense + "é".encode()  # by a replace per distinct byte
    for raw in (dense, sparse):
        assert json_text(raw) == json.dumps(raw.decode(), ensure_ascii=False).encode()[1:-1]
    assert json_text(b"\xc3") is None  # cut UTF-8
    assert json_text(b"") == b""
