"""launch.py: a background start that fails says why, with the end of its log; one
that gets ready runs on in a session of its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agenthost.launch import HostStartError, log_tail, start_in_background

READY = (
    "import os, socket, sys, time\n"
    "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "addr = os.environ['NOTIFY_SOCKET']\n"
    "s.sendto(b'READY=1', '\\0' + addr[1:])\n"
    "print('ready, session', os.getsid(0) == os.getpid(), flush=True)\n"
    "sys.stdin.read()\n"  # /dev/null: returns at once; then it waits to be killed
    "time.sleep(3600)\n"
)


def test_a_start_that_exits_first_says_so_with_the_end_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("an older run's line\n")
    argv = [
        sys.executable,
        "-c",
        "import sys; print('boom: no config', file=sys.stderr); sys.exit(3)",
    ]
    with pytest.raises(HostStartError) as err:
        start_in_background(argv, log, env=dict(os.environ), timeout=30, what="the thing")
    text = str(err.value)
    assert "the thing exited with status 3 before it was ready" in text
    assert "--- host log ---\nboom: no config" in text
    assert "an older run" not in text  # only what this start appended


def test_a_start_that_gets_ready_runs_in_its_own_session(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    pid = start_in_background(
        [sys.executable, "-c", READY], log, env=dict(os.environ), timeout=30, what="it"
    )
    try:
        assert os.getsid(pid) == pid
        assert oct(log.stat().st_mode & 0o777) == "0o600"  # created private
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)  # our child still (its Popen was let go): reap it


def test_log_tail_of_garbage_and_of_a_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "bin.log"
    log.write_bytes(b"ok\n\xff\xfe\x00 broken utf-8\n")
    assert log_tail(log, 3) == "\ufffd\ufffd\x00 broken utf-8"
    assert log_tail(tmp_path / "missing.log", 0) == ""
    assert log_tail(log, 0, limit=6) == "utf-8"  # the last 6 characters, stripped
