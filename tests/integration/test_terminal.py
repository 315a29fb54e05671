"""``agenthost attach`` in a real terminal: tmux runs it, send-keys types, capture-pane
reads the screen. Waits are for text on the screen, with a deadline."""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hosttools import PY, HostProc, attached, events_until, history, is_result, results, wait_for

HostFactory = Callable[..., HostProc]  # the host_factory fixture of tests/conftest.py
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
DETACH = "1d"  # Ctrl-]: tmux's "C-]" key name does not send it, the byte does
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


class Tmux:
    """One private tmux server with one window running a command."""

    def __init__(self, home: Path) -> None:
        self.socket = f"ah-test-{secrets.token_hex(4)}"
        self.home = home

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def start(self, command: str, *, width: int = 100, height: int = 30, **env: str) -> None:
        exports = " ".join(f"{k}={v}" for k, v in {"AGENTHOST_HOME": str(self.home), **env}.items())
        self.tmux(
            "new-session", "-d", "-x", str(width), "-y", str(height),
            f"{exports} {command}; echo EXIT=$?; sleep 600",
        )  # fmt: skip

    def screen(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-J")

    def wait(self, text: str, timeout: float = 30) -> str:
        return wait_for(lambda: s if text in (s := self.screen()) else "", timeout, repr(text))

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-l", text)
        self.tmux("send-keys", "Enter")

    def keys(self, *hex_bytes: str) -> None:
        """Send these bytes (two hex digits each) in one command."""
        self.tmux("send-keys", "-H", *hex_bytes)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def term(home: Path) -> Iterator[Tmux]:
    t = Tmux(home)
    yield t
    t.close()


ATTACH = f"{PY} -m agenthost attach"


def demo(host_factory: HostFactory, agent_id: str = "d1") -> HostProc:
    return host_factory(agent_id, "--agent", "demo", env={"AGENTHOST_DEMO_PACE": "0.05"})


def test_a_full_demo_turn_typed_and_rendered(host_factory: HostFactory, term: Tmux) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.type("hello there agent")
    screen = term.wait("✓ turn done")
    lines = [line.rstrip() for line in screen.splitlines()]
    assert "› hello there agent" in lines
    assert "● Bash(wc -w)" in lines and "  ⎿ 3" in lines
    assert 'You said "hello there agent". That is 3 words.' in lines
    assert any(line.startswith("✓ turn done · ") and "$0.0" in line for line in lines)
    history = host.status()["agent"]
    assert history["turns"] == 1


def test_ctrl_c_interrupts_the_turn_and_the_agent_lives(
    host_factory: HostFactory, term: Tmux
) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    # the note comes first, every time (issue 28: it used to race the turn's end, and
    # a third of the time came after it), and the turn reads "interrupted" only
    for n in range(1, 6):
        term.type(f"/sleep {120 + n}")
        term.wait(f"● Bash(sleep {120 + n})")
        term.wait("working")  # the live indicator
        term.keys("03")  # Ctrl-C
        wait_for(lambda n=n: term.screen().count("⏹ turn interrupted") == n, what=f"end {n}")
    lines = [line.rstrip() for line in term.screen().splitlines()]
    notes = [i for i, line in enumerate(lines) if line == "── sending an interrupt"]
    ends = [i for i, line in enumerate(lines) if line.startswith("⏹ turn interrupted · ")]
    assert len(notes) == len(ends) == 5
    assert all(note < end for note, end in zip(notes, ends, strict=True)), lines
    assert not any("failed" in line for line in lines)
    assert host.agent()["state"] == "idle" and host.agent()["pid"] > 0


def test_turn_endings_read_one_way_with_this_turns_cost(
    host_factory: HostFactory, term: Tmux
) -> None:
    # issue 28: a failed turn's text twice (`! TEXT`, then `✗ turn failed`), and
    # `turn done · $cost` showing the session's running total beside one turn's tokens
    from agenthost.governance.budget import usd

    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    for n, text in enumerate(["one two", "three four five"], start=1):
        term.type(text)
        wait_for(lambda n=n: term.screen().count("✓ turn done") == n, what=f"turn {n} done")
    term.type("/error")
    screen = term.wait("✗ turn failed")
    lines = [line.rstrip() for line in screen.splitlines()]
    (failed,) = [line for line in lines if "API Error: 500 demo failure" in line]
    assert failed.startswith("✗ turn failed: API Error: 500 demo failure · ")
    assert not any(line.startswith("!") or "(success)" in line for line in lines)
    done = [line for line in lines if line.startswith("✓ turn done · ")]
    with attached(host, offset=0) as conn:
        turns = results(events_until(conn, lambda e: is_result(e) and e["result"]["is_error"]))
    assert turns[1]["cost_usd"] > turns[1]["turn_cost_usd"] > 0  # a total, and a turn's
    for line, result in zip(done, turns, strict=False):
        assert f" · {usd(result['turn_cost_usd'])} · " in line, (line, result)
        assert f" · {result['usage']['input_tokens']} in / " in line


ECHO = ["sh", "-c", 'while read -r l; do echo "got: $l"; done']  # a lines agent
CONFIRM = "Ctrl-C again within 2 s sends SIGINT"


def echo_agent(host_factory: HostFactory) -> HostProc:
    return host_factory("web", "--agent", "lines", command=ECHO)


def test_one_ctrl_c_on_a_lines_agent_only_asks(host_factory: HostFactory, term: Tmux) -> None:
    # a lines agent has no turns: its interrupt is SIGINT to its whole process group
    host = echo_agent(host_factory)
    term.start(f"{ATTACH} web")
    assert "Ctrl-C twice: SIGINT to the agent" in term.wait("Ctrl-] detaches")
    term.keys("03")  # Ctrl-C
    term.wait(CONFIRM)
    term.type("still here")
    screen = term.wait("got: still here")  # the agent lives and answers
    assert "killed by SIGINT" not in screen and "EXIT=" not in screen
    assert host.agent()["state"] == "running" and host.agent()["pid"] > 0


def test_a_lines_agent_has_no_turns_and_no_spinner(host_factory: HostFactory, term: Tmux) -> None:
    # a plain program "runs" for as long as it lives: a spinner turned for ever (issue 28)
    echo_agent(host_factory)
    term.start(f"{ATTACH} web")
    term.wait("Ctrl-] detaches")
    term.type("are you there")
    screen = term.wait("got: are you there")  # the prompt was drawn many times by now
    assert "working" not in screen and not any(c in screen for c in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
    assert screen.rstrip().splitlines()[-1].startswith("›")


def test_two_ctrl_c_send_sigint_to_a_lines_agent(host_factory: HostFactory, term: Tmux) -> None:
    host = echo_agent(host_factory)
    term.start(f"{ATTACH} web")
    term.wait("Ctrl-] detaches")
    term.keys("03", "03")  # Ctrl-C twice, at once
    screen = term.wait("EXIT=")
    assert "the agent was killed by SIGINT" in screen and "EXIT=10" in screen
    assert host.agent()["signal"] == "SIGINT"


def test_the_confirmation_window_expires(home: Path) -> None:
    # the window is a UI timeout on a monotonic clock: driven here by a fake one
    from agenthost.cli.render import Style
    from agenthost.cli.session import AttachSession, Start
    from agenthost.cli.terminal import CONFIRM_WINDOW, Terminal
    from agenthost.client import AsyncClient

    notes: list[str] = []
    session = AttachSession(
        "web", home, start=Start(), follow=True, as_json=False, note=notes.append
    )
    session.client, session.state, session.backend = (
        AsyncClient("web", home=home),
        "running",
        "lines",
    )
    now = [100.0]
    terminal = Terminal(session, Style(False), clock=lambda: now[0])
    assert not terminal.interrupt_now() and len(notes) == 1 and CONFIRM in notes[0]
    now[0] += CONFIRM_WINDOW + 0.5  # too late: this one only asks again
    assert not terminal.interrupt_now() and len(notes) == 2
    now[0] += CONFIRM_WINDOW - 0.5
    assert terminal.interrupt_now()  # confirmed in time
    assert not terminal.interrupt_now()  # a confirmed Ctrl-C does not arm the next one
    session.backend = "demo"  # an agent with turns: every Ctrl-C interrupts at once
    assert terminal.interrupt_now() and terminal.interrupt_now() and len(notes) == 3


def test_detach_keys_leave_the_agent_running(host_factory: HostFactory, term: Tmux) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.keys(DETACH)
    screen = term.wait("EXIT=")
    # ...and says how to come back
    assert "── detached; the agent keeps running (agenthost attach d1)" in screen
    assert "EXIT=0" in screen
    assert host.agent()["state"] == "idle"
    term.start(f"{ATTACH} d1")  # Ctrl-D on an empty line does the same
    term.wait("Ctrl-] detaches")
    term.keys("04")
    assert "EXIT=0" in term.wait("EXIT=")


def test_ctrl_bracket_detaches_at_once_and_keys_after_it_are_not_sent(
    host_factory: HostFactory, term: Tmux
) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    # Ctrl-] then a line and Enter, at once: Ctrl-] must act alone (not wait for a
    # second key, which would take "l" as the character to search for and send "eaked")
    term.keys(DETACH, *(f"{b:02x}" for b in b"leaked\r"))
    screen = term.wait("EXIT=")
    assert "detached; the agent keeps running" in screen and "EXIT=0" in screen
    with host.raw() as conn:
        entries = conn.request("host.history")["payload"]["entries"]
    assert [e for e in entries if e["role"] == "user"] == []  # nothing reached the agent
    assert host.agent()["state"] == "idle"


def test_answering_permission_requests(host_factory: HostFactory, term: Tmux) -> None:
    demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.type("/ask")
    term.wait("allow Bash(touch demo-was-here)? [y/n/a(lways)]")  # the prompt asks...
    term.wait("? Bash wants to run: touch demo-was-here")  # ...and the event says what
    term.type("y")
    term.wait("Done: permission granted, command run.")
    term.type("/ask")
    term.wait("[y/n/a(lways)]")
    term.type("n not in this directory")
    screen = term.wait("Understood, I did not run it.")
    assert "⚖ Bash: denied by terminal: not in this directory" in screen  # the record
    assert "Permission denied: not in this directory" in screen


def test_allow_always_from_the_terminal(host_factory: HostFactory, term: Tmux) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.type("/ask")
    term.wait("[y/n/a(lways)]")
    term.type("a")
    term.wait("allowed by terminal (and for the rest of the session)")
    term.type("/ask")  # the same command again: the session grant answers it
    term.wait("allowed by policy: allowed for this session by terminal")
    decided = [e["content"] for e in history(host) if e["role"] == "permission"]
    assert decided == [
        "allowed by terminal (and for the rest of the session)",
        "allowed by policy: allowed for this session by terminal",
    ]


def test_host_killed_and_replaced_while_attached(host_factory: HostFactory, term: Tmux) -> None:
    first = demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.type("before the crash")
    term.wait('You said "before the crash"')
    first.signal(9)
    first.wait_exit()
    term.wait("connection to the host lost; reconnecting…")
    demo(host_factory)  # a new host for the same agent continues the journal's stream
    term.wait("reconnected; resuming after offset")
    term.type("after the restart")
    screen = term.wait('You said "after the restart"')
    lines = screen.splitlines()
    # nothing shown twice, nothing skipped
    assert sum("› before the crash" in line for line in lines) == 1
    assert sum('You said "before the crash"' in line for line in lines) == 1
    assert sum("› after the restart" in line for line in lines) == 1


def test_agent_end_is_reported_with_a_status(host_factory: HostFactory, term: Tmux) -> None:
    demo(host_factory)
    term.start(f"{ATTACH} d1")
    term.wait("Ctrl-] detaches")
    term.type("/exit 3")
    screen = term.wait("EXIT=")
    assert "the agent exited with code 3 (state error)" in screen and "EXIT=10" in screen


def test_no_color_and_colours(host_factory: HostFactory, term: Tmux) -> None:
    demo(host_factory)
    term.start(f"{ATTACH} d1 --no-follow", NO_COLOR="1")
    term.wait("EXIT=")
    assert not ANSI.search(term.screen(escapes=True))  # not one escape sequence
    term.close()
    term.socket = f"ah-test-{secrets.token_hex(4)}"
    term.start(f"{ATTACH} d1 --no-follow")
    term.wait("EXIT=")
    assert ANSI.search(term.screen(escapes=True))  # a terminal gets colours


def test_a_narrow_terminal_keeps_one_line_items_on_one_line(
    host_factory: HostFactory, term: Tmux
) -> None:
    demo(host_factory)
    term.start(f"{ATTACH} d1", width=40, height=40)
    term.wait("── type + Enter")
    term.type("/tool echo 日本語のテキストと a very long line that goes on and on and on")
    screen = term.wait("✓ turn done")
    (call,) = [line for line in screen.splitlines() if line.startswith("● Bash(")]
    assert call.rstrip().endswith("…)")  # cut to fit, not wrapped
    assert "日本語" in call
    (result,) = [line for line in screen.splitlines() if line.startswith("  ⎿ ")]
    assert result.rstrip().endswith("…")
    (help_line,) = [line for line in screen.splitlines() if line.startswith("── type")]
    assert help_line.rstrip().endswith("…")  # session lines are cut to fit too


def test_read_only_sends_nothing(host_factory: HostFactory, term: Tmux) -> None:
    host = demo(host_factory)
    term.start(f"{ATTACH} d1 --read-only")
    term.wait("replaying")
    term.type("this must not be sent")
    with host.raw() as conn:
        conn.request("host.send", {"input": "from elsewhere"})
    term.wait('You said "from elsewhere"')
    with host.raw() as conn:
        entries = conn.request("host.history")["payload"]["entries"]
    assert "this must not be sent" not in [e.get("content") for e in entries]


def test_two_terminals_on_one_agent(host_factory: HostFactory, term: Tmux, home: Path) -> None:
    demo(host_factory)
    other = Tmux(home)
    try:
        term.start(f"{ATTACH} d1")
        other.start(f"{ATTACH} d1")
        term.wait("Ctrl-] detaches")
        other.wait("Ctrl-] detaches")
        term.type("from the first terminal")
        other.wait('You said "from the first terminal"')
        other.type("from the second terminal")
        term.wait('You said "from the second terminal"')
    finally:
        other.close()


def test_no_host_is_a_clear_error(term: Tmux) -> None:
    term.start(f"{ATTACH} ghost")
    screen = term.wait("EXIT=")
    assert "no host is running for agent 'ghost'" in screen and "EXIT=3" in screen
