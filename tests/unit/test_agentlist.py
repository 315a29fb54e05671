"""agenthost/agentlist.py (list's one merge and table, on JSON dicts) and the table's
shortcut for plain ASCII text (agenthost/cli/views.py), against wcwidth itself."""

from __future__ import annotations

import string

from wcwidth import wcswidth, wcwidth

from agenthost.agentlist import HostSeen, merge, table_rows
from agenthost.cli import views


def test_plain_ascii_is_measured_and_cut_as_wcwidth_does() -> None:
    # the shortcut's premise: wcwidth gives every printable ASCII character one column
    assert {wcwidth(c) for c in string.printable[:95]} == {1}
    for n in range(40):
        text = (string.printable[:95] * 2)[:n]
        assert views.columns(text) == wcswidth(text) == len(text)
        for width in range(45):
            cut = text if n <= width else text[: max(width - 1, 0)] + "…"
            assert views.fit(text, width) == cut, (text, width)
    # not plain: wcwidth decides (two columns a character, a combining accent, a tab)
    assert views.fit("日本語", 3) == "日…"
    assert views.fit("e\u0301", 3) == "e\u0301"
    assert views.fit("tab\there", 3) == "ta…"


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
