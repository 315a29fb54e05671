"""Terminal agents (``--agent pty``) on a real host: a real pseudo-terminal, real
signals, the stream's exactly-once promise for terminal bytes (docs/terminal.md)."""

from __future__ import annotations

import base64
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agenthost.terminal.chunks import event_bytes
from agenthost.terminal.screen import Screen

from conftest import HostFactory
from hosttools import HostProc, RawConn, assert_contiguous, cli, start_host, wait_for

PROBE = [sys.executable, str(Path(__file__).parents[1] / "fixtures" / "tty_probe.py")]
Event = dict[str, Any]


OPEN: list[RawConn] = []


@pytest.fixture(autouse=True)
def _close_terminals() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


class Terminal:
    """An attached connection that keeps every terminal byte it was sent."""

    def __init__(self, host: HostProc, **attach: Any) -> None:
        self.conn = host.raw(timeout=30)
        OPEN.append(self.conn)
        answer = self.conn.request("host.attach", attach or {"offset": 0})
        assert answer["success"], answer
        self.answer = answer["payload"]
        self.events: list[Event] = []
        self.data = b""

    def pump_until(self, needle: bytes, count: int = 1) -> None:
        """Read events until the terminal bytes hold ``needle`` (``count`` times)."""
        while self.data.count(needle) < count:
            frame = self.conn.frame()
            if frame.get("kind") != "event":
                continue
            self.events.append(frame)
            if frame["type"] == "terminal":
                self.data += event_bytes(frame)

    def type(self, text: str) -> None:
        assert self.conn.request("host.input", {"data": text})["success"]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def probe(host_factory: HostFactory) -> HostProc:
    return host_factory("t1", "--agent", "pty", command=PROBE)


def test_the_agent_runs_in_a_terminal_of_its_own(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    facts = b"isatty=True ctty=True leader=True size=80x24 TERM=xterm-256color"
    assert facts in term.data
    kinds = [e["type"] for e in term.events]
    # the size is on record before the first byte, so a replay paints at the right size
    assert kinds.index("terminal_size") < kinds.index("terminal")
    size = next(e for e in term.events if e["type"] == "terminal_size")
    assert (size["cols"], size["rows"]) == (80, 24)
    assert probe.agent()["terminal"] == {"cols": 80, "rows": 24}
    assert probe.agent()["backend"] == "pty"
    assert_contiguous([e["offset"] for e in term.events], term.events[0]["offset"])


def test_keys_reach_it_and_are_not_published(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    term.type("secret-word\r")
    term.pump_until(b"you said: secret-word")
    # no event but the terminal's own echo carries what was typed: no chat entry, no
    # input event (keys may be passwords)
    assert all(e["type"] in ("terminal", "terminal_size", "state") for e in term.events)
    with probe.raw() as conn:
        assert conn.request("host.history", {"limit": 10})["payload"]["entries"] == []


def test_send_types_a_line_and_interrupt_types_ctrl_c(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    with probe.raw() as conn:
        assert conn.request("host.send", {"input": "from send"})["success"]
        term.pump_until(b"you said: from send")
        assert conn.request("host.interrupt")["payload"] == {"sent": True, "method": "control"}
    term.pump_until(b"got SIGINT")  # Ctrl-C through the line discipline


def test_the_latest_client_to_resize_or_type_sets_the_size(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    with probe.raw() as a, probe.raw() as b:
        assert a.request("host.resize", {"cols": 100, "rows": 30})["payload"] == {
            "cols": 100,
            "rows": 30,
        }
        term.pump_until(b"winch 100x30")
        assert b.request("host.resize", {"cols": 120, "rows": 40})["payload"]["cols"] == 120
        term.pump_until(b"winch 120x40")
        assert probe.agent()["terminal"] == {"cols": 120, "rows": 40}
        # a typing client takes its size back
        assert a.request("host.input", {"data": "size\r"})["success"]
        term.pump_until(b"size 100x30")
        # the same size again changes nothing: no event, no signal
        before = len([e for e in term.events if e["type"] == "terminal_size"])
        assert a.request("host.resize", {"cols": 100, "rows": 30})["success"]
    term.type("size\r")
    term.pump_until(b"size 100x30", count=2)
    sizes = [(e["cols"], e["rows"]) for e in term.events if e["type"] == "terminal_size"]
    assert len(sizes) == before and sizes[-3:] == [(100, 30), (120, 40), (100, 30)]
    with probe.raw() as conn:
        screen = conn.request("host.screen")["payload"]
    assert (screen["cols"], screen["rows"]) == (100, 30)


def test_a_fixed_size_ignores_clients(host_factory: HostFactory) -> None:
    host = host_factory("t1", "--agent", "pty", "--size", "90x20", command=PROBE)
    term = Terminal(host)
    term.pump_until(b"ready")
    assert b"size=90x20" in term.data
    with host.raw() as conn:
        assert conn.request("host.resize", {"cols": 120, "rows": 40})["payload"] == {
            "cols": 90,
            "rows": 20,
        }
    term.type("size\r")
    term.pump_until(b"size 90x20")


def test_signal_reaches_the_foreground_group(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    with probe.raw() as conn:
        assert conn.request("host.signal", {"signal": "SIGINT"})["payload"] == {"sent": True}
    term.pump_until(b"got SIGINT")
    with probe.raw() as conn:
        assert conn.request("host.signal", {"signal": "SIGTERM"})["payload"] == {"sent": True}
    probe.wait_state("error", "done")


def test_bytes_that_are_not_utf8_travel_in_base64_and_characters_are_never_cut(
    probe: HostProc,
) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    term.type("bytes\r")
    term.pump_until(b"bad[\xff\xfe]")
    coded = [e for e in term.events if "data_b64" in e]
    assert coded and all("data" not in e for e in coded)
    assert b"\xff\xfe" in b"".join(base64.b64decode(e["data_b64"]) for e in coded)
    term.type("split\r")
    term.pump_until("euro[\u20ac]".encode())
    # the euro sign's halves were read apart, yet no event holds half of it
    split = [e for e in term.events if e["offset"] > coded[-1]["offset"]]
    assert all("data" in e for e in split if e["type"] == "terminal")
    assert any(e.get("data", "").startswith("\u20ac]") for e in split)


def test_a_snapshot_then_the_events_after_it_are_exactly_once(probe: HostProc) -> None:
    first = Terminal(probe)
    first.pump_until(b"ready")
    first.type("one\r")
    first.pump_until(b"you said: one")
    late = Terminal(probe, snapshot=True)
    screen = late.answer["screen"]
    assert "you said: one" in screen["lines"]
    first.type("two\r")
    late.pump_until(b"you said: two")
    offsets = [e["offset"] for e in late.events]
    assert offsets[0] == screen["offset"] + 1
    assert_contiguous(offsets, screen["offset"] + 1)
    # the snapshot's paint and the bytes after it give the host's own screen
    painted = Screen(screen["cols"], screen["rows"])
    painted.feed(screen["dump"].encode())
    for event in late.events:
        if event["type"] == "terminal":
            painted.feed(event_bytes(event))
    head = offsets[-1]
    with probe.raw() as conn:
        now = conn.request("host.screen", {"offset": head})["payload"]
    assert now["offset"] == head
    assert painted.lines() == now["lines"]
    assert painted.cursor()[:2] == (now["cursor"]["col"], now["cursor"]["row"])


def test_the_screen_as_of_an_older_offset(probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    term.type("before\r")
    term.pump_until(b"you said: before")
    with probe.raw() as conn:
        then = conn.request("host.screen")["payload"]
    term.type("after\r")
    term.pump_until(b"you said: after")
    with probe.raw() as conn:
        again = conn.request("host.screen", {"offset": then["offset"]})["payload"]
        now = conn.request("host.screen")["payload"]
    assert again["lines"] == then["lines"] and again["offset"] == then["offset"]
    assert "you said: after" in now["lines"] and now["offset"] > then["offset"]


def test_a_host_killed_and_restarted_on_its_journal_keeps_the_screen(
    home: Path, probe: HostProc
) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    term.type("remember me\r")
    term.pump_until(b"you said: remember me")
    with probe.raw() as conn:
        before = conn.request("host.screen")["payload"]
    term.close()
    probe.signal(signal.SIGKILL)
    probe.wait_exit()
    again = start_host(home, "t1", "--agent", "pty", command=PROBE)
    try:
        with again.raw() as conn:
            kept = conn.request("host.screen", {"offset": before["offset"]})["payload"]
        assert kept["lines"] == before["lines"]

        def screen_now() -> list[str]:
            with again.raw() as conn:
                lines: list[str] = conn.request("host.screen")["payload"]["lines"]
            return lines

        # the new agent paints on the screen the old one left
        lines = wait_for(lambda: (s := screen_now()).count("ready") == 2 and s)
        assert lines.index("you said: remember me") < len(lines) - 1 - lines[::-1].index("ready")
    finally:
        again.proc.kill()
        again.proc.wait()


def test_a_stop_hangs_up_a_shell_that_ignores_sigterm(host_factory: HostFactory) -> None:
    host = host_factory("sh1", "--agent", "pty", command=["bash", "--norc", "--noprofile", "-i"])
    term = Terminal(host)
    term.type("echo up-$((20+22))\r")
    term.pump_until(b"up-42")
    with host.raw() as conn:
        answer = conn.request("host.stop", {"timeout": 60})["payload"]
    assert answer["graceful"] is True and answer["final_state"] == "done"
    assert answer["signal"] == "SIGHUP"


def test_ten_clients_get_a_flood_byte_for_byte(probe: HostProc) -> None:
    clients = [Terminal(probe) for _ in range(10)]
    clients[0].pump_until(b"ready")
    lines = 100_000  # 7.3 MB through the terminal
    clients[0].type(f"flood {lines}\r")
    expected = b"".join(b"line %07d " % i + b"x" * 60 + b"\r\n" for i in range(lines))
    peak = 0
    for term in clients:
        term.pump_until(b"flood done")
        peak = max(peak, psutil.Process(probe.pid).memory_info().rss)
        start = term.data.index(b"line 0000000 ")
        assert term.data[start : start + len(expected)] == expected
        assert_contiguous([e["offset"] for e in term.events], term.events[0]["offset"])
    print(f"host RSS at the flood's end: {peak / 2**20:.1f} MiB")
    assert peak < 200 * 2**20  # bounded by the ring and client buffers, not the flood


@pytest.mark.parametrize(
    ("mtype", "payload"),
    [
        ("host.input", {}),
        ("host.input", {"data": "a", "data_b64": "YQ=="}),
        ("host.input", {"data_b64": "not base64!"}),
        ("host.input", {"data": 7}),
        ("host.resize", {"cols": 0, "rows": 10}),
        ("host.resize", {"cols": 80, "rows": 100_000}),
        ("host.resize", {"cols": "80", "rows": 24}),
        ("host.signal", {"signal": "SIGFOO"}),
        ("host.signal", {"signal": 9}),
        ("host.screen", {"offset": 0}),
        ("host.screen", {"offset": "1"}),
        ("host.attach", {"snapshot": "yes"}),
    ],
)
def test_garbage_in_terminal_requests(probe: HostProc, mtype: str, payload: Any) -> None:
    with probe.raw() as conn:
        answer = conn.request(mtype, payload)
        assert not answer["success"] and answer["code"] == "invalid_payload", answer
        assert conn.request("host.ping")["success"]  # the connection goes on
    assert probe.agent()["state"] in ("running", "idle")


@pytest.mark.parametrize(
    ("mtype", "payload"),
    [
        ("host.input", {"data": "x"}),
        ("host.resize", {"cols": 80, "rows": 24}),
        ("host.signal", {"signal": "SIGINT"}),
        ("host.screen", {}),
        ("host.attach", {"snapshot": True}),
    ],
)
def test_terminal_requests_to_an_agent_without_a_terminal(
    host_factory: HostFactory, mtype: str, payload: Any
) -> None:
    host = host_factory("l1", "--agent", "lines", command=["cat"])
    with host.raw() as conn:
        answer = conn.request(mtype, payload)
    assert not answer["success"] and answer["code"] == "invalid_payload"
    assert "not a terminal agent" in answer["error"]


def test_export_as_asciicast_and_as_text(home: Path, probe: HostProc) -> None:
    term = Terminal(probe)
    term.pump_until(b"ready")
    with probe.raw() as conn:
        assert conn.request("host.resize", {"cols": 70, "rows": 12})["success"]
    term.pump_until(b"winch 70x12")
    for word in ("one", "two"):
        term.type(f"{word}\r")
        term.pump_until(f"you said: {word}".encode())
    term.type("flood 30\r")  # more than 12 rows: lines scroll off the screen
    term.pump_until(b"flood done")
    with probe.raw() as conn:
        screen = conn.request("host.screen")["payload"]
    cast = cli(home, "export", "t1", "--format", "asciicast")
    assert cast.returncode == 0, cast.stderr
    header, *frames = (json.loads(line) for line in cast.stdout.splitlines())
    assert header["version"] == 2 and (header["width"], header["height"]) == (80, 24)
    assert header["title"] == "t1" and header["env"]["TERM"] == "xterm-256color"
    times = [frame[0] for frame in frames]
    assert times == sorted(times) and {frame[1] for frame in frames} == {"o", "r"}
    assert ["r", "70x12"] in [frame[1:] for frame in frames]
    # played back, the recording paints the screen the host has
    played = Screen(80, 24)
    for _, kind, data in frames:
        if kind == "o":
            played.feed(data.encode())
        else:
            played.resize(*map(int, data.split("x")))
    assert played.lines() == screen["lines"]
    text = cli(home, "export", "t1", "--format", "text")
    assert text.returncode == 0, text.stderr
    shown = text.stdout.splitlines()
    # everything the terminal showed, the lines that scrolled off too, escapes gone
    assert "you said: one" in shown and shown[-1] == [ln for ln in screen["lines"] if ln][-1]
    assert [line for line in shown if line.startswith("line 0000000")]
    assert "\x1b" not in text.stdout


def test_export_of_an_agent_without_a_terminal_says_so(
    home: Path, host_factory: HostFactory
) -> None:
    host = host_factory("l1", "--agent", "lines", command=["cat"])
    with host.raw() as conn:
        assert conn.request("host.send", {"input": "hi"})["success"]
    for fmt in ("asciicast", "text"):
        done = cli(home, "export", "l1", "--format", fmt)
        assert done.returncode != 0 and "no terminal output" in done.stderr
