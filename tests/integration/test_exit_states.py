"""How an agent's end is reported: a requested stop is not a failure (issue 12, item 3).

Like systemd's default: after a stop was requested, a death by that stop's SIGTERM (or
by SIGINT, or exit status 0) is a clean stop, state ``done``, with ``exit_code`` and
``signal`` still reported. A death nobody asked for, and a SIGKILL (an escalation or a
forced stop), is an error, and an ``error`` event says why. Real agents, real signals.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import HostFactory
from daemontools import daemon_world
from hosttools import HostProc, RawConn, lines_agent, pid_gone, wait_for

SLEEPER = ["sh", "-c", "sleep 1000"]  # dies of SIGTERM: no handler
IGNORES_TERM = (
    "import signal, sys\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)
TRAPS_TERM = "trap 'exit 0' TERM; echo ready; sleep 1000 & wait"  # exits 0 on SIGTERM


def final_events(host: HostProc, state: str) -> list[dict[str, Any]]:
    """Every event of the stream up to the final state event."""
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        events: list[dict[str, Any]] = []
        while not events or events[-1].get("state") != state:
            events.append(conn.frame())
    return events


def errors_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["error"] for e in events if e["type"] == "error"]


def stop(conn: RawConn, **payload: Any) -> dict[str, Any]:
    resp = conn.request("host.stop", payload)
    assert resp["success"], resp
    stopped: dict[str, Any] = resp["payload"]
    return stopped


def logged(host: HostProc, event: str) -> list[dict[str, Any]]:
    """The host's JSON log records named ``event``."""
    records = [json.loads(line) for line in host.log().splitlines() if line.startswith("{")]
    return [r for r in records if r.get("event") == event]


def test_stop_of_a_program_that_dies_of_sigterm_is_done(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=SLEEPER)
    with host.raw() as conn:
        p = stop(conn, timeout=10)
    assert p["final_state"] == "done"
    assert p["exit_code"] == -15 and p["signal"] == "SIGTERM" and p["graceful"] is True
    assert host.wait_exit() == 0
    assert [r["state"] for r in logged(host, "agent.state")] == ["running", "done"]


def test_sigterm_to_the_host_is_a_clean_stop(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=SLEEPER)
    agent_pid = host.agent()["pid"]
    host.signal(signal.SIGTERM)
    assert host.wait_exit() == 0 and pid_gone(agent_pid)
    (exited,) = logged(host, "agent.exited")
    assert exited["exit_code"] == -15 and exited["signal"] == "SIGTERM"
    assert [r["state"] for r in logged(host, "agent.state")] == ["running", "done"]


def test_stop_that_exits_0_on_sigterm_is_done(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", TRAPS_TERM])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
    with host.raw() as conn:
        p = stop(conn, timeout=10)
    assert p["final_state"] == "done" and p["exit_code"] == 0 and "signal" not in p


def test_sigkill_escalation_is_an_error(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=lines_agent(IGNORES_TERM))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
        p = stop(conn, timeout=0.3)
        events = [conn.frame() for _ in range(2)]  # the live error and state events
    assert p["final_state"] == "error" and p["graceful"] is False
    assert p["exit_code"] == -9 and p["signal"] == "SIGKILL"
    assert [e["type"] for e in events] == ["error", "state"]
    assert "SIGKILL" in events[0]["error"] and "did not end it" in events[0]["error"]
    assert events[1]["state"] == "error"


def test_forced_stop_is_an_error(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=["cat"])
    with host.raw() as conn:
        p = stop(conn, force=True)
    assert p["final_state"] == "error" and p["signal"] == "SIGKILL" and not p["graceful"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_nobody_asked_for_is_an_error(host_factory: HostFactory, sig: int) -> None:
    host = host_factory("a1", "--agent", "lines", command=SLEEPER)
    os.killpg(host.agent()["pid"], sig)  # not through the host: nobody asked it to stop
    agent = host.wait_state("done", "error")
    assert agent["state"] == "error"
    assert agent["exit_code"] == -sig and agent["signal"] == sig.name
    assert errors_of(final_events(host, "error")) == [f"agent exited with signal {sig.name}"]
    with host.raw() as conn:  # stopping it afterwards does not make it clean
        p = stop(conn)
    assert p["final_state"] == "error" and p["exit_code"] == -sig


def test_exit_0_without_a_stop_is_done(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=["true"])
    agent = host.wait_state("done", "error")
    assert agent["state"] == "done" and agent["exit_code"] == 0 and "signal" not in agent
    assert errors_of(final_events(host, "done")) == []


def test_exit_code_other_than_0_on_stop_is_an_error(host_factory: HostFactory) -> None:
    code = "trap 'exit 3' TERM; echo ready; sleep 1000 & wait"
    host = host_factory("a1", "--agent", "lines", command=["sh", "-c", code])
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "ready")
        p = stop(conn, timeout=10)
        (error,) = errors_of([conn.frame()])
    assert p["final_state"] == "error" and p["exit_code"] == 3
    assert error == "agent exited with exit code 3 when asked to stop"


def test_demo_agent_ends_cleanly_on_sigterm(host_factory: HostFactory) -> None:
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "hello"})
        conn.read_until(lambda f: f.get("type") == "result")  # its main loop runs
    with host.raw() as conn:
        p = stop(conn, timeout=10)
    # the demo catches SIGTERM and exits 0
    assert p["final_state"] == "done" and p["exit_code"] == 0 and p["graceful"] is True


def test_demo_stopped_while_it_starts_is_done(host_factory: HostFactory) -> None:
    # before its handler is installed the demo dies of the SIGTERM: clean all the same
    host = host_factory("d1", "--agent", "demo")
    with host.raw() as conn:
        p = stop(conn, timeout=10)
    assert p["final_state"] == "done" and p["exit_code"] in (0, -15) and p["graceful"] is True


def test_on_failure_does_not_restart_a_cleanly_stopped_agent(home: Path) -> None:
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        policy = {"policy": "on-failure", "max_restarts": 3, "backoff": 0.05}
        world.spawn("c1", SLEEPER, restart=policy)
        wait_for(lambda: world.agents()["c1"]["state"] == "running", what="c1 running")
        stopped = world.cli("stop", "c1", "--json")  # through the host, as users do
        assert stopped.returncode == 0 and json.loads(stopped.stdout)["final_state"] == "done"
        agent = wait_for(
            lambda: (a := world.agents()["c1"])["status"] not in ("running", "starting") and a,
            what="c1 ended",
        )
        assert agent["status"] == "exited" and agent["restarts"] == 0
        assert agent["state"] == "done" and agent["signal"] == "SIGTERM"


def test_on_failure_does_not_restart_a_stop_that_had_to_kill(home: Path) -> None:
    # `agenthost stop` goes to the host, not the daemon; the agent ignores SIGTERM, so
    # the stop ends with SIGKILL: an error, but one somebody asked for
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        policy = {"policy": "on-failure", "max_restarts": 3, "backoff": 0.05}
        world.spawn("k1", [sys.executable, "-c", IGNORES_TERM], restart=policy)
        wait_for(lambda: world.agents()["k1"]["state"] == "running", what="k1 running")
        stopped = world.cli("stop", "k1", "--timeout", "0.5", "--json")
        assert stopped.returncode == 0, stopped.stderr
        result = json.loads(stopped.stdout)
        assert result["final_state"] == "error" and result["graceful"] is False
        agent = wait_for(
            lambda: (a := world.agents()["k1"])["status"] not in ("running", "starting") and a,
            what="k1 ended",
        )
        assert agent["status"] == "exited" and agent["restarts"] == 0, agent
        assert agent["signal"] == "SIGKILL"
        status = world.cli("status", "k1", "--json")
        if status.returncode == 0:  # the host may linger: it says why the agent ended
            assert json.loads(status.stdout)["agent"]["stop_requested"] is True
