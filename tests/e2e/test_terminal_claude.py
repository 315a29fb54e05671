"""The real Claude Code (and Codex) TUI as a terminal agent (``--agent pty -- claude``) on a real
host, against the fake Anthropic API: its hooks make the host's states and permission
requests, which the approval policy or a person (``host.respond``) answers; the answer
goes back through the hook (docs/terminal.md, "Claude Code and Codex in their TUIs").

Skipped without the CLI unless ``AGENTHOST_E2E_REQUIRED=1`` (CI).
"""

from __future__ import annotations

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)
from pathlib import Path

import pytest
from asking import anthropic, claude_bin, dirs  # noqa: F401 (fixtures)
from claude_env import ClaudeDirs, claude_env
from clis import require_cli
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.openai import FakeOpenAI
from fakes.openai import text as codex_text
from notifysink import sink
from sandboxtools import require_sandbox
from test_hooks_tui import WRITE_COMMAND, first_run_done

from agenthost.terminal.chunks import event_bytes

from conftest import HostFactory
from daemontools import DaemonWorld
from hosttools import HostProc, RawConn, history, wait_for
from termoracle import Chunk, oracle_screen

TIMEOUT = 60.0


def tui(
    host_factory: HostFactory,
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    *args: str,
) -> HostProc:
    env = claude_env(anthropic.url, dirs)
    first_run_done(dirs, env["ANTHROPIC_API_KEY"])
    command = [str(claude_bin), "--model", "claude-sonnet-4-5"]
    host = host_factory(
        "tui", "--agent", "pty", "--cwd", str(dirs.worktree), *args, command=command, env=env
    )
    host.wait_state("idle", timeout=TIMEOUT)  # SessionStart: at its prompt
    wait_for(lambda: "for shortcuts" in screen_text(host), TIMEOUT, "the TUI's prompt")
    return host


def assert_the_oracle_agrees(host: HostProc) -> None:
    """The host's screen as of its head equals what xterm.js (the oracle) paints from
    the same journaled events: the real TUI's bytes, not a recording's."""
    with host.raw() as conn:
        head = conn.request("host.attach", {"offset": 0})["payload"]["stream_offset"]
        events = conn.events(head)
    with host.raw() as conn:
        screen = conn.request("host.screen", {"offset": head})["payload"]
    sizes = [e for e in events if e["type"] == "terminal_size"]
    chunks: list[Chunk] = []
    for event in events:
        if event["type"] == "terminal":
            chunks.append(event_bytes(event))
        elif event["type"] == "terminal_size" and event is not sizes[0]:
            chunks.append((event["cols"], event["rows"]))
    oracle = oracle_screen(chunks, sizes[0]["cols"], sizes[0]["rows"])
    assert oracle.lines == screen["lines"]
    assert oracle.cursor[:2] == (screen["cursor"]["col"], screen["cursor"]["row"])


def screen_text(host: HostProc) -> str:
    with host.raw() as conn:
        return "\n".join(conn.request("host.screen")["payload"]["lines"])


@pytest.mark.parametrize("sandbox", ["off", "strict"])
def test_a_person_answers_the_tui_through_host_respond(
    host_factory: HostFactory,
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    sandbox: str,
) -> None:
    """In a sandbox too: its hooks reach the host through the sandbox's own directory,
    and the TUI finds its files (Claude Code's kind, by its program's name)."""
    if sandbox != "off":
        require_sandbox()
    anthropic.add(
        tool_use("Bash", {"command": WRITE_COMMAND, "description": "Make a marker"}),
        text("Marker made."),
    )
    host = tui(host_factory, claude_bin, dirs, anthropic, "--sandbox", sandbox)
    assert host.agent().get("sandbox") == (None if sandbox == "off" else sandbox)
    with host.raw() as conn:
        assert conn.request("host.send", {"input": "Please make a marker file"})["success"]
    host.wait_state("waiting", timeout=TIMEOUT)
    with host.raw() as conn:
        (request,) = conn.request("host.pending")["payload"]["requests"]
        assert request["tool_name"] == "Bash" and request["input"]["command"] == WRITE_COMMAND
        answer = conn.request(
            "host.respond", {"request_id": request["request_id"], "behavior": "allow"}
        )
        assert answer["success"], answer
    host.wait_state("idle", timeout=TIMEOUT)  # Stop: the turn ended
    wait_for(lambda: "Marker made." in screen_text(host), TIMEOUT, "the answer on screen")
    assert (dirs.worktree / "marker.txt").exists()
    entries = history(host)
    users = [e for e in entries if e["role"] == "user"]
    assert [e["content"] for e in users] == ["Please make a marker file"]
    assert any(e["role"] == "permission" and "allowed" in e["content"] for e in entries)
    assert_the_oracle_agrees(host)


def test_a_deny_rule_answers_the_tui_through_its_hook(
    home: Path,
    host_factory: HostFactory,
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
) -> None:
    (home / "config.toml").write_text(
        '[[policy.rule]]\ntool = "Bash"\ncommand = "touch *"\ndecision = "deny"\n'
    )
    anthropic.add(
        tool_use("Bash", {"command": WRITE_COMMAND, "description": "Make a marker"}),
        text("Understood, no marker."),
    )
    host = tui(host_factory, claude_bin, dirs, anthropic)
    with host.raw() as conn:
        assert conn.request("host.send", {"input": "Please make a marker file"})["success"]
    wait_for(lambda: "Understood, no marker." in screen_text(host), TIMEOUT, "the model's answer")
    assert not (dirs.worktree / "marker.txt").exists()
    decisions = [e for e in history(host) if e["role"] == "permission"]
    assert decisions and "denied by policy" in decisions[0]["content"], decisions
    # the model was told why, through the hook's answer
    result = anthropic.turn_requests()[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert_the_oracle_agrees(host)


def test_codex_tui_is_idle_after_its_turn(host_factory: HostFactory) -> None:
    codex = require_cli("codex")
    with FakeOpenAI([codex_text("Hello from the fake model.")]) as server:
        env = CodexEnv.create(server.url)
        try:
            with env.config_path.open("a") as config:  # the folder's trust screen
                config.write(f'\n[projects."{env.workdir}"]\ntrust_level = "trusted"\n')
            host = host_factory(
                "cx", "--agent", "pty", "--cwd", str(env.workdir), command=[str(codex)], env=env.env
            )
            wait_for(lambda: "for shortcuts" in screen_text(host), TIMEOUT, "the TUI's prompt")
            host.wait_state("idle", timeout=TIMEOUT)  # quiet at its prompt
            with host.raw() as conn:
                assert conn.request("host.send", {"input": "Say hello"})["success"]
                assert conn.request("host.status")["payload"]["agent"]["state"] == "running"
            wait_for(
                lambda: "Hello from the fake model." in screen_text(host), TIMEOUT, "the answer"
            )
            host.wait_state("idle", timeout=TIMEOUT)  # notify: the turn completed
            assert host.agent()["session_id"]  # the thread Codex named in its notify
            assert_the_oracle_agrees(host)
        finally:
            env.cleanup()


def test_a_notice_goes_out_when_the_tui_asks(
    world: DaemonWorld, claude_bin: Path, dirs: ClaudeDirs, anthropic: FakeAnthropic
) -> None:
    """Through the daemon, as people run agents: Claude Code's TUI asks, the daemon's
    notice (a webhook here) says so with its one-tap links; the person answers."""
    anthropic.add(
        tool_use("Bash", {"command": WRITE_COMMAND, "description": "Make a marker"}),
        text("Marker made."),
    )
    env = claude_env(anthropic.url, dirs)
    first_run_done(dirs, env["ANTHROPIC_API_KEY"])
    with sink() as server:
        (world.home / "config.toml").write_text(
            '[web]\npublic_url = "https://box.example:8765"\n[notify]\ndelay = "1s"\n'
            f'[notify.channels.hook]\ntype = "webhook"\nurl = "{server.url}/hook"\n'
        )
        world.start_daemon("--scan-interval", "0")
        spec = {
            "agent_id": "tuin",
            "agent": "pty",
            "command": [str(claude_bin), "--model", "claude-sonnet-4-5"],
            "cwd": str(dirs.worktree),
            "env": env,
        }
        world.request("daemon.spawn", spec)
        host = RawConn(world.home / "hosts" / "tuin.sock")
        try:
            wait_for(
                lambda: (
                    "for shortcuts" in "\n".join(host.request("host.screen")["payload"]["lines"])
                ),
                TIMEOUT,
                "the TUI's prompt",
            )
            assert host.request("host.send", {"input": "Please make a marker file"})["success"]
            (got,) = server.wait(1, "/hook")
            notice = got.json()
            assert notice["kind"] == "waiting" and notice["agent_id"] == "tuin"
            assert notice["title"] == f"tuin asks to use Bash: {WRITE_COMMAND}"
            assert notice["approve_url"].startswith("https://box.example:8765/l/")
            (request,) = host.request("host.pending")["payload"]["requests"]
            assert notice["requests"][0]["request_id"] == request["request_id"]
            answer = host.request(
                "host.respond", {"request_id": request["request_id"], "behavior": "allow"}
            )
            assert answer["success"], answer
            wait_for(lambda: (dirs.worktree / "marker.txt").exists(), TIMEOUT, "the marker")
        finally:
            host.close()
