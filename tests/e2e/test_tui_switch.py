"""``agenthost tui`` with the real Claude Code and Codex: one conversation, both ways
(docs/terminal.md).

The daemon spawns the structured agent (``--agent claude``: the CLI against
:class:`fakes.anthropic.FakeAnthropic`; ``--agent codex``: ``codex app-server`` against
:class:`fakes.openai.FakeOpenAI`); one turn makes the session; the daemon switches the
agent to the CLI's own TUI (``claude --resume SESSION``, ``codex resume THREAD``, in a
terminal agent), driven here through the host protocol (``host.send``, ``host.input``,
``host.screen``); a turn typed in the TUI sends the earlier conversation to the model;
quitting the TUI brings the structured agent back on the session, and its turn sees the
whole conversation. Skipped without the CLIs unless ``AGENTHOST_E2E_REQUIRED=1``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes import anthropic, openai
from test_hooks_tui import first_run_done

from daemontools import DaemonWorld, daemon_world
from hosttools import RawConn, wait_for

TIMEOUT = 60.0
ID = "tui1"


@dataclass
class Cli:
    """What differs between the two CLIs in the scenario."""

    agent: str
    """``daemon.spawn``'s ``agent``."""
    spawn: dict[str, Any]
    """The rest of ``daemon.spawn``'s payload (cwd, env, command)."""
    said_last: Callable[[], str]
    """What the user said in the model's newest request of the conversation."""
    resumes: Callable[[list[str], str], bool]
    """Whether a TUI command resumes that session."""
    quit: str
    """The TUI's command that quits it."""


def _claude(stack: contextlib.ExitStack) -> Cli:
    server = stack.enter_context(anthropic.FakeAnthropic())
    server.add(
        anthropic.text("Noted: blue."),
        anthropic.text("Noted: a cat."),
        anthropic.text("Blue, and a cat."),
    )
    dirs = stack.enter_context(temp_dirs())
    env = claude_env(server.url, dirs, extra=FAST_RETRY_ENV)
    first_run_done(dirs, env["ANTHROPIC_API_KEY"])  # the TUI opens at its prompt
    return Cli(
        agent="claude",
        spawn={"cwd": str(dirs.worktree), "command": ["--model", DEFAULT_MODEL], "env": env},
        said_last=lambda: "\n".join(server.user_texts(server.turn_requests()[-1])),
        resumes=lambda command, session: command[1:3] == ["--resume", session],
        quit="/exit",
    )


def _codex(stack: contextlib.ExitStack) -> Cli:
    api = stack.enter_context(
        openai.FakeOpenAI(
            [openai.text("Noted: blue."), openai.text("Noted: a cat."), openai.text("Blue.")]
        )
    )
    env = CodexEnv.create(api.url)
    stack.callback(env.cleanup)
    with env.config_path.open("a") as config:  # the folder's trust screen
        config.write(f'\n[projects."{env.workdir}"]\ntrust_level = "trusted"\n')

    def said_last() -> str:
        # Codex also asks the model for a title of a new thread, at a time of its own
        for call in reversed(api.responses_requests()):
            said = "\n".join(call.user_texts())
            if "single-line task title" not in said:
                return said
        raise AssertionError("no request of the conversation")

    return Cli(
        agent="codex",
        spawn={"cwd": str(env.workdir), "env": env.env},
        said_last=said_last,
        resumes=lambda command, thread: command[1] == "resume" and command[-1] == thread,
        quit="/quit",
    )


CLIS = {"claude": _claude, "codex": _codex}


@pytest.fixture(params=sorted(CLIS))
def cli(request: pytest.FixtureRequest) -> Iterator[Cli]:
    require_cli(request.param)
    with contextlib.ExitStack() as stack:
        yield CLIS[request.param](stack)


@pytest.fixture
def world(home: Path, cli: Cli) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        # the daemon's and its hosts' CLI
        started.env[f"AGENTHOST_{cli.agent.upper()}_BIN"] = str(require_cli(cli.agent))
        yield started


def request(world: DaemonWorld, mtype: str, payload: Any = None) -> dict[str, Any]:
    try:
        with RawConn(world.home / "hosts" / f"{ID}.sock", timeout=30) as conn:
            answer = conn.request(mtype, payload)
    except OSError:
        return {}
    return answer.get("payload") or {} if answer["success"] else {}


def screen(world: DaemonWorld) -> str:
    return "\n".join(request(world, "host.screen").get("lines", []))


def idle(world: DaemonWorld) -> None:
    wait_for(lambda: request(world, "host.status")["agent"]["state"] == "idle", TIMEOUT, "idle")


def turn(world: DaemonWorld, message: str) -> dict[str, Any]:
    with RawConn(world.home / "hosts" / f"{ID}.sock", timeout=TIMEOUT) as conn:
        conn.request("host.attach", {"offset": 10**9})
        conn.send("host.send", {"input": message})
        result: dict[str, Any] = conn.read_until(lambda f: f.get("type") == "result")["result"]
        return result


def test_a_structured_agent_opens_its_tui_on_the_session_and_comes_back(
    world: DaemonWorld, cli: Cli
) -> None:
    world.start_daemon("--scan-interval", "0")
    world.request("daemon.spawn", {"agent_id": ID, "agent": cli.agent, **cli.spawn})
    idle(world)
    session = turn(world, "My colour is blue")["session_id"]
    wait_for(lambda: world.agents()[ID].get("session_id") == session, what="session recorded")

    switched = world.request("daemon.switch", {"agent_id": ID, "to": "tui"}, timeout=TIMEOUT)
    assert cli.resumes(switched["command"], session), switched["command"]
    wait_for(lambda: "Noted: blue." in screen(world), TIMEOUT, "the conversation so far")
    idle(world)
    assert request(world, "host.send", {"input": "My pet is a cat"}) is not None
    wait_for(lambda: "Noted: a cat." in screen(world), TIMEOUT, "the TUI's answer")
    said = cli.said_last()
    assert "My colour is blue" in said, said  # the same session
    idle(world)
    # the session the TUI ended on (Claude Code's, read from its hooks; Codex's TUI
    # reports none: it stays on its thread)
    newest = request(world, "host.status")["agent"].get("session_id") or session

    request(world, "host.input", {"data": cli.quit})
    wait_for(lambda: cli.quit in screen(world), TIMEOUT, f"{cli.quit} typed")
    request(world, "host.input", {"data": "\r"})  # the person quits the TUI

    def structured() -> bool:
        agent = world.agents()[ID]
        info = request(world, "host.status").get("agent", {})
        return (
            agent["status"] == "running"
            and not agent.get("tui")
            and agent["spec"]["agent"] == cli.agent
            and info.get("state") == "idle"
        )

    wait_for(structured, TIMEOUT, "the structured agent again")
    assert world.agents()[ID]["spec"]["resume"] == newest
    turn(world, "What are my colour and my pet?")
    said = cli.said_last()
    assert "My colour is blue" in said and "My pet is a cat" in said, said

    with RawConn(world.home / "hosts" / f"{ID}.sock") as conn:
        entries = conn.request("host.history")["payload"]["entries"]
    roles = [(e["role"], e.get("content", "")) for e in entries]
    switches = [c for r, c in roles if r == "governance" and c.startswith("switched")]
    assert len(switches) == 2, roles
    assert roles[0] == ("user", "My colour is blue")
    assert ("user", "My pet is a cat") in roles  # the TUI's turn, typed by host.send
    assert roles[-1][0] == "assistant"
