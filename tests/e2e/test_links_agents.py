"""Approval links answer the real permission requests of the real Claude Code and Codex
CLIs (hosted by real hosts, against the fake model APIs), through a real web gateway:
the link's POST is what a phone's notice action sends (no credentials, no Origin), and
the tool then runs (the file it makes is there) or does not.

Set up as tests/e2e/test_claude_host.py and test_codex_host.py (the CLIs installed from
npm; skipped without them unless ``AGENTHOST_E2E_REQUIRED=1``); the gateway as
tests/web/conftest.py starts it.
"""

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asking import (  # noqa: F401 (fixtures)
    APPROVAL_COMMAND,
    WRITE_COMMAND,
    anthropic,
    attached,
    claude,
    claude_bin,
    codex,
    codex_bin,
    decisions,
    dirs,
    openai,
    start_codex,
)
from claude_env import ClaudeDirs
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic, text, tool_use
from fakes.openai import FakeOpenAI, shell
from fakes.openai import text as openai_text
from web.webtools import Gateway, start_gateway

from agenthost.attention.keys import link_key
from agenthost.attention.links import new_link, sign

import hosttools
from conftest import HostFactory
from hosttools import DEADLINE, Event, HostProc, events_until, is_state


@pytest.fixture
def gateway(home: Path) -> Iterator[Gateway]:
    gw = start_gateway(home)
    try:
        yield gw
    finally:
        gw.stop()


def follow(gateway: Gateway, home: Path, agent_id: str, request: Event, decision: str) -> Any:
    """Sign a link for ``request`` with the home's key and POST it as ntfy would."""
    link = new_link(
        agent_id,
        request["request_id"],
        request["created_at"],
        decision,  # type: ignore[arg-type]
        now=time.time(),
        ttl=600,
    )
    url = f"{gateway.url}l/{sign(link, link_key(home))}"
    answer = httpx.post(url, timeout=DEADLINE)
    assert answer.status_code == 200, answer.text
    return answer.json()


def asked(conn: hosttools.RawConn, text_in: str) -> Event:
    assert conn.request("host.send", {"input": text_in})["success"]
    events = events_until(conn, is_state("waiting"))
    (request,) = [e["request"] for e in events if e["type"] == "permission_request"]
    return request  # type: ignore[no-any-return]


# ---- Claude Code -----------------------------------------------------------------------


def test_a_link_answers_claude_codes_request_and_the_tool_runs(
    claude: Callable[[], HostProc],
    anthropic: FakeAnthropic,
    dirs: ClaudeDirs,
    gateway: Gateway,
    home: Path,
) -> None:
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = claude()
    with attached(host) as conn:
        request = asked(conn, "Make a marker file")
        assert request["tool_input"] == WRITE_COMMAND
        answer = follow(gateway, home, "c1", request, "allow")
        assert answer["tool_name"] == "Bash" and answer["tool_input"] == WRITE_COMMAND
        events_until(conn, is_state("idle"))
    assert (dirs.worktree / "marker.txt").exists()  # the real CLI ran it
    assert decisions(host) == ["allowed by link"]


def test_a_deny_link_keeps_claude_code_from_running_the_tool(
    claude: Callable[[], HostProc],
    anthropic: FakeAnthropic,
    dirs: ClaudeDirs,
    gateway: Gateway,
    home: Path,
) -> None:
    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("OK, I will not."))
    host = claude()
    with attached(host) as conn:
        request = asked(conn, "Make a marker file")
        follow(gateway, home, "c1", request, "deny")
        events_until(conn, is_state("idle"))
    assert not (dirs.worktree / "marker.txt").exists()
    assert decisions(host) == ["denied by link"]


# ---- Codex -----------------------------------------------------------------------------


def test_a_link_answers_codexs_request_and_the_command_runs(
    codex_bin: Path,
    codex: CodexEnv,
    openai: FakeOpenAI,
    host_factory: HostFactory,
    gateway: Gateway,
    home: Path,
) -> None:
    openai.enqueue(shell(APPROVAL_COMMAND), openai_text("Written."))
    host = start_codex(host_factory, codex, codex_bin)
    with attached(host, offset=0) as conn:
        request = asked(conn, "Write approved.txt.")
        assert request["tool_input"] == APPROVAL_COMMAND
        follow(gateway, home, "cx1", request, "allow")
        events_until(conn, is_state("idle"))
    assert (codex.workdir / "approved.txt").read_text() == "hello\n"
    assert decisions(host) == ["allowed by link"]


def test_a_link_answers_claude_codes_tui_through_its_hook(
    host_factory: HostFactory,
    claude_bin: Path,
    anthropic: FakeAnthropic,
    dirs: ClaudeDirs,
    gateway: Gateway,
    home: Path,
) -> None:
    """The same one-tap link for Claude Code in its own TUI (``--agent pty``): the
    request comes from its PermissionRequest hook, the answer goes back through it."""
    from test_terminal_claude import tui

    anthropic.add(tool_use("Bash", {"command": WRITE_COMMAND}), text("Marker made."))
    host = tui(host_factory, claude_bin, dirs, anthropic)
    with attached(host) as conn:
        request = asked(conn, "Make a marker file")
        assert request["tool_input"] == WRITE_COMMAND
        answer = follow(gateway, home, "tui", request, "allow")
        assert answer["tool_name"] == "Bash"
        events_until(conn, is_state("idle"))
    assert (dirs.worktree / "marker.txt").exists()  # the real TUI ran it
    assert decisions(host) == ["allowed by link"]
