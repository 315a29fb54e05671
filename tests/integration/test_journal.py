"""The journal behind the ring, with real hosts: nothing a client saw is lost.

kill -9 in the middle of a flood, restarts that continue the stream, damaged tails,
replays far older than the ring, slow clients caught up from disk, paging through the
whole history, retention and truncation, a full disk, export and gc.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from test_attach import check_stream, flood_code, read_until_data

from conftest import HostFactory
from hosttools import PY, assert_contiguous, lines_agent, wait_for

Event = dict[str, Any]


def journal_of(home: Path, agent_id: str = "a1") -> Path:
    return home / "journal" / agent_id


def journal_bytes(directory: Path) -> int:
    """Bytes of the segments (retention may delete one while we look)."""
    total = 0
    for path in directory.glob("*.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def test_kill_9_mid_flood_then_a_new_host_continues_the_stream(
    host_factory: HostFactory,
) -> None:
    n = 200_000
    host = host_factory("a1", "--agent", "lines", command=flood_code(n, 500, 0.001))
    seen: dict[int, Event] = {}
    with host.raw() as conn:
        attach = conn.request("host.attach", {"offset": 0})["payload"]
        epoch = attach["epoch"]
        conn.send("host.send", {"input": "go"})
        while len(seen) < 30_000:  # the flood is well under way
            f = conn.frame()
            if f["kind"] == "event":
                seen[f["offset"]] = f
        host.signal(signal.SIGKILL)  # mid-flood, mid-write perhaps
        try:  # whatever else this client got before the connection died counts too
            while True:
                f = conn.frame()
                if f["kind"] == "event":
                    seen[f["offset"]] = f
        except (EOFError, ConnectionResetError):
            pass
    host.wait_exit()
    held = max(seen)
    again = host_factory("a1", "--agent", "lines", command=["cat"])
    with again.raw() as conn:
        # a client that held offset N gets N+1 next, in the same epoch
        resume = conn.request("host.attach", {"offset": held})["payload"]
        assert resume["epoch"] == epoch and resume["truncated"] is False
        assert resume["stream_offset"] >= held
        nxt = conn.frame()
        assert nxt["offset"] == held + 1
    with again.raw() as conn:
        # every event any client saw is still there, byte for byte the same
        replay = conn.request("host.attach", {"offset": 0})["payload"]
        assert replay["oldest_offset"] == 1 and replay["truncated"] is False
        events = conn.events(held)
    assert_contiguous([e["offset"] for e in events], 1)
    for e in events:
        assert e == seen[e["offset"]]
    status = again.status()
    assert status["host"]["journal"]["epoch"] == epoch


def test_a_damaged_tail_is_repaired_and_reported(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=lines_agent("print('hi')"))
    host.wait_state("done")
    with host.raw() as conn:
        head = conn.request("host.attach", {"offset": 10**9})["payload"]["stream_offset"]
        conn.request("host.stop")
    host.wait_exit()
    (segment,) = sorted(journal_of(host.home).glob("*.jsonl"))
    with open(segment, "ab") as fh:  # a torn write, then garbage
        fh.write(b'{"kind":"event","type":"output","agent_id":"a1","offset":' + os.urandom(64))
    again = host_factory("a1", "--agent", "lines", command=["cat"])
    with again.raw() as conn:
        attach = conn.request("host.attach", {"offset": 0})["payload"]
        events = conn.events(attach["stream_offset"])
    assert_contiguous([e["offset"] for e in events], 1)
    notes = [e["error"] for e in events if e["type"] == "error"]
    assert any("dropped on reopen" in n for n in notes)
    assert events[head]["offset"] == head + 1  # continued right after the last good one
    for line in segment.read_bytes().splitlines():
        json.loads(line)  # nothing invalid left on disk


def test_attach_at_offset_1_after_100k_events(host_factory: HostFactory) -> None:
    n = 100_000
    host = host_factory("a1", "--agent", "lines", command=flood_code(n))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": "go"})
        read_until_data(conn, str(n))
    with host.raw(timeout=60) as conn:
        attach = conn.request("host.attach", {"offset": 1})["payload"]
        assert attach["truncated"] is False and attach["oldest_offset"] == 1
        events = read_until_data(conn, str(n))
    check_stream(events, 2)
    assert sum(e["type"] == "output" for e in events) == n


def test_slow_client_is_caught_up_from_the_journal_not_dropped(
    host_factory: HostFactory,
) -> None:
    n = 50_000
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--ring-size",
        "200",
        "--client-buffer",
        "8192",
        command=flood_code(n, 500, 0.001),
    )
    with host.raw() as lazy, host.raw() as control:
        lazy.send("host.attach", {"offset": 0})  # and then reads nothing for a while
        control.request("host.attach", {"offset": 0})
        control.send("host.send", {"input": "go"})
        read_until_data(control, str(n))
        events = read_until_data(lazy, str(n))
    check_stream(events, 1)
    assert "client.dropped" not in host.log()


def test_history_pages_through_the_whole_journal(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "demo")
    with host.raw(timeout=60) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": "/flood 1500"})  # 1500 entries > the 1000 kept
        conn.read_until(lambda f: f.get("type") == "result")
        newest = conn.request("host.history")["payload"]
        assert newest["total"] == 1000  # what the memory holds
        pages, before = [], None
        while True:
            payload = {"limit": 400} | ({"before": before} if before else {"before": 10**9})
            page = conn.request("host.history", payload)["payload"]
            pages = page["entries"] + pages
            if not page["has_more"]:
                break
            before = page["entries"][0]["offset"]
        forward, after = [], 0
        while True:
            page = conn.request("host.history", {"limit": 333, "after": after})["payload"]
            forward += page["entries"]
            if not page["has_more"]:
                break
            after = page["entries"][-1]["offset"]
    contents = [e["content"] for e in pages]
    assert contents[0] == "/flood 1500"  # the user's message, then every answer
    assert contents[1:] == [f"flood {i}/1500" for i in range(1, 1501)]
    assert [e["offset"] for e in forward] == [e["offset"] for e in pages]


def test_truncated_only_when_the_journal_was_pruned(host_factory: HostFactory) -> None:
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--ring-size",
        "100",
        "--journal-segment-bytes",
        "16384",
        "--journal-max-bytes",
        "65536",
        "--journal-sync-interval",
        "0.05",
        command=flood_code(5000),
    )
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": "go"})
        read_until_data(conn, "5000")
    # retention runs in the background after a segment rolls: wait until it is done
    directory = journal_of(host.home)
    wait_for(lambda: journal_bytes(directory) <= 65536 + 16384, what="old segments pruned")
    oldest = host.status()["host"]["journal"]["oldest_offset"]
    assert oldest > 1
    with host.raw() as conn:
        attach = conn.request("host.attach", {"offset": 0})["payload"]
        assert attach["truncated"] is True and attach["oldest_offset"] == oldest
        assert conn.frame()["offset"] == oldest
    with host.raw() as conn:
        kept = conn.request("host.attach", {"offset": oldest - 1})["payload"]
        assert kept["truncated"] is False
    assert journal_bytes(journal_of(host.home)) <= 65536 + 16384


def test_no_journal_means_no_files(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", "--no-journal", command=["cat"])
    assert host.status()["host"].get("journal") is None
    assert not journal_of(host.home).exists()


def test_disk_full_degrades_with_an_error_and_loses_nothing_acknowledged(
    home: Path, host_factory: HostFactory
) -> None:
    # RLIMIT_FSIZE makes the journal's writes fail (EFBIG) past 64 KiB, like a full disk
    host = host_factory(
        "a1",
        "--agent",
        "lines",
        "--log-level",
        "warning",
        command=flood_code(20_000),
        wrapper=["prlimit", "--fsize=65536", "--"],
    )
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "go"})
        events = read_until_data(conn, "20000")  # the stream goes on without the journal
    check_stream(events, 1)
    (error,) = [e["error"] for e in events if e["type"] == "error"]
    assert "journal write failed" in error and "journal is off" in error
    assert "File too large" in host.status()["host"]["journal"]["error"]
    assert not (journal_of(home) / "meta.json").exists()  # the epoch cannot be reused
    journaled = [
        json.loads(line)
        for p in sorted(journal_of(home).glob("*.jsonl"))
        for line in p.read_bytes().splitlines()
    ]
    assert journaled and [e["offset"] for e in journaled] == list(range(1, len(journaled) + 1))
    for e in journaled:  # what the journal kept is exactly what clients got
        assert e == events[e["offset"] - 1]


def test_export_and_gc(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": "hello there"})
        conn.read_until(lambda f: f.get("type") == "result")
        history = conn.request("host.history")["payload"]["entries"]
        conn.request("host.stop")
    host.wait_exit()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "agenthost", *args, "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    exported = cli("export", "a1")  # no host running: read from the journal
    assert exported.returncode == 0, exported.stderr
    entries = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(e["role"], e.get("content"), e["offset"]) for e in entries] == [
        (e["role"], e.get("content"), e["offset"]) for e in history
    ]
    md = cli("export", "a1", "--format", "md").stdout
    assert "## User" in md and "hello there" in md and "**Bash** `wc -w`" in md
    events = cli("export", "a1", "--format", "events").stdout.splitlines()
    assert [json.loads(e)["offset"] for e in events] == list(range(1, len(events) + 1))
    assert cli("export", "nobody").returncode == 3

    live = host_factory("b2", "--agent", "lines", command=["cat"])
    old = time.time() - 10 * 86400
    for path in [*journal_of(home).iterdir(), *journal_of(home, "b2").iterdir()]:
        os.utime(path, (old, old))
    dry = json.loads(cli("gc", "--dry-run", "--json").stdout)
    assert {d["agent_id"]: d["action"] for d in dry} == {
        "a1": "would remove",
        "b2": "kept (host running)",
    }
    assert journal_of(home).exists()
    done = json.loads(cli("gc", "--older-than", "7d", "--json").stdout)
    assert {d["agent_id"]: d["action"] for d in done}["a1"] == "removed"
    assert not journal_of(home).exists() and journal_of(home, "b2").exists()
    assert live.alive()
    assert cli("gc", "--older-than", "soon").returncode == 2


def test_restart_after_a_clean_stop_continues_offsets(host_factory: HostFactory) -> None:
    first = host_factory("a1", "--agent", "lines", command=["cat"])
    with first.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        for word in ("one", "two"):
            conn.request("host.send", {"input": word})
        conn.request("host.stop")
    first.wait_exit()
    second = host_factory("a1", "--agent", "lines", command=["cat"])
    with second.raw() as conn:
        attach = conn.request("host.attach", {"offset": 0})["payload"]
        events = conn.events(attach["stream_offset"])
        history = conn.request("host.history")["payload"]["entries"]
    assert_contiguous([e["offset"] for e in events], 1)
    assert [h["content"] for h in history] == ["one", "two"]  # the memory was restored
