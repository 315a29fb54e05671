"""Claude Code result lines whose fields hold values of an unexpected JSON type.

The CLI's output is outside input: a field of another type than documented must not
raise in the parser (the host would lose the line and the turn's outcome).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agenthost.agents.base import ErrorNote, Output
from agenthost.agents.streamjson import StreamJsonParser


@pytest.mark.parametrize("reason", [[], {}, ["aborted_tools"], {"x": 1}, 3, None])
def test_a_failed_result_with_an_unhashable_or_odd_terminal_reason(reason: Any) -> None:
    line = json.dumps({"type": "result", "subtype": "error_max_turns", "terminal_reason": reason})
    events = StreamJsonParser().parse(line)
    assert events[0] == Output(line)
    # not an interruption (only the known strings are): a failed turn, reported
    notes = [e.message for e in events if isinstance(e, ErrorNote)]
    assert notes == ["error_max_turns"]
