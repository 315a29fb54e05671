"""Failed and interrupted turns through a real host and the real CLI, with the demo agent.

A failed turn is an ``error`` event (with the HTTP status when known) and an assistant
history entry with ``is_error``; ``attach`` shows the message once, ``history`` keeps
it. An interrupted turn is shown as interrupted, never as failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_cli import run
from test_demo import turn_events

from conftest import HostFactory
from hosttools import HostProc


def turn(host: HostProc, text: str) -> list[dict[str, Any]]:
    """Send ``text``; the events of its turn."""
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.request("host.send", {"input": text})
        return turn_events(conn)


def test_a_failed_turn_is_an_error_event_and_in_history(
    host_factory: HostFactory, home: Path
) -> None:
    host = host_factory("f1", "--agent", "demo", command=["--pace", "0"])
    events = turn(host, "/error")
    kinds = [e["type"] for e in events if e["type"] in ("error", "chat_entry", "result")]
    assert kinds == ["chat_entry", "error", "chat_entry", "result"]  # the send first
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["error"] == "API Error: 500 demo failure" and error["http_status"] == 500
    assert error["turn_failed"] is True  # the agent's failed turn, not the host's finding
    (result,) = [e["result"] for e in events if e["type"] == "result"]
    assert result["is_error"] is True and "interrupted" not in result
    assert host.agent()["last_error"] == "API Error: 500 demo failure"
    with host.raw() as conn:
        entries = conn.request("host.history")["payload"]["entries"]
    # the send, then the failure: role assistant (clients know it), is_error, the status
    assert [(e["role"], e.get("is_error")) for e in entries] == [
        ("user", None),
        ("assistant", True),
    ]
    assert entries[1]["content"] == "API Error: 500 demo failure"
    assert entries[1]["http_status"] == 500
    # what a person sees: the message once in attach, and in history
    attach = run(home, "attach", "f1", "--no-follow")
    assert attach.returncode == 0, attach.stderr
    assert attach.stdout.count("API Error: 500 demo failure") == 1
    assert "✗ turn failed: API Error: 500 demo failure · " in attach.stdout
    history = run(home, "history", "f1")
    assert "✗ turn failed: API Error: 500 demo failure" in history.stdout


def test_an_interrupted_turn_is_shown_as_interrupted(host_factory: HostFactory, home: Path) -> None:
    host = host_factory("i1", "--agent", "demo", command=["--pace", "0"])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.request("host.send", {"input": "/sleep 60"})
        conn.read_until(lambda f: f.get("type") == "chat_entry" and "tool_name" in f["chat_entry"])
        assert conn.request("host.interrupt")["success"]
        events = turn_events(conn)
    assert not [e for e in events if e["type"] == "error"]  # not a failure
    (result,) = [e["result"] for e in events if e["type"] == "result"]
    assert result["interrupted"] is True
    entries = [e["chat_entry"] for e in events if e["type"] == "chat_entry"]
    assert entries[-1] == {**entries[-1], "role": "assistant", "content": "turn interrupted"}
    assert entries[-1]["interrupted"] is True and not entries[-1].get("is_error")
    attach = run(home, "attach", "i1", "--no-follow")
    assert "⏹ turn interrupted" in attach.stdout and "turn failed" not in attach.stdout
    history = run(home, "history", "i1")
    assert "⏹ turn interrupted" in history.stdout
