"""(1.4) A governance decision is one ``governance`` event and one history entry."""

from __future__ import annotations

import json
from typing import Any

from agenthost.agents.base import Governed
from agenthost.host.stream import AgentStream
from agenthost.models import HistoryEntry, StreamEvent


def _stream() -> tuple[AgentStream, list[bytes]]:
    sent: list[bytes] = []
    stream = AgentStream(
        "g1",
        lambda first, data, count: sent.append(bytes(data)),
        lambda data: None,
        ring_size=100,
        ring_bytes=1 << 20,
        history_size=100,
        history_bytes=1 << 20,
    )
    return stream, sent


def _events(sent: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for chunk in sent for line in chunk.splitlines() if line]


def test_a_decision_is_an_event_and_a_history_entry_with_actor_and_reason() -> None:
    stream, sent = _stream()
    first = stream.publish(
        [Governed("budget_exceeded", "host", "spent $1.20 of $1.00", {"spent_usd": 1.2})]
    )
    event, entry_event = _events(sent)
    assert (event["type"], event["offset"]) == ("governance", first)
    assert event["governance"] == {
        "action": "budget_exceeded",
        "actor": "host",
        "reason": "spent $1.20 of $1.00",
        "spent_usd": 1.2,
    }
    assert entry_event["type"] == "chat_entry"
    assert entry_event["chat_entry"]["role"] == "governance"
    [kept] = stream.history.slice(0)
    entry = HistoryEntry.model_validate(kept)
    assert str(entry) == (f"#{first + 1} governance: budget exceeded by host: spent $1.20 of $1.00")
    parsed = StreamEvent.model_validate(event)
    assert str(parsed) == f"#{first} governance budget_exceeded by host: spent $1.20 of $1.00"
    assert parsed.governance is not None and parsed.governance.model_extra == {"spent_usd": 1.2}


def test_the_detail_never_overrides_the_action_actor_or_reason() -> None:
    stream, sent = _stream()
    stream.publish([Governed("resumed", "cli", "asked", {"action": "x", "actor": "y"})])
    assert _events(sent)[0]["governance"]["action"] == "resumed"
    assert _events(sent)[0]["governance"]["actor"] == "cli"
