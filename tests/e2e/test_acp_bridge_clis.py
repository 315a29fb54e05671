"""``agenthost acp ID`` in front of the real Claude Code and Codex CLIs.

The ``claude`` (stream-json) and ``codex`` (app-server) adapters, each hosting its real
CLI against its fake model API exactly as tests/e2e/test_claude_host.py and
tests/e2e/test_codex_host.py start them, served to an ACP editor: the official SDK runs
``agenthost acp ID`` as Zed would. An earlier turn is said before the editor comes; the
editor's ``session/load`` replays it from the host's journal; its prompt makes the agent
run a shell command that asks permission, which the editor allows; the tool call, its
completion and the final answer reach the editor, and the prompt ends ``end_turn``.
Whatever the agent, an editor sees one ACP session. Skipped when a CLI cannot be
installed, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI). Nothing sleeps.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp_env import COMMAND, AcpAgent
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes import anthropic, openai

from conftest import HostFactory
from hosttools import PY, HostProc, chat, history, turn

TIMEOUT = 30.0
BEFORE = "Before the editor."
SAID_BEFORE = "Said before."
PROMPT = "Write the file."
DONE = "Done, the file says hello."
JsonDict = dict[str, Any]


def cli(name: str) -> Path:
    """The real CLI ``name``, installed on first use; skip (or fail in CI) without it."""
    return require_cli(name)


# The fakes and directories are fixtures asked for before ``host_factory``, so that they
# outlive the hosts (torn down first) and their agents.


@pytest.fixture
def claude_dirs() -> Iterator[ClaudeDirs]:
    with temp_dirs() as created:
        yield created


@pytest.fixture
def claude_api() -> Iterator[anthropic.FakeAnthropic]:
    with anthropic.FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def codex_api() -> Iterator[openai.FakeOpenAI]:
    with openai.FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def codex(codex_api: openai.FakeOpenAI) -> Iterator[CodexEnv]:
    """CODEX_HOME with a provider pointing at the fake (as test_codex_host has it)."""
    env = CodexEnv.create(codex_api.url, request_max_retries=1, stream_max_retries=1)
    try:
        yield env
    finally:
        env.cleanup()


def said_before(host: HostProc) -> None:
    """The earlier turn, said before any editor comes."""
    answers = [e.get("content") for e in chat(turn(host, BEFORE, timeout=TIMEOUT))]
    assert SAID_BEFORE in answers
    host.wait_state("idle", timeout=TIMEOUT)


# --------------------------------------------------------------------------- the editor


def metas(editor: AcpAgent) -> list[JsonDict]:
    """``_meta.agenthost`` of every ``session/update`` the editor received."""
    return [
        message["params"]["_meta"]["agenthost"]
        for direction, message in editor.messages
        if direction == "in" and message.get("method") == "session/update"
    ]


def texts(updates: list[JsonDict], kind: str) -> list[str]:
    """The texts of the ``kind`` chunks (user_message_chunk, ...) among ``updates``."""
    return [str(u["content"]["text"]) for u in updates if u["sessionUpdate"] == kind]


async def load(editor: AcpAgent, session_id: str) -> None:
    """``session/load`` of ``session_id``, answered once its replay is written."""
    connection = editor.connection
    await asyncio.wait_for(
        connection.load_session(cwd=str(editor.cwd), session_id=session_id, mcp_servers=[]),
        TIMEOUT,
    )


async def editor_round(host: HostProc, work: Path) -> tuple[AcpAgent, int]:
    """The editor's whole visit: load (checked), a prompt whose permission it allows.

    Returns the editor (its messages recorded) and how many updates the load replayed.
    """
    bridge = [PY, "-m", "agenthost", "acp", host.agent_id, "--home", str(host.home)]
    async with AcpAgent(bridge, dict(os.environ), work) as editor:
        await editor.initialize()
        assert editor.init["agentCapabilities"]["loadSession"] is True
        with pytest.raises(RequestError) as wrong:  # a session this bridge does not serve
            await load(editor, f"{host.agent_id}\x00../x")
        assert wrong.value.code == -32002  # RESOURCE_NOT_FOUND; the bridge goes on
        editor.session_id = host.agent_id
        await load(editor, host.agent_id)
        replay = editor.updates()
        assert texts(replay, "user_message_chunk") == [BEFORE]
        assert texts(replay, "agent_message_chunk") == [SAID_BEFORE]
        kinds = [u["sessionUpdate"] for u in replay]
        assert kinds.index("user_message_chunk") < kinds.index("agent_message_chunk")

        prompt = editor.prompt_task(PROMPT)
        ask = await editor.next_ask(timeout=TIMEOUT)
        assert {o["kind"] for o in ask.options} >= {"allow_once", "reject_once"}
        assert COMMAND in ask.tool_call["title"], ask.tool_call
        assert ask.tool_call["kind"] == "execute"
        ask.choose("allow_once")
        assert await asyncio.wait_for(prompt, TIMEOUT) == "end_turn", editor.transcript()
        live = editor.updates()[len(replay) :]
        # (both adapters announce the call before they ask about it)
        started = editor.index_of(
            lambda d, m: m.get("params", {}).get("update", {}).get("sessionUpdate") == "tool_call"
        )
        asked = editor.index_of(lambda d, m: m.get("method") == "session/request_permission")
        assert 0 <= started < asked, editor.transcript()
        check_live(live, str(ask.tool_call["toolCallId"]), editor)
    return editor, len(replay)


def check_live(live: list[JsonDict], call_id: str, editor: AcpAgent) -> None:
    """The prompt's updates: one tool call (the one asked about) started, completed with
    the command's output, then the final answer; the editor's own message not echoed."""
    transcript = editor.transcript()
    assert texts(live, "user_message_chunk") == [], transcript
    calls = [u for u in live if u["sessionUpdate"] == "tool_call"]
    assert [c["toolCallId"] for c in calls] == [call_id], transcript
    assert calls[0]["kind"] == "execute" and COMMAND in calls[0]["title"]
    updates = [u for u in live if u["sessionUpdate"] == "tool_call_update"]
    assert {u["toolCallId"] for u in updates} == {call_id}, transcript
    done = [u for u in updates if u.get("status") == "completed"]
    assert len(done) == 1, transcript
    output = [c["content"]["text"] for c in done[0]["content"] if c["type"] == "content"]
    assert [o.strip() for o in output] == ["hello"], transcript
    assert not [u for u in updates if u.get("status") == "failed"], transcript
    kinds = [u["sessionUpdate"] for u in live]
    assert kinds.index("tool_call") < kinds.index("tool_call_update"), transcript
    answer = texts(live, "agent_message_chunk")
    assert answer and answer[-1] == DONE, transcript
    last_tool = max(i for i, k in enumerate(kinds) if k.startswith("tool_call"))
    assert kinds[last_tool + 1 :].count("agent_message_chunk") >= 1, transcript


def check_session(host: HostProc, editor: AcpAgent, replayed: int, work: Path) -> None:
    """What both kinds share after the editor left: offsets, the file, the history."""
    meta = metas(editor)
    seen = [m["offset"] for m in meta]
    assert len(seen) == len(editor.updates()) > replayed
    assert all(a < b for a, b in zip(seen, seen[1:], strict=False)), seen
    assert len({m["epoch"] for m in meta}) == 1 and meta[0]["epoch"]
    assert (work / "approved.txt").read_text() == "hello\n"
    assert [e["content"] for e in history(host) if e["role"] == "user"] == [BEFORE, PROMPT]


# --------------------------------------------------------------------------- the tests


@pytest.mark.asyncio
async def test_claude_cli_through_agenthost_acp(
    claude_api: anthropic.FakeAnthropic, claude_dirs: ClaudeDirs, host_factory: HostFactory
) -> None:
    """``serve --agent claude`` (the real CLI, asking through its permission prompt
    tool) behind ``agenthost acp``: replay, permission round trip, tool call, answer."""
    binary = cli("claude")
    claude_api.add(
        anthropic.text(SAID_BEFORE),
        anthropic.tool_use("Bash", {"command": COMMAND, "description": "Write the file"}),
        anthropic.text(DONE),
    )
    env = claude_env(claude_api.url, claude_dirs, extra={**FAST_RETRY_ENV})
    env["AGENTHOST_CLAUDE_BIN"] = str(binary)
    host = host_factory(
        "c1",
        "--agent",
        "claude",
        "--cwd",
        str(claude_dirs.worktree),
        command=["--model", DEFAULT_MODEL],
        env=env,
    )
    said_before(host)
    editor, replayed = await editor_round(host, claude_dirs.worktree)
    check_session(host, editor, replayed, claude_dirs.worktree)


@pytest.mark.asyncio
async def test_codex_cli_through_agenthost_acp(
    codex_api: openai.FakeOpenAI, codex: CodexEnv, host_factory: HostFactory
) -> None:
    """``serve --agent codex`` (the real app-server, asking before every command)
    behind ``agenthost acp``: replay, permission round trip, tool call, answer."""
    binary = cli("codex")
    codex_api.enqueue(openai.text(SAID_BEFORE), openai.shell(COMMAND), openai.text(DONE))
    host = host_factory(
        "cx1",
        "--agent",
        "codex",
        "--cwd",
        str(codex.workdir),
        "--agent-opt",
        "approval_policy=untrusted",
        env={**codex.env, "AGENTHOST_CODEX_BIN": str(binary)},
    )
    host.wait_state("idle", timeout=TIMEOUT)
    said_before(host)
    editor, replayed = await editor_round(host, codex.workdir)
    check_session(host, editor, replayed, codex.workdir)
