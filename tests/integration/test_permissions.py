"""Protocol 1.1: interrupt, pending permission requests and their answers.

The demo agent speaks the same control protocol as Claude Code (an ``interrupt``
control request; ``can_use_tool`` requests answered by ``control_response``), so these
semantics are tested here without npm; tests/e2e repeats the essentials against the
real CLI.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from conftest import HostFactory
from hosttools import PY, RawConn, events_until, is_state, lines_agent


def ask(host: Any) -> tuple[RawConn, dict[str, Any]]:
    """Attach, send /ask, return the connection and the permission_request event."""
    conn = host.raw()
    conn.request("host.attach", {"offset": 0})
    conn.send("host.send", {"input": "/ask"})
    events = events_until(conn, is_state("waiting"))
    (req,) = [e for e in events if e["type"] == "permission_request"]
    return conn, req


def test_permission_request_allowed(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        request = req["request"]
        assert request["tool_name"] == "Bash" and request["tool_input"] == "touch demo-was-here"
        assert request["input"]["command"] == "touch demo-was-here"
        assert request["tool_use_id"].startswith("toolu_")
        agent = host.agent()
        assert agent["state"] == "waiting" and agent["pending_requests"] == 1
        listed = conn.request("host.pending")["payload"]["requests"]
        assert [r["request_id"] for r in listed] == [request["request_id"]]
        answer = conn.request(
            "host.respond", {"request_id": request["request_id"], "behavior": "allow"}
        )
        assert answer["success"] and answer["payload"]["behavior"] == "allow"
        events = events_until(conn, is_state("idle"))
    decision = [e for e in events if e["type"] == "permission_response"]
    assert decision[0]["decision"] == {
        "request_id": request["request_id"],
        "behavior": "allow",
        "actor": "client",  # (1.3) no actor given
    }
    # the audit trail: the decision is a history entry right after it
    audit = [e["chat_entry"] for e in events if e.get("chat_entry", {}).get("role") == "permission"]
    assert audit[0]["decision"] == decision[0]["decision"]
    assert audit[0]["content"] == "allowed by client"
    assert audit[0]["tool_name"] == request["tool_name"]
    states = [e["state"] for e in events if e["type"] == "state"]
    assert states == ["running", "idle"]
    results = [e["chat_entry"] for e in events if e["type"] == "chat_entry"]
    results = [r for r in results if r["role"] != "permission"]
    assert results[0]["tool_result"] == "(demo) ran: touch demo-was-here"
    assert host.agent()["pending_requests"] == 0


def test_permission_denied_with_a_reason(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        rid = req["request"]["request_id"]
        conn.request("host.respond", {"request_id": rid, "behavior": "deny", "message": "no"})
        events = events_until(conn, is_state("idle"))
    (tool_result,) = [
        e["chat_entry"]
        for e in events
        if e["type"] == "chat_entry" and "tool_result" in e["chat_entry"]
    ]
    assert tool_result["is_error"] is True and tool_result["tool_result"] == "Permission denied: no"


def test_allow_with_updated_input(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        rid = req["request"]["request_id"]
        resp = conn.request(
            "host.respond",
            {"request_id": rid, "behavior": "deny", "updated_input": {"command": "x"}},
        )
        assert resp["code"] == "invalid_payload"  # a denial takes no input
        conn.request(
            "host.respond",
            {"request_id": rid, "behavior": "allow", "updated_input": {"command": "echo safe"}},
        )
        events = events_until(conn, is_state("idle"))
    ran = [e["chat_entry"].get("tool_result") for e in events if e["type"] == "chat_entry"]
    assert "(demo) ran: echo safe" in ran


def test_unknown_and_stale_request_ids_are_clear_errors(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        rid = req["request"]["request_id"]
        unknown = conn.request("host.respond", {"request_id": "nope", "behavior": "allow"})
        assert unknown["code"] == "unknown_request" and "nope" in unknown["error"]
        assert conn.request("host.respond", {"request_id": rid, "behavior": "allow"})["success"]
        again = conn.request("host.respond", {"request_id": rid, "behavior": "deny"})
        assert again["code"] == "unknown_request" and "answered already" in again["error"]
        bad = conn.request("host.respond", {"request_id": rid, "behavior": "maybe"})
        assert bad["code"] == "invalid_payload"


def test_request_survives_detach_and_is_answered_by_a_later_client(
    host_factory: HostFactory,
) -> None:
    host = host_factory("p1", "--agent", "demo", "--ring-size", "5")
    first, req = ask(host)
    rid = req["request"]["request_id"]
    with first:
        first.request("host.detach")
    # plenty of events later (the ring keeps 5), nobody attached: still pending
    with host.raw() as other:
        for i in range(5):
            other.request("host.history", {"limit": i})
    with host.raw() as later:
        attach = later.request("host.attach", {"offset": 10**6})["payload"]
        assert [r["request_id"] for r in attach["pending"]] == [rid]
        assert host.agent()["state"] == "waiting"
        assert later.request("host.respond", {"request_id": rid, "behavior": "allow"})["success"]
        events_until(later, is_state("idle"))


def test_interrupt_stops_a_running_turn(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "/sleep 60"})
        events_until(conn, lambda e: e["type"] == "chat_entry" and e["chat_entry"].get("tool_name"))
        resp = conn.request("host.interrupt")
        assert resp["payload"] == {"sent": True, "method": "control"}
        events = events_until(conn, is_state("idle"))  # long before the 60 s
    (result,) = [e["result"] for e in events if e["type"] == "result"]
    assert result["is_error"] is True
    assert host.agent()["pid"] > 0  # interrupted, not killed


def test_interrupt_withdraws_a_pending_question(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        conn.request("host.interrupt")
        events = events_until(conn, is_state("idle"))
    (decision,) = [e["decision"] for e in events if e["type"] == "permission_response"]
    assert decision["behavior"] == "cancelled"
    assert decision["request_id"] == req["request"]["request_id"]
    assert host.agent()["pending_requests"] == 0


def test_pending_requests_are_cancelled_when_the_agent_exits(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    with conn:
        agent_pid = host.agent()["pid"]
        subprocess.run(["kill", "-9", str(agent_pid)], check=True)
        events = events_until(conn, is_state("error"))
    (decision,) = [e["decision"] for e in events if e["type"] == "permission_response"]
    assert decision == {
        "request_id": req["request"]["request_id"],
        "behavior": "cancelled",
        "message": "the agent exited",
        "actor": "host",
    }


def test_lines_agent_is_interrupted_with_sigint(host_factory: HostFactory) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: print('got SIGINT', flush=True))\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    host = host_factory("p1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
        assert conn.request("host.interrupt")["payload"]["method"] == "signal"
        conn.read_until(lambda f: f.get("data") == "got SIGINT")


def test_interrupt_and_respond_when_the_agent_is_gone(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "lines", command=["true"])
    host.wait_state("done")
    with host.raw() as conn:
        assert conn.request("host.interrupt")["code"] == "agent_not_running"
        resp = conn.request("host.respond", {"request_id": "r1", "behavior": "allow"})
        assert resp["code"] == "unknown_request"
        assert conn.request("host.pending")["payload"] == {"requests": []}


def test_cli_pending_respond_interrupt(host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    conn, req = ask(host)
    rid = req["request"]["request_id"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "agenthost", *args, "--home", str(host.home)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    with conn:
        listed = cli("pending", "p1", "--json")
        assert [r["request_id"] for r in json.loads(listed.stdout)] == [rid]
        assert "Bash" in cli("pending", "p1").stdout
        bad = cli("respond", "p1", rid, "allow", "--input", "[1]")
        assert bad.returncode == 2 and "JSON object" in bad.stderr
        done = cli("respond", "p1", rid, "deny", "--message", "not today")
        assert done.returncode == 0 and done.stdout.strip() == f"denied {rid} for p1"
        stale = cli("respond", "p1", rid, "allow", "--json")
        assert stale.returncode == 9 and json.loads(stale.stdout)["code"] == "unknown_request"
        events_until(conn, is_state("idle"))
        conn.send("host.send", {"input": "/sleep 60"})
        events_until(conn, is_state("running"))
        interrupted = cli("interrupt", "p1")
        assert interrupted.returncode == 0 and "interrupt request" in interrupted.stdout
        events_until(conn, is_state("idle"))
