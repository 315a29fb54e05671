"""The attach guarantees (DESIGN.md section 3), with real hosts and agents producing.

The flood agent prints consecutive integers, so besides checking that offsets are
contiguous we can check that the *content* has no gap and no duplicate either.

What the in-memory proofs of the wire layer already show is not repeated here with
processes: truncation for every requested offset (tests/unit/test_wire_stream.py
test_plan_attach, and the AttachStream machine of test_wire_stream_machine.py), detach
(test_wire_stream.py test_no_event_follows_the_detach_response and test_detach_unregisters,
test_host_dispatch.py test_detach_ends_the_stream_and_answers; over a socket:
test_client.py, test_permissions.py) and a paused client caught up from the ring
(test_wire_stream.py test_a_slow_client_lags_and_is_served_from_the_ring_in_slices; with
processes and stuck sockets: tests/reliability/test_rel_slow_clients.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.cli.common import Exit

from conftest import HostFactory
from daemontools import daemon_world
from hosttools import DEADLINE, PY, RawConn, assert_contiguous, lines_agent, wait_for


@pytest.fixture(params=["exec", "fork"])
def start_by(request: pytest.FixtureRequest) -> str:
    """Every guarantee here holds for an exec'd host and for one the host factory forked
    (DESIGN.md section 9: clients cannot tell them apart)."""
    return str(request.param)


def flood_code(n: int, burst: int = 0, pause: float = 0.0) -> list[str]:
    """An agent that waits for one input line, then prints 1..n (in bursts), then waits."""
    code = (
        "import sys, time\n"
        f"n, burst, pause = {n}, {burst}, {pause}\n"
        "sys.stdin.readline()\n"
        "for i in range(1, n + 1):\n"
        "    sys.stdout.write(f'{i}\\n')\n"
        "    if burst and i % burst == 0:\n"
        "        sys.stdout.flush()\n"
        "        time.sleep(pause)\n"
        "sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
    )
    return lines_agent(code)


def read_until_data(conn: RawConn, last: str) -> list[dict[str, Any]]:
    """Events until an output event whose data is ``last`` (responses are skipped)."""
    events: list[dict[str, Any]] = []
    while True:
        f = conn.frame()
        if f["kind"] == "response":
            assert f["success"], f
            continue
        events.append(f)
        if f["type"] == "output" and f["data"] == last:
            return events


def check_stream(events: list[dict[str, Any]], first_offset: int) -> None:
    """Offsets contiguous from ``first_offset``; output data consecutive integers."""
    assert_contiguous([e["offset"] for e in events], first_offset)
    numbers = [int(e["data"]) for e in events if e["type"] == "output"]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) if numbers else True


def test_attach_at_zero_mid_ring_and_head_while_producing(host_factory: HostFactory) -> None:
    n = 30_000
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--ring-size",
        "100000",
        "--ring-bytes",
        "100000000",
        command=flood_code(n, burst=500, pause=0.002),
    )
    with host.raw() as starter:
        starter.request("host.attach", {"offset": 0})
        starter.send("host.send", {"input": "go"})
        # let production get going, then attach three ways while it continues
        starter.read_until(lambda f: f.get("data") == "1000")
        conns = {name: host.raw() for name in ("zero", "mid", "head")}
        try:
            r0 = conns["zero"].request("host.attach", {"offset": 0})["payload"]
            mid = r0["stream_offset"] // 2
            rm = conns["mid"].request("host.attach", {"offset": mid})["payload"]
            rh = conns["head"].request("host.attach", {"offset": 10**9})["payload"]
            assert r0["truncated"] is rm["truncated"] is rh["truncated"] is False
            assert r0["oldest_offset"] == 1
            streams = {name: read_until_data(c, str(n)) for name, c in conns.items()}
        finally:
            for c in conns.values():
                c.close()
    check_stream(streams["zero"], 1)
    check_stream(streams["mid"], mid + 1)
    # beyond the head: no replay; live from the event after the head at attach time
    check_stream(streams["head"], rh["stream_offset"] + 1)
    assert streams["head"][0]["offset"] > streams["mid"][0]["offset"]
    assert streams["zero"][-1]["offset"] == streams["mid"][-1]["offset"]


def test_attach_before_evicted_range_while_producing(host_factory: HostFactory) -> None:
    # without a journal, events evicted from the ring are gone (test_journal.py: with one)
    n = 20_000
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--no-journal",
        "--ring-size",
        "500",
        command=flood_code(n, 200, 0.002),
    )
    with host.raw() as starter:
        starter.request("host.attach", {"offset": 10**9})
        starter.send("host.send", {"input": "go"})
        starter.read_until(lambda f: f.get("data") == "3000")
        with host.raw() as conn:
            resp = conn.request("host.attach", {"offset": 5})["payload"]
            events = read_until_data(conn, str(n))
    assert resp["truncated"] is True
    # the first event delivered is the oldest kept at attach time
    assert events[0]["offset"] == resp["oldest_offset"] > 6
    check_stream(events, resp["oldest_offset"])


def test_many_concurrent_attaches_each_get_exact_ranges(host_factory: HostFactory) -> None:
    n = 20_000
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--ring-size",
        "100000",
        "--ring-bytes",
        "100000000",
        command=flood_code(n, 100, 0.001),
    )
    results: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    errors: list[BaseException] = []

    def reader(index: int, offset: int) -> None:
        try:
            with host.raw() as conn:
                resp = conn.request("host.attach", {"offset": offset})["payload"]
                start = min(offset, resp["stream_offset"]) + 1
                results[index] = (start, read_until_data(conn, str(n)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    with host.raw() as starter:
        starter.request("host.attach", {"offset": 0})
        starter.send("host.send", {"input": "go"})
        threads = []
        for i, target in enumerate((1, 500, 2000, 5000, 9000, 14000)):
            starter.read_until(lambda f, t=target: f.get("data") == str(t))
            t = threading.Thread(target=reader, args=(i, target * (i % 2)))
            t.start()
            threads.append(t)
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert len(results) == 6
    for start, events in results.values():
        check_stream(events, start)


def test_slow_client_dropped_fast_client_loses_nothing(host_factory: HostFactory) -> None:
    # without a journal a client that falls out of the ring is dropped (with one it is
    # caught up from the journal: test_journal.py). The flood's pace leaves the reading
    # client half a second of slack (5,000 events at 10,000/s): a pause of this test's
    # process (its collector, the machine) must not make it a slow client too.
    n = 20_000
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--no-journal",
        "--ring-size",
        "5000",
        "--client-buffer",
        "16384",
        command=flood_code(n, 100, 0.01),
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(str(host.socket_path))
        slow.sendall(b'{"type":"host.attach","id":"s","payload":{"offset":0}}\n')
        with host.raw() as fast:
            fast.request("host.attach", {"offset": 0})
            fast.send("host.send", {"input": "go"})
            events = read_until_data(fast, str(n))
        check_stream(events, 1)
        assert sum(e["type"] == "output" for e in events) == n
        wait_for(lambda: "client.dropped" in host.log(), what="slow client dropped")
        # what the slow client did get is a clean prefix of the stream, then EOF/reset
        data = b""
        slow.settimeout(10)
        with contextlib.suppress(ConnectionResetError):
            while chunk := slow.recv(1 << 16):
                data += chunk
    frames = [json.loads(line) for line in data.split(b"\n") if line.strip()]
    received = [f for f in frames if f["kind"] == "event"]
    last = received[-1]["offset"] if received else 0
    assert_contiguous([e["offset"] for e in received], 1) if received else None
    # it reattaches from its last offset: the gap is reported, nothing else is lost
    with host.raw() as again:
        resp = again.request("host.attach", {"offset": last})["payload"]
        assert resp["truncated"] is True and resp["oldest_offset"] > last + 1
        replay = again.events(resp["stream_offset"])
    assert_contiguous([e["offset"] for e in replay], resp["oldest_offset"], resp["stream_offset"])


def test_requests_interleaved_with_events_on_one_connection(host_factory: HostFactory) -> None:
    n = 5_000
    host = host_factory("a1", "--agent", "lines", command=flood_code(n, 50, 0.001))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "go"})
        ids = [conn.send(t) for t in ("host.ping", "host.status", "host.history", "host.list")]
        ids.append(conn.send("host.bogus"))
        responses: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        while not (events and events[-1].get("data") == str(n)):
            f = conn.frame()
            (responses if f["kind"] == "response" else events).append(f)
    # responses in request order (the send's first), events contiguous in between
    assert [r["id"] for r in responses[1:]] == ids
    assert [r["success"] for r in responses] == [True, True, True, True, True, False]
    assert responses[-1]["code"] == "unknown_type"
    check_stream(events, 1)


def test_epoch_names_the_stream(host_factory: HostFactory) -> None:
    # without a journal every host starts a new stream (with one, a new host for the
    # same agent continues the journal's stream: test_journal.py)
    host = host_factory("a1", "--agent", "lines", "--no-journal", command=["cat"])
    with host.raw() as c1, host.raw() as c2:
        e1 = c1.request("host.attach")["payload"]["epoch"]
        e2 = c2.request("host.attach", {"offset": 3})["payload"]["epoch"]
        assert e1 == e2 and len(e1) >= 16
        c1.request("host.stop", {"force": True})
    host.wait_exit()
    again = host_factory("a1", "--agent", "lines", "--no-journal", command=["cat"])
    with again.raw() as c3:
        assert c3.request("host.attach")["payload"]["epoch"] != e1


def test_over_long_line_arrives_whole_in_chunks(host_factory: HostFactory) -> None:
    size = 50_000_000
    code = (
        "import sys\n"
        "sys.stdin.readline()\n"
        f"sys.stdout.write('x' * {size} + '\\n')\n"
        "print('after', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn, host.raw() as other:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "go"})
        total, chunks = 0, 0
        while True:
            f = conn.frame()
            if f.get("type") != "output":
                continue
            if f["data"] == "after":
                break
            total += len(f["data"])
            chunks += 1
            assert len(f["data"]) <= 1 << 20
            assert f.get("continued", False) is (total < size)
            # the host stays responsive while the line streams through
            if chunks == 10:
                assert other.request("host.ping")["success"]
    assert total == size and chunks >= 48
    status = host.status()
    assert status["agent"]["state"] == "running"


# --- `agenthost attach` ends on the current agent's end, not on a replayed one ----------


class AttachProc:
    """``agenthost attach ID --json`` in a subprocess; its events read by a thread, so
    every wait has a deadline."""

    def __init__(self, home: Path, agent_id: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "agenthost", "attach", agent_id, "--json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**(env or os.environ), "AGENTHOST_HOME": str(home)},
        )
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def until(self, what: str, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event (after those read so far) matching ``predicate``; fails if
        attach exits first or nothing matches within the deadline."""
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"attach showed no {what} in {DEADLINE}s") from None
            if line is None:
                raise AssertionError(f"attach ended before {what}: {self.stderr()}")
            event: dict[str, Any] = json.loads(line)
            self.events.append(event)
            if predicate(event):
                return event

    def wait(self) -> int:
        return self.proc.wait(DEADLINE)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)
        self._reader.join(DEADLINE)  # it reads stdout up to the end
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


ECHO = lines_agent(
    "import sys\n"
    "for line in sys.stdin:\n"
    "    if line.startswith('exit '):\n"
    "        sys.exit(int(line[5:]))\n"
    "    print('echo ' + line.strip(), flush=True)\n"
)
"""Echoes each line it reads; ``exit N`` exits with status N."""


def output(data: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "output" and e.get("data") == data


def in_state(*states: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "state" and e["state"] in states


def test_attach_to_an_id_run_again_follows_the_current_run(
    host_factory: HostFactory, home: Path
) -> None:
    first = host_factory("r1", "--agent", "lines", "--linger", "0", command=ECHO)
    with first.raw() as conn:
        conn.request("host.send", {"input": "exit 0"})
    first.wait_exit()
    second = host_factory("r1", "--agent", "lines", command=ECHO)  # the same stream goes on
    attach = AttachProc(home, "r1")
    try:
        # the replay holds the first run's end: history, not the end of the session
        attach.until("the first run's end", in_state("done"))
        attach.until("the second run's start", in_state("running"))
        with second.raw() as conn:
            conn.request("host.send", {"input": "still here"})
        attach.until("a live event", output("echo still here"))
        with second.raw() as conn:
            conn.request("host.send", {"input": "exit 3"})
        attach.until("the current run's end", in_state("error"))
        assert attach.wait() == Exit.AGENT_FAILED  # and now it ends, on the live end
        assert attach.events[-1]["state"] == "error"
    finally:
        attach.close()


def test_attach_follows_a_daemon_restart_and_ends_when_it_gives_up(home: Path) -> None:
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        policy = {"policy": "on-failure", "max_restarts": 1, "backoff": 0.05}
        world.spawn("d1", ECHO, restart=policy)
        attach = AttachProc(home, "d1", world.env)
        try:
            attach.until("the start", in_state("running"))
            assert world.cli("send", "d1", "exit 3").returncode == 0
            attach.until("the first run's end", in_state("error"))
            # the daemon starts a new host under the same id: attach follows it
            attach.until("the restarted run", in_state("running"))
            assert world.agents()["d1"]["restarts"] == 1
            assert world.cli("send", "d1", "after the restart").returncode == 0
            attach.until("a live event of the new run", output("echo after the restart"))
            # a second failure reaches the limit: nothing restarts it, attach ends
            assert world.cli("send", "d1", "exit 4").returncode == 0
            attach.until("the second run's end", in_state("error"))
            assert attach.wait() == Exit.AGENT_FAILED
        finally:
            attach.close()
        assert world.agents()["d1"]["status"] == "failed"
        offsets = [e["offset"] for e in attach.events]
        assert offsets == list(range(1, len(offsets) + 1))  # one stream, nothing twice


def test_attach_during_a_restart_backoff_waits_for_the_new_host(home: Path) -> None:
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        policy = {"policy": "on-failure", "max_restarts": 1, "backoff": 5.0}
        world.spawn("d1", ECHO, restart=policy)
        assert world.cli("send", "d1", "exit 3").returncode == 0
        wait_for(lambda: world.agents()["d1"]["status"] == "restarting", what="the backoff")
        assert "d1" not in world.host_pids()  # no host to attach to: attach waits
        attach = AttachProc(home, "d1", world.env)
        try:
            attach.until("the first run's end", in_state("error"))
            attach.until("the restarted run", in_state("running"))
            assert world.cli("send", "d1", "exit 0").returncode == 0
            attach.until("the end", in_state("done"))
            assert attach.wait() == Exit.OK
        finally:
            attach.close()
