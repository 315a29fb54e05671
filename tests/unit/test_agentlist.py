"""agenthost/agentlist.py (list's one merge and table, on JSON dicts) and the table's
shortcut for plain ASCII text (agenthost/cli/views.py), against wcwidth itself."""

from __future__ import annotations

import string

from wcwidth import wcswidth, wcwidth

from agenthost.agentlist import HostSeen, merge, table_rows
from agenthost.cli import views


def _fit_by_wcwidth(text: str, width: int) -> str:
    if wcswidth(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        w = max(wcwidth(char), 0)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "…"


def test_plain_ascii_is_measured_and_cut_as_wcwidth_does() -> None:
    for n in range(40):
        text = (string.printable[:95] * 2)[:n]
        assert views.columns(text) == max(wcswidth(text), len(text))
        for width in range(45):
            assert views.fit(text, width) == _fit_by_wcwidth(text, width), (text, width)
    for text in ["日本語", "e\u0301", "tab\there"]:  # (not plain: wcwidth decides)
        assert views.fit(text, 3) == _fit_by_wcwidth(" ".join(text.split()), 3)


def test_merge_and_rows_of_hosts_and_daemon_records() -> None:
    agent = {"id": "a1", "state": "idle", "project": "p", "worktree": "", "pid": 7}
    status = {"agent": {**agent, "started_at": "2026-01-01T00:00:00Z"}, "host": {"pid": 1}}
    hosts = [HostSeen("b2", "/h/b2.sock", None, "no answer", False), HostSeen("a1", "/s", status)]
    known = {"c3": {"agent_id": "c3", "status": "lost", "state": "running", "restarts": 2}}
    items = merge(hosts, known)
    assert [i["agent_id"] for i in items] == ["a1", "b2", "c3"]
    assert items[1] == {
        "agent_id": "b2",
        "socket_path": "/h/b2.sock",
        "reachable": False,
        "alive": False,
        "error": "no answer",
    }
    headers, rows = table_rows(items)
    assert headers[-2:] == ["daemon", "restarts"]
    assert [r[:2] for r in rows] == [["a1", "idle"], ["b2", "stale"], ["c3", "-"]]
    assert rows[2][-2:] == ["lost", "2"] and rows[0][-2:] == ["-", ""]
