"""``agenthost attach`` on a terminal agent, from a real terminal: the real command
in a real pseudo-terminal (tests/ptytools.py) against a real ``--agent pty`` host
running vim or the tty probe (docs/terminal.md, "Attach from a terminal")."""

from __future__ import annotations

import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.terminal.chunks import event_bytes
from agenthost.terminal.local import PAINT_PRELUDE, leave_sequence
from agenthost.terminal.screen import Screen

from conftest import HostFactory
from hosttools import PY, HostProc, cli
from ptytools import PtyProgram

PROBE = [sys.executable, str(Path(__file__).parents[1] / "fixtures" / "tty_probe.py")]
VIM = ["vim", "-u", "NONE", "-N", "-n", "-i", "NONE"]
LEAVING = leave_sequence(False)[:12]  # how the way out begins, alternate screen or not


class PtyClient:
    """A command in a terminal of its own, and what that terminal shows (its bytes
    painted on an emulator of its size, as a person's terminal paints them)."""

    def __init__(self, argv: list[str], cols: int, rows: int) -> None:
        self.term = PtyProgram(f"attach-{argv[4]}", argv, cols, rows, env={"NO_COLOR": "1"})
        self.process = self.term.process
        self.cols, self.rows = cols, rows
        self.screen = Screen(cols, rows)
        self._painted = 0  # chunks of the recording painted on the screen

    @property
    def output(self) -> bytes:
        return self.term.output

    def lines(self) -> list[str]:
        chunks = self.term.recording.chunks
        for chunk in chunks[self._painted :]:
            if isinstance(chunk, tuple):
                self.screen.resize(*chunk)
            else:
                self.screen.feed(chunk)
        self._painted = len(chunks)
        return self.screen.lines()

    def write(self, keys: bytes | str) -> None:
        self.term.send(keys)

    def resize(self, cols: int, rows: int) -> None:
        self.term.resize(cols, rows)
        self.cols, self.rows = cols, rows

    def attrs(self) -> list[Any]:
        return self.term.attrs()

    def wait_for(self, predicate: Callable[[PtyClient], object], what: str) -> None:
        self.term.read_until(lambda: predicate(self), what=what)

    def wait_output(self, needle: bytes) -> None:
        self.wait_for(lambda c: needle in c.output, repr(needle))

    def wait_screen(self, text: str) -> None:
        self.wait_for(lambda c: any(text in line for line in c.lines()), text)

    def wait_exit(self) -> int:
        return self.term.drain_to_exit()


CLIENTS: list[PtyProgram] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while CLIENTS:
        CLIENTS.pop().close()


def attach(home: Path, agent_id: str, *args: str, cols: int = 100, rows: int = 30) -> PtyClient:
    """``agenthost attach`` in a terminal of its own, of ``cols`` x ``rows``."""
    argv = [PY, "-m", "agenthost", "attach", agent_id, "--home", str(home), *args]
    client = PtyClient(argv, cols, rows)
    CLIENTS.append(client.term)
    return client


def is_raw(client: PtyClient) -> bool:
    lflag = client.attrs()[3]
    return not lflag & (termios.ECHO | termios.ICANON | termios.ISIG)


def screen(host: HostProc, offset: int | None = None) -> dict[str, Any]:
    with host.raw() as conn:
        answer = conn.request("host.screen", {} if offset is None else {"offset": offset})
    assert answer["success"], answer
    payload: dict[str, Any] = answer["payload"]
    return payload


def terminal_events(host: HostProc) -> list[dict[str, Any]]:
    """Every terminal event the host keeps, in order."""
    with host.raw() as conn:
        head = conn.request("host.attach", {"offset": 0})["payload"]["stream_offset"]
        events = conn.events(head)
    return [e for e in events if e["type"] == "terminal"]


def same_screen(client: PtyClient, host: HostProc) -> bool:
    """Whether the attached terminal shows what the host's screen holds now."""
    theirs = screen(host)
    return bool(
        (theirs["cols"], theirs["rows"]) == (client.cols, client.rows)
        and client.lines() == theirs["lines"]
    )


@pytest.fixture
def vim(host_factory: HostFactory) -> HostProc:
    # (-n: no swap file, -i NONE: no viminfo; nothing is written)
    return host_factory("vim1", "--agent", "pty", command=VIM)


@pytest.fixture
def probe(host_factory: HostFactory) -> HostProc:
    return host_factory("p1", "--agent", "pty", command=PROBE)


# --- the pass-through ---------------------------------------------------------------------


def test_typing_in_vim_the_attached_screen_is_the_hosts(home: Path, vim: HostProc) -> None:
    client = attach(home, "vim1", cols=100, rows=30)
    client.wait_for(is_raw, "raw mode")
    client.wait_screen("~")
    client.write("iThe quick brown fox\rjumps over 🦊 the lazy dog\x1b")
    client.wait_screen("jumps over 🦊 the lazy dog")
    # the snapshot was painted at the host's size, then the host took ours (latest)
    assert vim.agent()["terminal"] == {"cols": 100, "rows": 30}
    client.wait_for(lambda c: same_screen(c, vim), "the host's screen")
    client.write(":set number\r")
    client.wait_screen("  1 The quick brown fox")
    client.wait_for(lambda c: same_screen(c, vim), "the host's screen")
    # the first bytes were a reset and the screen's dump; keys were batched, not echoed
    assert client.output.startswith(PAINT_PRELUDE)


def test_a_late_attach_paints_the_screen_from_the_snapshot(home: Path, vim: HostProc) -> None:
    first = attach(home, "vim1", cols=90, rows=26)
    first.wait_screen("~")
    first.write("ihello from the first terminal\x1b")
    first.wait_screen("hello from the first terminal")
    first.write("\x1d")
    assert first.wait_exit() == 0
    # a second terminal of the same size: the screen as it is, no replay of the bytes
    second = attach(home, "vim1", cols=90, rows=26)
    second.wait_screen("hello from the first terminal")
    second.wait_for(lambda c: same_screen(c, vim), "the host's screen")
    assert second.output.count(b"hello from the first terminal") == 1


def test_a_resize_reaches_the_agent(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1", cols=90, rows=25)
    client.wait_output(b"winch 90x25")  # the size at the start (the host had 80x24)
    client.resize(120, 40)
    client.wait_output(b"winch 120x40")
    client.write("size\r")
    client.wait_output(b"size 120x40")
    assert probe.agent()["terminal"] == {"cols": 120, "rows": 40}


def test_detach_gives_the_terminal_back(home: Path, vim: HostProc) -> None:
    client = attach(home, "vim1")
    before = client.attrs()
    client.wait_for(is_raw, "raw mode")
    client.wait_screen("~")
    client.write("ia line\x1b")
    client.wait_screen("a line")
    client.write(b"\x1d")  # Ctrl-]
    assert client.wait_exit() == 0
    assert client.attrs() == before
    out = bytes(client.output)
    leaving = out[out.rindex(LEAVING) :]
    # out of vim's alternate screen; mouse, bracketed paste and the cursor as they were
    assert leaving.startswith(leave_sequence(True))
    lines = client.lines()
    assert any(
        f"detached; the agent keeps running (agenthost attach --home {home} vim1)" in line
        for line in lines
    ), lines
    assert vim.agent()["state"] != "done"  # the agent keeps running
    assert "a line" in screen(vim)["lines"][0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_it_with_the_terminal_restored(
    home: Path, probe: HostProc, sig: signal.Signals
) -> None:
    client = attach(home, "p1")
    before = client.attrs()
    client.wait_for(is_raw, "raw mode")
    client.wait_output(b"ready")
    client.process.send_signal(sig)
    assert client.wait_exit() == -sig
    assert client.attrs() == before
    assert LEAVING in client.output
    assert probe.alive()


def test_the_agents_end_ends_it(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1")
    before = client.attrs()
    client.wait_output(b"ready")
    client.write("quit\r")
    assert client.wait_exit() == 0
    assert client.attrs() == before
    assert "── the agent exited with code 0 (state done)" in client.lines()


def test_read_only_sends_nothing(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1", "--read-only", cols=90, rows=25)
    client.wait_output(b"ready")
    client.wait_for(is_raw, "raw mode")
    client.write("typed while watching\r")
    client.resize(70, 20)
    client.write(b"\x03")  # Ctrl-C leaves
    assert client.wait_exit() == 0
    # whatever it had sent would have come before these, which the agent answers
    with probe.raw() as conn:
        assert conn.request("host.input", {"data": "size\r"})["success"]
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: "size 80x24" in f.get("data", ""))
    data = b"".join(event_bytes(e) for e in terminal_events(probe))
    assert b"typed while watching" not in data
    assert b"winch" not in data
    assert probe.agent()["terminal"] == {"cols": 80, "rows": 24}


def test_read_only_leaves_with_the_detach_key_too(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1", "--read-only")
    client.wait_output(b"ready")
    client.write(b"\x1d")
    assert client.wait_exit() == 0


def test_two_terminals_the_latest_sets_the_size(home: Path, probe: HostProc) -> None:
    big = attach(home, "p1", cols=110, rows=35)
    big.wait_output(b"winch 110x35")
    small = attach(home, "p1", cols=70, rows=20)
    small.wait_output(b"winch 70x20")
    big.wait_output(b"winch 70x20")  # both see what the agent paints
    big.write("size\r")  # typing makes the big one the latest
    big.wait_output(b"size 110x35")
    small.wait_output(b"size 110x35")
    assert probe.agent()["terminal"] == {"cols": 110, "rows": 35}
    small.resize(60, 18)
    big.wait_output(b"winch 60x18")
    assert probe.agent()["terminal"] == {"cols": 60, "rows": 18}


def test_a_host_killed_and_restarted_resumes_without_a_byte_twice_or_lost(
    home: Path, host_factory: HostFactory
) -> None:
    host = host_factory("k1", "--agent", "pty", command=PROBE)
    client = attach(home, "k1", cols=80, rows=24)  # the host's size: no resize to wait for
    client.wait_output(b"ready")
    client.write("before\r")
    client.wait_output(b"you said: before")
    host.signal(signal.SIGKILL)
    host.wait_exit()
    again = host_factory("k1", "--agent", "pty", command=PROBE)
    client.wait_for(lambda c: c.output.count(b"ready") == 2, "the new agent's ready")
    client.write("after\r")
    client.wait_output(b"you said: after")
    client.write(b"\x1d")
    assert client.wait_exit() == 0
    # what the attach wrote: a reset, the screen at some offset N, then exactly the
    # bytes of the terminal events after N, across the restart
    out = bytes(client.output)
    painted = out[: out.rindex(LEAVING)]
    events = terminal_events(again)
    for at, event in enumerate(events):
        dump = screen(again, event["offset"])["dump"].encode()
        rest = b"".join(event_bytes(e) for e in events[at + 1 :])
        if painted == PAINT_PRELUDE + dump + rest:
            break
    else:
        raise AssertionError(f"not a snapshot and the bytes after it: {painted!r}")
    assert rest.count(b"you said: before") == 1
    assert rest.count(b"ready") == 1  # the new agent's (the old one's is in the dump)


def test_a_host_back_with_a_new_stream_is_painted_from_its_screen(
    home: Path, host_factory: HostFactory
) -> None:
    host = host_factory("n1", "--agent", "pty", "--no-journal", command=PROBE)
    client = attach(home, "n1", cols=80, rows=24)
    client.wait_output(b"ready")
    client.write("old stream\r")
    client.wait_output(b"you said: old stream")
    host.signal(signal.SIGKILL)
    host.wait_exit()
    again = host_factory("n1", "--agent", "pty", "--no-journal", command=PROBE)
    # a second reset and dump: the new stream's offsets say nothing of the old one's
    client.wait_for(lambda c: c.output.count(PAINT_PRELUDE) == 2, "a second paint")
    client.wait_for(lambda c: same_screen(c, again), "the new host's screen")
    client.write("new stream\r")
    client.wait_output(b"you said: new stream")
    client.write(b"\x1d")
    assert client.wait_exit() == 0
    assert b"the host came back with a new stream; showing its screen" in client.output


# --- keys and configuration ---------------------------------------------------------------


def test_another_detach_key(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1", "--detach-key", "ctrl-q")
    client.wait_output(b"ready")
    client.write(b"\x1d")  # Ctrl-] is the agent's now
    client.write(b"\x11")
    assert client.wait_exit() == 0
    data = b"".join(event_bytes(e) for e in terminal_events(probe))
    assert b"^]" in data  # the agent's terminal echoed it


def test_the_detach_key_from_config_toml(home: Path, probe: HostProc) -> None:
    (home / "config.toml").write_text('[attach]\ndetach_key = "^A"\n')
    client = attach(home, "p1")
    client.wait_output(b"ready")
    client.write(b"\x01")
    assert client.wait_exit() == 0


def test_a_broken_config_toml_leaves_ctrl_bracket(home: Path, probe: HostProc) -> None:
    (home / "config.toml").write_text('[attach]\ndetach_key = "ctrl-m"\n')
    client = attach(home, "p1")
    client.wait_output(b"ready")
    client.write(b"\x1d")
    assert client.wait_exit() == 0
    assert b"attach.detach_key" in client.output and b"ctrl-] detaches" in client.output


def test_a_pipe_reads_no_detach_key_from_config_toml(home: Path, probe: HostProc) -> None:
    """Into a pipe no key is read: the configured detach key is not looked up (a
    broken one is not even said), where on a terminal it is (the test above)."""
    (home / "config.toml").write_text('[attach]\ndetach_key = "ctrl-m"\n')
    with probe.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: "ready" in f.get("data", ""))
    result = cli(home, "attach", "p1", "--no-follow")
    assert result.returncode == 0, result
    assert "ready" in result.stdout
    assert "detach_key" not in result.stderr and "detaches" not in result.stderr


@pytest.mark.parametrize("key", ["ctrl-m", "", "ctrl-]]", "alt-x", "ctrl-1", "\x1d", "é" * 500])
def test_garbage_detach_keys_are_usage_errors(home: Path, key: str) -> None:
    result = cli(home, "attach", "nobody", "--detach-key", key)
    assert result.returncode == 2, result
    assert "--detach-key" in result.stderr


def test_replay_options_are_refused_on_a_terminal(home: Path, probe: HostProc) -> None:
    client = attach(home, "p1", "--last", "3")
    assert client.wait_exit() == 2
    assert b"--offset, --last and --since replay its events" in client.output


# --- not on a terminal --------------------------------------------------------------------


def test_in_a_pipe_the_screen_as_text_then_the_bytes(home: Path, probe: HostProc) -> None:
    with probe.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: "ready" in f.get("data", ""))
    result = cli(home, "attach", "p1", "--no-follow")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith("isatty=True ctty=True") and lines[1] == "ready"
    proc = subprocess.Popen(
        [PY, "-m", "agenthost", "attach", "p1", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"isatty=True")
        assert proc.stdout.readline() == b"ready\n"
        with probe.raw() as conn:
            assert conn.request("host.input", {"data": "piped\r"})["success"]
        # then the agent's bytes as its terminal gave them (the echo; \r\n made \r\r\n)
        assert proc.stdout.readline() == b"piped\r\n"
        assert proc.stdout.readline() == b"you said: piped\r\r\n"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_json_prints_the_events(home: Path, probe: HostProc) -> None:
    with probe.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: "ready" in f.get("data", ""))
    result = cli(home, "attach", "p1", "--no-follow", "--json")
    assert result.returncode == 0, result
    import json

    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = {e["type"] for e in events}
    assert {"terminal", "terminal_size"} <= kinds
    assert b"ready" in b"".join(event_bytes(e) for e in events if e["type"] == "terminal")
