"""The daemon's backfill (issue 13, items 1 and 3), with a real daemon and flooding agents.

* A watch from offset 0 while the agent prints thousands of events per second gets
  every offset from 1, once, in order: the backfill meets the live buffer whatever the
  buffer evicted meanwhile.
* The same after a daemon kill -9 and restart with more than the buffer's 1000 events
  of downtime.
* A watch from 0 over a 64 MiB journal with a watcher that does not read: the answer
  comes at once, and the daemon's memory stays far below the journal's size.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemontools import DaemonWorld, StreamCollector, daemon_world, flood_command
from hosttools import RawConn, wait_for

MiB = 1 << 20


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


def host_head(world: DaemonWorld, agent_id: str) -> int:
    """The last offset the agent's host has assigned (asked of the host itself)."""
    with RawConn(world.home / "hosts" / f"{agent_id}.sock") as host:
        response = host.request("host.attach", {"offset": 1 << 62})  # beyond the head
        return int(response["payload"]["stream_offset"])


def same_event(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same event, whoever encoded it (timestamps compared as instants)."""

    def norm(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "timestamp": datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))}

    return norm(a) == norm(b)


def test_a_watch_from_0_during_a_flood_gets_every_offset_once(world: DaemonWorld) -> None:
    world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    live = StreamCollector(world)  # the daemon's live frames, to compare with
    count = 20_000
    world.spawn("f", flood_command("--count", str(count), "--rate", "4000"))
    last = count + 1  # state "running", then the lines
    wait_for(lambda: world.agents()["f"]["last_offset"] >= 3000, what="the flood under way")
    epoch = world.agents()["f"]["epoch"]
    watch = StreamCollector(world, {"since": {"f": {"epoch": epoch, "offset": 0}}})
    try:
        start = watch.start["f"]
        assert start["from_offset"] == 0 and start["truncated"] is False
        assert start["oldest_offset"] > 1000  # the buffer had evicted: a backfill
        assert start["stream_offset"] < last  # and the agent printed on during it
        watch.wait(lambda c: c.count("f") >= last or c.closed, 60, "the whole flood")
        live.wait(lambda c: c.count("f") >= last, 60, "the whole flood, live")
    finally:
        watch.close()
        live.close()
    assert watch.offsets("f") == list(range(1, last + 1))  # each offset once, in order
    assert not [n for n in watch.notices if n["type"] == "gap"]
    # the backfilled events (the host's bytes) say what the live ones (the daemon's) say
    backfilled, forwarded = watch.events["f"], live.events["f"]
    assert forwarded[0]["offset"] == 1
    assert all(same_event(b, f) for b, f in zip(backfilled, forwarded, strict=True))


def test_a_restart_after_a_long_downtime_resumes_exactly(world: DaemonWorld) -> None:
    args = ("--scan-interval", "0", "--flush-interval", "0.1")
    daemon = world.start_daemon(*args)
    first = StreamCollector(world)
    count = 12_000
    last = count + 1
    world.spawn("k", flood_command("--count", str(count), "--rate", "2000"))
    first.wait(lambda c: c.count("k") >= 1500, what="the flood under way")
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    first.drain()
    seen = first.offsets("k")[-1]
    # more than the daemon's buffer (1000 events) is printed while no daemon runs
    wait_for(lambda: host_head(world, "k") > seen + 2500, what="2500 events of downtime")
    assert host_head(world, "k") < last  # and the flood goes on
    world.start_daemon(*args)
    # the new daemon catches up from its recorded position (which trails `seen`) until
    # its buffer has moved past `seen`: the watcher's position needs a backfill
    wait_for(lambda: world.agents()["k"]["last_offset"] > seen + 1500, what="caught up")
    since = {"k": {"epoch": first.epoch("k"), "offset": seen}}
    second = StreamCollector(world, {"since": since})
    try:
        start = second.start["k"]
        assert start["from_offset"] == seen and start["truncated"] is False
        assert start["oldest_offset"] > seen + 1
        second.wait(lambda c: c.count("k") >= last - seen or c.closed, 60, "the flood's end")
    finally:
        second.close()
    assert first.offsets("k") + second.offsets("k") == list(range(1, last + 1))


def read_chars(pid: int) -> int:
    return int(psutil.Process(pid).io_counters().read_chars)


def status_kib(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM`` figure of /proc/PID/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def test_a_watch_over_a_large_journal_is_answered_at_once_in_bounded_memory(
    world: DaemonWorld,
) -> None:
    daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    width, count = 4096, 16_384  # 64 MiB of events
    last = count + 1
    world.spawn("m", flood_command("--count", str(count), "--rate", "0", "--width", str(width)))
    wait_for(lambda: world.agents()["m"]["last_offset"] == last, 90, "the whole flood journaled")
    journal = sum(p.stat().st_size for p in (world.home / "journal" / "m").glob("*.jsonl"))
    assert journal > 64 * MiB
    epoch = world.agents()["m"]["epoch"]
    pid = daemon.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak RSS (VmHWM)
    rss_before = status_kib(pid, "VmRSS")
    cpu_before = sum(psutil.Process(pid).cpu_times()[:2])
    read_before = read_chars(pid)
    started = time.monotonic()
    with world.conn(60) as conn:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        response = conn.request("daemon.watch", {"since": {"m": {"epoch": epoch, "offset": 0}}})
        answered_in = time.monotonic() - started
        assert response["success"] and response["payload"]["agents"]["m"]["truncated"] is False
        # answered before the journal was read: at most what one watcher may queue
        assert read_chars(pid) - read_before < journal // 2
        # a watcher that does not read: the daemon fills its queue, then waits
        wait_for(lambda: read_chars(pid) - read_before > 8 * MiB, what="the queue filled")
        held = status_kib(pid, "VmHWM") - rss_before
        assert held < 64 * 1024, f"the daemon grew by {held} KiB for a non-reading watcher"
        assert read_chars(pid) - read_before < journal // 2
        # then it reads: every event once, in order, with the bytes the host journaled
        first = conn.frame()
        assert first["offset"] == 1
        offsets = [first["offset"]]
        while offsets[-1] < last:
            offsets.append(conn.frame()["offset"])
        assert offsets == list(range(1, last + 1))
    peak = status_kib(pid, "VmHWM") - rss_before
    cpu = sum(psutil.Process(pid).cpu_times()[:2]) - cpu_before
    report = {
        "journal_mib": round(journal / MiB, 1),
        "rss_before_mib": round(rss_before / 1024, 1),
        "peak_growth_mib": round(peak / 1024, 1),
        "cpu_s": round(cpu, 2),
        "answered_ms": round(answered_in * 1000, 1),
    }
    print(json.dumps(report))  # the figures docs/daemon.md quotes (pytest -s shows them)
    assert peak < 64 * 1024, f"the daemon grew by {peak} KiB while backfilling"


def test_a_position_that_falls_out_of_its_buffer_while_another_backfill_opens_is_exact(
    world: DaemonWorld,
) -> None:
    # A's position needs a backfill, and its source is slow to open (its journal gone,
    # its host stopped: the daemon waits for the host up to 5 x the probe timeout).
    # Meanwhile B floods, and B's position, inside B's buffer when the watch came,
    # falls out of it: B must still be served exactly from there, not `truncated`.
    world.start_daemon("--scan-interval", "0", "--watch-buffer", "500", "--probe-timeout", "0.4")
    world.spawn("a", flood_command("--count", "800", "--rate", "0"))
    world.spawn("b", flood_command("--rate", "1000"))
    wait_for(lambda: world.agents()["a"]["last_offset"] >= 801, what="a printed its lines")
    wait_for(lambda: world.agents()["b"]["last_offset"] >= 50, what="b under way")
    agents = world.agents()
    a_host = psutil.Process(agents["a"]["host_pid"])
    shutil.rmtree(world.home / "journal" / "a")
    a_host.suspend()
    try:
        b_from = world.agents()["b"]["last_offset"] - 5  # inside b's buffer of 500
        since = {
            "a": {"epoch": agents["a"]["epoch"], "offset": 0},
            "b": {"epoch": agents["b"]["epoch"], "offset": b_from},
        }
        watch = StreamCollector(world, {"since": since})
        # a's host never answered: a is truncated, honestly; b lost nothing
        assert watch.start["b"]["truncated"] is False, watch.start
        assert watch.start["b"]["from_offset"] == b_from
        watch.wait(lambda w: w.count("b") >= 3000, what="b's events")
        offsets = watch.offsets("b")
        assert offsets == list(range(b_from + 1, b_from + 1 + len(offsets)))
        watch.close()
    finally:
        a_host.resume()
