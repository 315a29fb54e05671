"""The approval policy in a real host with the demo agent: rules of config.toml decide
before anyone is asked, session grants, ask_timeout, a config edited or broken while
the host runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import HostFactory
from hosttools import (
    PY,
    RawConn,
    attached,
    entries,
    events_until,
    history,
    is_result,
    is_state,
    states,
)

ALLOW = """
[[policy.rule]]
tool = "Bash"
command = "touch demo*"
decision = "allow"
reason = "the demo may leave marks"
"""

DENY = """
[[policy.rule]]
tool = "Bash"
decision = "deny"
"""


def write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def ask_turn(conn: RawConn, message: str = "/ask") -> list[dict[str, Any]]:
    """Send /ask (or another message that asks); the events up to the end of its turn
    (state idle or waiting)."""
    assert conn.request("host.send", {"input": message})["success"]
    return events_until(conn, lambda e: e["type"] == "state" and e["state"] in ("idle", "waiting"))


def decisions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["decision"] for e in events if e["type"] == "permission_response"]


def audit(events: list[dict[str, Any]]) -> list[str]:
    return [e["content"] for e in entries(events) if e["role"] == "permission"]


def test_an_allow_rule_answers_without_a_person(home: Path, host_factory: HostFactory) -> None:
    write_config(home, ALLOW)
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
    assert "waiting" not in states(events) and states(events)[-1] == "idle"
    (request,) = [e for e in events if e["type"] == "permission_request"]
    (decision,) = decisions(events)
    assert decision["actor"] == "policy" and decision["behavior"] == "allow"
    reason = 'rule 1 (tool Bash, command "touch demo*"): the demo may leave marks'
    assert decision["reason"] == reason
    assert decision["request_id"] == request["request"]["request_id"]
    ran = [e.get("tool_result") for e in entries(events)]
    assert "(demo) ran: touch demo-was-here" in ran
    assert audit(events) == [f"allowed by policy: {reason}"]
    kept = [e["content"] for e in history(host) if e["role"] == "permission"]
    assert kept == [f"allowed by policy: {reason}"]
    assert host.agent()["pending_requests"] == 0


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'echo hi'$'\\x3b'touch$'\\x20'pwned",
        "bash -c 'echo hi'\"${IFS:2:1}\"'touch pwned'",
        "echo hi; touch pwned",
    ],
)
def test_a_quoting_trick_does_not_talk_past_an_allow_rule(
    home: Path, host_factory: HostFactory, command: str
) -> None:
    # what the outside test found: `echo *` allowed a command that runs `touch pwned`
    write_config(home, '[[policy.rule]]\ntool = "Bash"\ncommand = "echo *"\ndecision = "allow"\n')
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn, f"/ask {command}")
        assert states(events)[-1] == "waiting" and decisions(events) == []
        (request,) = [e["request"] for e in events if e["type"] == "permission_request"]
        assert request["input"]["command"] == command
        answer = {"request_id": request["request_id"], "behavior": "deny"}
        assert conn.request("host.respond", answer)["success"]
        events_until(conn, is_state("idle"))
        events = ask_turn(conn, "/ask echo hello")  # a plain echo is still allowed
    assert decisions(events)[-1]["behavior"] == "allow"


def test_a_path_rule_sees_where_a_symlink_leads(
    home: Path, host_factory: HostFactory, tmp_path: Path
) -> None:
    # path = "WT/*" must not allow WT/link-to-etc/passwd: the host resolves symlinks
    # against the agent's working directory before the rules match
    worktree = tmp_path / "wt"
    (worktree / "src").mkdir(parents=True)
    (worktree / "link-to-etc").symlink_to("/etc")
    write_config(
        home,
        f'[[policy.rule]]\ntool = "Edit"\npath = "{worktree}/*"\ndecision = "allow"\n'
        '[[policy.rule]]\ntool = "Edit"\npath = "/etc/*"\ndecision = "deny"\n',
    )
    host = host_factory("p1", "--agent", "demo", "--cwd", str(worktree))
    with attached(host) as conn:
        allowed = ask_turn(conn, "/edit src/app.py")  # relative: against the cwd
        denied = ask_turn(conn, f"/edit {worktree}/link-to-etc/passwd")
        escaped = ask_turn(conn, "/edit link-to-etc/../../../etc/hosts")
    assert [d["behavior"] for d in decisions(allowed)] == ["allow"]
    assert [d["reason"] for d in decisions(denied)] == ['rule 2 (tool Edit, path "/etc/*")']
    assert [d["behavior"] for d in decisions(escaped)] == ["deny"]


def test_a_deny_rule_refuses_without_a_person(home: Path, host_factory: HostFactory) -> None:
    write_config(home, DENY)
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
    assert "waiting" not in states(events)
    (decision,) = decisions(events)
    assert decision["behavior"] == "deny" and decision["actor"] == "policy"
    assert decision["reason"] == "rule 1 (tool Bash)"
    results = [e for e in entries(events) if "tool_result" in e]
    assert results[0]["is_error"] is True
    assert "denied by the approval policy: rule 1 (tool Bash)" in results[0]["tool_result"]
    assert audit(events) == ["denied by policy: rule 1 (tool Bash)"]


def test_without_a_rule_a_person_decides(home: Path, host_factory: HostFactory) -> None:
    write_config(home, '[[policy.rule]]\ntool = "Read"\ndecision = "allow"\n')
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
        assert states(events)[-1] == "waiting" and decisions(events) == []
        assert host.agent()["pending_requests"] == 1


def test_ask_timeout_denies_a_request_nobody_answered(
    home: Path, host_factory: HostFactory
) -> None:
    write_config(home, "[policy]\nask_timeout = 0.5\n")
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
        assert states(events)[-1] == "waiting"
        events = events_until(conn, is_state("idle"))
    (decision,) = decisions(events)
    assert decision["actor"] == "timeout" and decision["behavior"] == "deny"
    assert decision["reason"] == "nobody answered within 0.5s"
    assert audit(events) == ["denied by timeout: nobody answered within 0.5s"]


def test_an_answer_in_time_cancels_the_timeout(home: Path, host_factory: HostFactory) -> None:
    write_config(home, '[policy]\nask_timeout = "1s"\n')
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        rid = [e for e in ask_turn(conn) if e["type"] == "permission_request"][0]
        rid = rid["request"]["request_id"]
        assert conn.request("host.respond", {"request_id": rid, "behavior": "allow"})["success"]
        events = events_until(conn, is_state("idle"))
        # a second request: its own timer fires, the first one's was cancelled
        events += ask_turn(conn) + events_until(conn, is_state("idle"))
    actors = [d["actor"] for d in decisions(events)]
    assert actors == ["client", "timeout"]


def test_allow_for_this_session(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
        rid = [e for e in events if e["type"] == "permission_request"][0]["request"]["request_id"]
        denied = conn.request(
            "host.respond",
            {"request_id": rid, "behavior": "deny", "remember": "session"},
        )
        assert denied["code"] == "invalid_payload" and "only goes with" in denied["error"]
        answer = {"request_id": rid, "behavior": "allow", "remember": "session"}
        assert conn.request("host.respond", {**answer, "actor": "terminal"})["success"]
        events = events_until(conn, is_state("idle"))
        assert decisions(events)[0]["remember"] == "session"
        again = ask_turn(conn)
    assert "waiting" not in states(again)
    (decision,) = decisions(again)
    assert decision["actor"] == "policy"
    assert decision["reason"] == "allowed for this session by terminal"


def test_session_grants_can_be_turned_off(home: Path, host_factory: HostFactory) -> None:
    write_config(home, "[policy]\nsession_grants = false\n")
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        rid = [e for e in ask_turn(conn) if e["type"] == "permission_request"][0]
        answer = {"request_id": rid["request"]["request_id"], "behavior": "allow"}
        refused = conn.request("host.respond", {**answer, "remember": "session"})
        assert refused["code"] == "forbidden" and "session_grants = false" in refused["error"]
        assert host.agent()["pending_requests"] == 1  # refused, not lost
        assert conn.request("host.respond", answer)["success"]


def test_a_deny_rule_beats_a_session_grant(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        rid = [e for e in ask_turn(conn) if e["type"] == "permission_request"][0]
        answer = {"request_id": rid["request"]["request_id"], "behavior": "allow"}
        assert conn.request("host.respond", {**answer, "remember": "session"})["success"]
        events_until(conn, is_state("idle"))
        write_config(home, DENY)  # edited while the host runs
        events = ask_turn(conn)
    (decision,) = decisions(events)
    assert decision["behavior"] == "deny" and decision["actor"] == "policy"


def test_config_edited_while_the_host_runs(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        rid = [e for e in ask_turn(conn) if e["type"] == "permission_request"][0]
        rid = rid["request"]["request_id"]
        assert conn.request("host.respond", {"request_id": rid, "behavior": "allow"})["success"]
        events_until(conn, is_state("idle"))
        write_config(home, ALLOW)
        events = ask_turn(conn)
    assert "waiting" not in states(events)
    assert decisions(events)[0]["actor"] == "policy"


def test_an_invalid_config_asks_for_everything_and_says_why(
    home: Path, host_factory: HostFactory
) -> None:
    write_config(home, ALLOW + "\n[policy]\nask_timeot = 3\n")  # a typo
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
        assert states(events)[-1] == "waiting" and decisions(events) == []
        (error,) = [e["error"] for e in events if e["type"] == "error"]
        assert "config.toml" in error and "ask_timeot" in error
        assert error.endswith("the approval policy asks for everything until it is fixed")
        rid = [e for e in events if e["type"] == "permission_request"][0]["request"]
        assert conn.request("host.respond", {"request_id": rid["request_id"], "behavior": "allow"})[
            "success"
        ]
        events_until(conn, is_state("idle"))
        again = ask_turn(conn)  # the same error is not repeated
        assert [e for e in again if e["type"] == "error"] == []
        assert states(again)[-1] == "waiting"


ACP_AGENT = Path(__file__).parent.parent / "fixtures" / "acp_agent.py"


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_an_acp_agents_request_is_decided_with_its_once_option(
    home: Path, host_factory: HostFactory, decision: str
) -> None:
    write_config(home, f'[[policy.rule]]\ncommand = "touch asked*"\ndecision = "{decision}"\n')
    worktree = home / "wt"
    worktree.mkdir()
    command = [PY, "-u", str(ACP_AGENT), "--state", str(home / "sessions")]
    host = host_factory("acp", "--agent", "acp", "--cwd", str(worktree), command=command)
    host.wait_state("idle")
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "/ask"})["success"]
        events = events_until(conn, is_result)
    assert "waiting" not in states(events)
    (made,) = decisions(events)
    assert made["behavior"] == decision and made["actor"] == "policy"
    tools = [e for e in history(host) if e["role"] == "tool" and "tool_result" in e]
    assert [t["is_error"] for t in tools] == ([False] if decision == "allow" else [True])
