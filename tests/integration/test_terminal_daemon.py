"""A terminal agent through the daemon: vim, started by `daemon.spawn`, keeps its
screen while the daemon is killed and started again (docs/terminal.md)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from daemontools import DaemonWorld
from hosttools import RawConn, wait_for


def screen(world: DaemonWorld, agent_id: str) -> dict[str, Any]:
    with RawConn(world.home / "hosts" / f"{agent_id}.sock") as conn:
        answer = conn.request("host.screen")
    assert answer["success"], answer
    payload: dict[str, Any] = answer["payload"]
    return payload


def type_keys(world: DaemonWorld, agent_id: str, keys: str) -> None:
    with RawConn(world.home / "hosts" / f"{agent_id}.sock") as conn:
        assert conn.request("host.input", {"data": keys})["success"]


def test_vim_keeps_its_screen_across_a_daemon_killed_and_restarted(
    world: DaemonWorld, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("first line\n")
    world.start_daemon()
    vim = ["vim", "-u", "NONE", "-i", "NONE", "-N", "-n", str(notes)]
    world.request(
        "daemon.spawn", {"agent_id": "ed", "agent": "pty", "command": vim, "size": "90x20"}
    )
    wait_for(lambda: screen(world, "ed")["lines"][0] == "first line", what="vim's screen")
    type_keys(world, "ed", "Osecond line\x1b")
    before = wait_for(
        lambda: (
            (s := screen(world, "ed"))["lines"][:2] == ["second line", "first line"]
            and "-- INSERT --" not in s["lines"]
            and s
        ),
        what="the edit on vim's screen",
    )
    assert (before["cols"], before["rows"]) == (90, 20) and before["alternate"] in (True, False)
    status = world.cli("status", "ed")
    assert status.returncode == 0 and "90x20" in status.stdout, status.stdout

    daemon = world.daemons[-1]
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert screen(world, "ed")["lines"] == before["lines"]  # the host never noticed
    world.start_daemon()
    assert world.ping()["reconcile"]["found"] == 1
    after = screen(world, "ed")
    assert after["lines"] == before["lines"] and after["offset"] == before["offset"]
    type_keys(world, "ed", ":wq\r")
    wait_for(lambda: world.agents()["ed"]["status"] != "running", what="vim to exit")
    assert notes.read_text() == "second line\nfirst line\n"


def test_a_spawn_with_a_garbage_size_is_refused(world: DaemonWorld) -> None:
    world.start_daemon()
    for size in ("0x0", "big", "80x24x1", 80):
        answer = world.call(
            "daemon.spawn", {"agent_id": "bad", "agent": "pty", "command": ["true"], "size": size}
        )
        assert not answer["success"] and answer["code"] == "invalid_payload", answer
