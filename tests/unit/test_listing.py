"""``agenthost list``: hosts on disk merged with the daemon's records, as rows and JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from agenthost.cli.listing import CUT, cost_text, json_items, table_rows
from agenthost.cli.render import table
from agenthost.client import DiscoveredHost
from agenthost.daemon.protocol import DaemonAgent, SpawnSpec
from agenthost.daemon.registry import REDACTED, redacted
from agenthost.protocol import AgentInfo, HostInfo, StatusResponse

NOW = datetime.now(UTC)


def _host(agent_id: str, **agent: object) -> DiscoveredHost:
    info = AgentInfo.model_validate(
        # "now" at the call, not at import: the suite may collect minutes before this runs
        {
            "id": agent_id,
            "state": "idle",
            "pid": 42,
            "started_at": datetime.now(UTC) - timedelta(seconds=90),
        }
        | agent
    )
    host = HostInfo(
        pid=41, version="0.1.0", protocol_version="1.1", started_at=NOW, socket_path="/s"
    )
    return DiscoveredHost(
        agent_id, Path(f"/h/{agent_id}.sock"), StatusResponse(host=host, agent=info)
    )


def _record(agent_id: str, status: str, **spec: object) -> DaemonAgent:
    return DaemonAgent(
        agent_id=agent_id,
        status=status,
        state="running",
        restarts=2,
        created_at=NOW,
        updated_at=NOW,
        spec=SpawnSpec.model_validate({"agent_id": agent_id} | spec),
    )


def test_columns_without_a_daemon() -> None:
    hosts = [
        _host("b", project="web", task="T-1", cost_usd=0.01234, backend="claude"),
        _host("a", state="working"),
        DiscoveredHost("c", Path("/h/c.sock"), None, error="refused", alive=False),
    ]
    headers, rows = table_rows(hosts, {})
    assert headers == ["agent", "state", "backend", "project", "task", "pid", "uptime", "cost"]
    assert [r[0] for r in rows] == ["a", "b", "c"]  # sorted by id
    assert rows[1] == ["b", "idle", "claude", "web", "T-1", "42", "1m30s", "$0.01234"]
    assert rows[0][-1] == "-"  # no cost reported yet
    assert rows[2][:2] == ["c", "stale"]  # a socket whose lock is free


def test_daemon_columns_and_agents_only_the_daemon_knows() -> None:
    hosts = [_host("run1")]
    known = {
        "run1": _record("run1", "running"),
        "gone": _record("gone", "lost", project="p", task="x" * 100, agent="lines"),
    }
    headers, rows = table_rows(hosts, known)
    assert headers[-2:] == ["daemon", "restarts"]
    by_id = {r[0]: r for r in rows}
    assert by_id["run1"][-2:] == ["running", "2"]
    gone = by_id["gone"]
    assert gone[2:4] == ["lines", "p"] and gone[-2:] == ["lost", "2"]
    assert gone[1] == "-"  # no host runs it: its last recorded state would mislead
    assert gone[4] == "x" * 100  # rows hold the whole text: the table cuts it
    line = table(headers, rows, cut=CUT).splitlines()[1]
    assert "x" * 31 + "…" in line and "x" * 32 not in line


def test_json_merges_and_sorts() -> None:
    items = json_items([_host("z")], {"a": _record("a", "failed"), "z": _record("z", "running")})
    assert [i["agent_id"] for i in items] == ["a", "z"]
    assert items[0] == {
        "agent_id": "a",
        "reachable": False,
        "alive": False,
        "daemon": items[0]["daemon"],
    }
    assert items[0]["daemon"]["status"] == "failed"
    assert items[1]["reachable"] and items[1]["daemon"]["status"] == "running"


def test_spawn_spec_env_values_are_redacted_for_listing() -> None:
    spec = SpawnSpec(agent_id="a", env={"API_KEY": "sk-secret"})
    shown = redacted(spec)
    assert shown is not None and shown.env == {"API_KEY": REDACTED}
    assert spec.env == {"API_KEY": "sk-secret"}  # the registry's copy is untouched
    assert redacted(None) is None


def test_cost_text() -> None:
    assert cost_text(None) == "-"
    assert cost_text(0.0) == "$0.00"
    assert cost_text(0.00042) == "$0.00042"
    assert cost_text(12.345) == "$12.35"


def test_table_aligns_wide_characters() -> None:
    text = table(["agent", "task"], [["a", "日本語"], ["b", "x"]])
    lines = text.splitlines()
    # the column after a wide cell starts where it starts after a narrow one
    assert lines[1].index("日") == lines[2].index("x")


def test_table_cells_are_escaped_and_may_hold_lines() -> None:
    rows = [["r1", "a\x1b[2Kb\u202e", "line 1\n\tline 2"], ["r2", "x", "y"]]
    assert table(["id", "tool", "input"], rows).splitlines() == [
        "ID  TOOL             INPUT",
        "r1  a\\x1b[2Kb\\u202e  line 1",
        "                     \\x09line 2",  # a cell's next line, in its column
        "r2  x                y",
    ]
    cut = table(["id", "task"], [["r1", "a\nb " + "c" * 20]], cut={"task": 8})
    assert cut.splitlines()[1] == "r1  a b ccc…"  # one line, cut
