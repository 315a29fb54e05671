"""The daemon's frame decoder takes what the hosts' takes: an escaped lone surrogate
(``"\\ud800"``, half an emoji from another encoder) in an event, a notice or a response
no longer ends a merged ``daemon.watch`` stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agenthost.daemon.protocol import Notice, decode_daemon_frame
from agenthost.errors import ProtocolError
from agenthost.protocol import decode_message

TS = "2026-01-01T00:00:00.000000Z"


def event(**fields: Any) -> bytes:
    obj = {"kind": "event", "type": "output", "agent_id": "a", "offset": 4, "timestamp": TS}
    obj.update(fields)
    return json.dumps(obj).encode()  # ensure_ascii: "\ud800" travels as its escape


# --- defect 4: the daemon's decoder ends no watch stream on an escape ---------------------


@pytest.mark.parametrize(
    "frame",
    [
        event(data="half an emoji \ud83d"),
        event(type="error", error="\udc00"),
        b'{"kind":"notice","type":"host_gone","agent_id":"a","timestamp":"'
        + TS.encode()
        + b'","reason":"\\ud800"}',
        b'{"kind":"response","type":"daemon.ping","id":1,"success":false,"error":"\\ud800",'
        b'"code":"internal"}',
    ],
)
def test_decode_daemon_frame_takes_escaped_lone_surrogates(frame: bytes) -> None:
    # It used to refuse them ("malformed frame from the daemon"), which ended the merged
    # watch stream, while the hosts' decoder took the same frames.
    message = decode_daemon_frame(frame)
    assert message == decode_message(frame) or isinstance(message, Notice)


def test_decode_daemon_frame_keeps_its_errors() -> None:
    with pytest.raises(ProtocolError, match="^malformed frame from the daemon: "):
        decode_daemon_frame(b'{"kind":"other"}')
    with pytest.raises(ProtocolError, match="^malformed frame from the daemon: "):
        decode_daemon_frame(b"[1]")
