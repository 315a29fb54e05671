"""A response written in pieces is byte for byte the response written at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agenthost.protocol import (
    HistoryEntry,
    HistoryResponse,
    MessageType,
    encode_response,
    encode_response_pieces,
)

TS = "2026-11-22T03:25:25.082326Z"


def entry(content: str, **fields: Any) -> HistoryEntry:
    return HistoryEntry.model_validate(
        {"role": "user", "content": content, "timestamp": TS, **fields}
    )


ENTRIES = [
    entry("plain"),
    entry('café ☕ \u2028 \x00 "quoted" \\ back'),
    entry("half an emoji \ud83d"),  # a lone surrogate: U+FFFD in both encodings
    entry('"entries":[] inside a string', offset=7),
    entry("x" * 5000, tool_name="Bash", input={"command": "ls", "n": [1, 2]}, extra_field=1),
]


@pytest.mark.parametrize("request_id", ["r1", 17, None, '"entries":[]', "id \ud800"])
@pytest.mark.parametrize("count", [0, 1, 5])
@pytest.mark.parametrize("piece_bytes", [1, 100, 1 << 20])
@pytest.mark.parametrize("has_more", [None, True])
def test_pieces_join_to_the_whole_response(
    request_id: Any, count: int, piece_bytes: int, has_more: bool | None
) -> None:
    items = ENTRIES[:count]
    whole = HistoryResponse(agent_id="a1", entries=items, offset=9, total=3, has_more=has_more)
    head = HistoryResponse(agent_id="a1", entries=[], offset=9, total=3, has_more=has_more)
    pieces = list(
        encode_response_pieces(MessageType.HISTORY, request_id, head, "entries", items, piece_bytes)
    )
    assert b"".join(pieces) == encode_response(MessageType.HISTORY, request_id, whole)
    assert b"".join(pieces).decode().count("\n") == 1  # one line, valid UTF-8
    if piece_bytes == 1:  # one item per piece, then the tail
        assert len(pieces) == count + 1


def test_items_are_consumed_only_as_pieces_are_asked_for() -> None:
    taken: list[int] = []

    def items() -> Iterator[HistoryEntry]:
        for i in range(10):
            taken.append(i)
            yield entry(str(i) * 100)

    head = HistoryResponse(agent_id="a1", entries=[], offset=0)
    pieces = encode_response_pieces(MessageType.HISTORY, "r", head, "entries", items(), 250)
    first = next(pieces)
    assert taken == [0, 1] and first.endswith(b"}")
    next(pieces)
    assert taken == [0, 1, 2, 3]
