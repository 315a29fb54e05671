"""``agenthost export --format md``: one history entry -> its Markdown (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from agenthost.cli.journal_cmds import markdown

T = "2026-11-22T05:10:49.123456Z"


def test_a_tool_output_is_its_fence_and_nothing_more() -> None:
    # issue 28: "*result*" under every tool output was noise
    shown = markdown({"role": "tool", "tool_result": "2", "timestamp": T, "offset": 5})
    assert shown == "~~~~text\n2\n~~~~\n\n"
    failed = markdown(
        {"role": "tool", "tool_result": "boom", "is_error": True, "timestamp": T, "offset": 6}
    )
    assert failed == "~~~~text\nboom\n~~~~\n*the tool failed*\n\n"


def test_turn_endings_read_as_everywhere_else() -> None:
    failed = {"role": "assistant", "content": "API Error: 500", "is_error": True, "timestamp": T}
    assert (
        markdown(failed) == "**Assistant** · 2026-11-22 05:10:49\n\nturn failed: API Error: 500\n\n"
    )
    interrupted = {"role": "assistant", "content": "turn interrupted", "interrupted": True}
    assert markdown({**interrupted, "timestamp": T}).endswith("\n\nturn interrupted\n\n")


@pytest.mark.parametrize(
    "entry",
    [
        {"role": "tool", "tool_result": ["not", "text"], "is_error": "yes"},
        {"role": "tool", "tool_result": None},
        {"role": "assistant", "content": 7, "is_error": 1},
        {"role": "tool", "tool_result": "\x1b[2J~~~~\n# heading", "timestamp": 3},
        {},
    ],
)
def test_garbage_entries_still_make_markdown(entry: dict[str, Any]) -> None:
    out = markdown(entry)
    assert out.endswith("\n\n") and "\x1b" not in out and "*result" not in out


def test_a_governance_record_is_a_quoted_line_with_its_reason() -> None:
    entry = {
        "role": "governance",
        "content": "sandboxed by host: the agent runs in the sandbox strict\x1b[2J",
        "governance": {"action": "sandboxed", "profile": "strict"},
        "timestamp": T,
        "offset": 1,
    }
    shown = markdown(entry)
    assert shown.startswith("> **Governance** · 2026-11-22 05:10:49: sandboxed by host: ")
    assert "sandbox strict" in shown and "\x1b" not in shown  # agent-reachable text escaped
