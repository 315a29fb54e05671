"""Smoke tests: three real ACP agents, driven directly over ACP by the official SDK.

No agenthost here: Claude Code (through ``claude-agent-acp``), Codex (through
``codex-acp``) and Gemini CLI (``gemini --acp``) each run against their fake model API on
127.0.0.1. These prove the fakes and the hermetic environments work, and pin the agents'
behaviours an ACP client must cope with (see ACP_FINDINGS.md). Skipped when an agent
cannot be installed, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI), where that is a failure.
Nothing sleeps: every wait has a deadline and wakes on the agent's messages.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp import RequestError
from acp_env import (
    AGENTS,
    COMMAND,
    KITS,
    LONG,
    AcpAgent,
    AgentDirs,
    AgentKit,
    agent_command,
    agent_dirs,
    clock_prefix,
    require_agent,
)

from hosttools import wait_for


@pytest.fixture
def dirs() -> Iterator[AgentDirs]:
    with agent_dirs() as made:
        yield made


@pytest.fixture(params=AGENTS)
def kit(request: pytest.FixtureRequest) -> AgentKit:
    require_agent(request.param)
    return KITS[request.param]


@pytest_asyncio.fixture
async def started(kit: AgentKit, dirs: AgentDirs) -> AsyncIterator[Any]:
    """A factory: the agent against a fake playing ``replies``, with a session."""
    stack: list[Any] = []

    async def start(*replies: Any, default: Any = None, mode: str | None = None) -> Any:
        api = kit.fake(*replies, default=default).start()
        stack.append(api)
        argv, env = agent_command(kit.name, api.url, dirs)
        agent = AcpAgent(argv, env, dirs.work)
        await agent.__aenter__()
        stack.append(agent)
        await agent.start()
        if mode:
            await agent.set_mode(mode)
        return agent, api

    yield start
    for item in reversed(stack):
        if isinstance(item, AcpAgent):
            await item.kill()
        else:
            item.stop()


def permission_index(agent: AcpAgent) -> int:
    """Where the first ``session/request_permission`` is in the agent's messages."""
    return agent.index_of(
        lambda d, m: d == "in" and m.get("method") == "session/request_permission"
    )


# --------------------------------------------------------------------------- text


@pytest.mark.asyncio
async def test_text_turn(kit: AgentKit, started: Any) -> None:
    """One prompt: the text arrives as agent message chunks; the model saw the prompt."""
    agent, api = await started(kit.text("Hello from the fake model."))
    assert await agent.prompt("Say hello.") == "end_turn"

    assert "Hello from the fake model." in agent.agent_text()
    chunks = [u for u in agent.updates() if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) >= 2  # streamed, not one final message
    assert any("Say hello." in str(r.body) for r in api.requests)
    result = next(m for d, m in agent.messages if d == "in" and "stopReason" in str(m))
    if kit.name == "gemini":  # no ACP usage: only the _meta quota
        assert "usage" not in result["result"]
        quota = result["result"]["_meta"]["quota"]["token_count"]
        assert quota == {"input_tokens": 100, "output_tokens": 10}
    else:
        assert result["result"]["usage"]["outputTokens"] > 0
        assert "usage_update" in agent.kinds()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "kit",
    [
        pytest.param("claude", id="claude"),
        pytest.param("codex", id="codex"),
    ],
    indirect=True,
)
async def test_warnings_are_agent_messages(kit: AgentKit, started: Any) -> None:
    """Claude's and Codex's adapters print warnings as ordinary agent message chunks,
    indistinguishable from the model's text but for the words."""
    agent, _ = await started(kit.text("The answer."))
    assert await agent.prompt("Say it.") == "end_turn"
    text = agent.agent_text()
    warning = {
        "claude": "**Warning:** We're changing auto mode",
        "codex": "Warning: Model metadata for `fake-codex-model` not found",
    }[kit.name]
    assert warning in text
    assert "The answer." in text


# --------------------------------------------------------------------------- tools


@pytest.mark.asyncio
async def test_tool_turn_allowed(kit: AgentKit, started: Any, dirs: AgentDirs) -> None:
    """A shell command asks permission; allow_once (chosen by kind) runs it."""
    agent, api = await started(kit.shell(COMMAND), kit.text("Done."), mode=kit.ask_mode)
    turn = agent.prompt_task("Write the file.")
    ask = await agent.next_ask()
    assert {o["kind"] for o in ask.options} >= {"allow_once", "reject_once"}
    ask.choose("allow_once")
    assert await asyncio.wait_for(turn, 60) == "end_turn"

    assert (dirs.work / "approved.txt").read_text() == "hello\n"
    call_id = ask.tool_call["toolCallId"]
    updates = [u for u in agent.tool_calls() if u["toolCallId"] == call_id]
    assert updates[-1]["status"] == "completed"
    assert "Done." in agent.agent_text()
    assert len(agent.asks) == 1


@pytest.mark.asyncio
async def test_tool_turn_rejected(kit: AgentKit, started: Any, dirs: AgentDirs) -> None:
    """reject_once: the command never runs. Codex's reject option ("cancel") ends the
    whole turn as cancelled; Claude and Gemini tell the model and go on."""
    agent, api = await started(kit.shell(COMMAND), kit.text("Done."), mode=kit.ask_mode)
    turn = agent.prompt_task("Write the file.")
    ask = await agent.next_ask()
    option_id = ask.choose("reject_once")
    stop = await asyncio.wait_for(turn, 60)

    assert not (dirs.work / "approved.txt").exists()
    if kit.name == "codex":
        assert option_id == "cancel"
        assert stop == "cancelled"
        assert "Done." not in agent.agent_text()  # no second model call
    else:
        assert stop == "end_turn"
        assert "Done." in agent.agent_text()


@pytest.mark.asyncio
@pytest.mark.parametrize("kit", ["claude"], indirect=True)
async def test_claude_first_tool_call_has_empty_raw_input(kit: AgentKit, started: Any) -> None:
    """Claude's adapter announces the tool call before its input streamed in: the first
    ``tool_call`` has ``rawInput: {}``; the input arrives in ``tool_call_update``s."""
    agent, _ = await started(kit.shell(COMMAND), kit.text("Done."), mode=kit.ask_mode)
    turn = agent.prompt_task("Write the file.")
    (await agent.next_ask()).choose("allow_once")
    await asyncio.wait_for(turn, 60)

    first, *rest = agent.tool_calls()
    assert first["sessionUpdate"] == "tool_call"
    assert first["rawInput"] == {}
    assert first["title"] == "Terminal"
    inputs = [u["rawInput"] for u in rest if u.get("rawInput")]
    assert inputs and inputs[-1]["command"] == COMMAND


@pytest.mark.asyncio
@pytest.mark.parametrize("choice", ["allow_once", "reject_once"])
@pytest.mark.parametrize("kit", ["gemini"], indirect=True)
async def test_gemini_asks_before_any_tool_call(kit: AgentKit, started: Any, choice: str) -> None:
    """Gemini sends no ``tool_call`` before asking; after an allow only an update (no
    ``tool_call`` at all), after a reject nothing about the call."""
    agent, _ = await started(kit.shell(COMMAND), kit.text("Done."), mode=kit.ask_mode)
    turn = agent.prompt_task("Write the file.")
    ask = await agent.next_ask()
    assert agent.tool_calls() == []
    ask.choose(choice)
    await asyncio.wait_for(turn, 60)

    kinds = [u["sessionUpdate"] for u in agent.tool_calls()]
    assert "tool_call" not in kinds
    if choice == "allow_once":
        assert kinds == ["tool_call_update"]
        assert agent.tool_calls()[0]["toolCallId"] == ask.tool_call["toolCallId"]
    else:
        assert kinds == []


# --------------------------------------------------------------------------- cancel


@pytest.mark.asyncio
async def test_cancel_mid_stream(kit: AgentKit, started: Any) -> None:
    """session/cancel while the model streams: the turn ends ``cancelled``; the next
    prompt works. (Wait for the model's own words: Codex prints a warning as an agent
    message before it even calls the model.)"""
    agent, api = await started(kit.slow(LONG), default=kit.text("After."))
    turn = agent.prompt_task("Talk.")
    await agent.wait_until(lambda: "word word" in agent.agent_text(), what="streamed words")
    await agent.cancel()
    assert await asyncio.wait_for(turn, 30) == "cancelled"
    assert agent.agent_text().count("word") < 60
    wait_for(lambda: any(r.disconnected for r in api.requests), 10, "the model stream closed")

    assert await agent.prompt("Again.") == "end_turn"
    assert "After." in agent.agent_text()


@pytest.mark.asyncio
async def test_cancel_with_an_open_permission_request(
    kit: AgentKit, started: Any, dirs: AgentDirs
) -> None:
    """session/cancel while a permission request is open. Claude's and Codex's adapters
    withdraw it (``$/cancel_request``) and end the turn at once; Gemini waits until the
    client answers the request ``cancelled``, as the protocol requires of clients."""
    agent, _ = await started(kit.shell(COMMAND), default=kit.text("After."), mode=kit.ask_mode)
    turn = agent.prompt_task("Write the file.")
    ask = await agent.next_ask()
    await agent.cancel()
    if kit.name == "gemini":
        # A request sent after the cancel is answered while the turn still waits.
        await asyncio.wait_for(
            agent.connection.set_session_mode(mode_id=kit.ask_mode, session_id=agent.session_id),
            30,
        )
        assert not turn.done()
        ask.cancel()
        assert await asyncio.wait_for(turn, 30) == "cancelled"
    else:
        assert await asyncio.wait_for(turn, 30) == "cancelled"
        assert not ask.answer.done()  # we never answered it
        request_id = agent.messages[permission_index(agent)][1]["id"]
        assert any(
            d == "in"
            and m.get("method") == "$/cancel_request"
            and m["params"]["requestId"] == request_id
            for d, m in agent.messages
        )
    assert not (dirs.work / "approved.txt").exists()
    assert await agent.prompt("Again.") == "end_turn"


# --------------------------------------------------------------------------- errors


@pytest.mark.asyncio
async def test_api_error(kit: AgentKit, started: Any) -> None:
    """A model API error: Claude fails the prompt (-32603, and says it as an agent
    message); Codex says it as an agent message and ends the turn normally; Gemini fails
    the prompt with the HTTP status as the JSON-RPC code. The next prompt works."""
    agent, _ = await started(kit.api_error(), default=kit.text("Recovered."))
    if kit.name == "codex":
        assert await agent.prompt("Hi.") == "end_turn"
        assert "currently experiencing high demand" in agent.agent_text()
    else:
        with pytest.raises(RequestError) as failed:
            await agent.prompt("Hi.")
        if kit.name == "claude":
            assert failed.value.code == -32603
            assert "API Error: 500 fake boom" in str(failed.value)
            assert "API Error: 500 fake boom" in agent.agent_text()
        else:
            assert failed.value.code == 400
            assert "fake boom" in str(failed.value)
    assert await agent.prompt("Again.") == "end_turn"
    assert "Recovered." in agent.agent_text()


# --------------------------------------------------------------------------- resume


async def _first_session(kit: AgentKit, api: Any, dirs: AgentDirs, argv: list[str]) -> str:
    _, env = agent_command(kit.name, api.url, dirs)
    async with AcpAgent(argv, env, dirs.work) as agent:
        await agent.start()
        assert await agent.prompt("First question.") == "end_turn"
        return agent.session_id


@pytest.mark.asyncio
@pytest.mark.parametrize("kit", ["claude", "codex"], indirect=True)
async def test_resume_in_a_new_process(kit: AgentKit, dirs: AgentDirs) -> None:
    """``session/resume`` in a second process: no replay, and the model gets the earlier
    conversation with the next prompt."""
    with kit.fake(kit.text("First answer."), default=kit.text("Second answer.")) as api:
        argv, env = agent_command(kit.name, api.url, dirs)
        session_id = await _first_session(kit, api, dirs, argv)
        async with AcpAgent(argv, env, dirs.work) as agent:
            await agent.initialize()
            assert "resume" in agent.init["agentCapabilities"]["sessionCapabilities"]
            await asyncio.wait_for(
                agent.connection.resume_session(
                    cwd=str(dirs.work), session_id=session_id, mcp_servers=[]
                ),
                60,
            )
            agent.session_id = session_id
            assert "agent_message_chunk" not in agent.kinds()  # nothing replayed
            assert await agent.prompt("Second question.") == "end_turn"
            assert "Second answer." in agent.agent_text()
        # (some request: side calls, e.g. for a title, carry only the new prompt)
        bodies = [str(r.body) for r in api.requests]
        assert any("First question." in b and "Second question." in b for b in bodies)


@pytest.mark.asyncio
@pytest.mark.parametrize("kit", ["gemini"], indirect=True)
async def test_gemini_load_replays_after_the_response(kit: AgentKit, dirs: AgentDirs) -> None:
    """``session/load`` (Gemini offers no resume) in a second process whose clock is two
    minutes ahead: the conversation is replayed as updates, streamed on after the load
    response, and the session goes on."""
    later = clock_prefix("+120")
    with kit.fake(kit.text("First answer."), default=kit.text("Second answer.")) as api:
        argv, env = agent_command(kit.name, api.url, dirs)
        session_id = await _first_session(kit, api, dirs, argv)
        async with AcpAgent([*later, *argv], env, dirs.work) as agent:
            await agent.initialize()
            agent.session_id = session_id
            await asyncio.wait_for(
                agent.connection.load_session(
                    cwd=str(dirs.work), session_id=session_id, mcp_servers=[]
                ),
                60,
            )
            await agent.wait_until(
                lambda: "First answer." in agent.agent_text(), what="the replayed answer"
            )
            response = agent.index_of(lambda d, m: d == "in" and m.get("id") == 1)
            replayed = agent.index_of(lambda d, m: "First answer." in str(m) and d == "in")
            assert response < replayed  # the replay follows the response
            user = [u for u in agent.updates() if u["sessionUpdate"] == "user_message_chunk"]
            assert any(u["content"]["text"] == "First question." for u in user)
            assert await agent.prompt("Second question.") == "end_turn"
        bodies = [str(r.body) for r in api.requests]
        assert any("First question." in b and "Second question." in b for b in bodies)


@pytest.mark.asyncio
@pytest.mark.parametrize("kit", ["gemini"], indirect=True)
async def test_gemini_loses_a_session_loaded_in_the_same_minute(
    kit: AgentKit, dirs: AgentDirs
) -> None:
    """Gemini names a session's file by the minute and the id's first 8 characters, and
    loading writes that file anew: loaded within the minute it was created, the session
    is overwritten before it is read (upstream bug). Both processes start at the same
    fake wall-clock minute here, so the loss is certain."""
    frozen = clock_prefix("@2026-01-01T12:00:00Z")
    with kit.fake(kit.text("First answer.")) as api:
        argv, env = agent_command(kit.name, api.url, dirs)
        session_id = await _first_session(kit, api, dirs, [*frozen, *argv])
        async with AcpAgent([*frozen, *argv], env, dirs.work) as agent:
            await agent.initialize()
            with pytest.raises(RequestError) as failed:
                await asyncio.wait_for(
                    agent.connection.load_session(
                        cwd=str(dirs.work), session_id=session_id, mcp_servers=[]
                    ),
                    60,
                )
    assert failed.value.code == -32603
    assert "No previous sessions found" in str(failed.value.data)


# --------------------------------------------------------------------------- garbage


@pytest.mark.asyncio
async def test_garbage_line_does_not_kill_the_agent(kit: AgentKit, started: Any) -> None:
    """A line that is not JSON-RPC on the agent's stdin: it stays up and answers the
    next prompt."""
    agent, _ = await started(kit.text("Still here."))
    assert agent.proc is not None and agent.proc.stdin is not None
    agent.proc.stdin.write(b"\x00not json {\n" + b'{"jsonrpc": "2.0", "id": "x"}\n')
    await agent.proc.stdin.drain()
    assert await agent.prompt("Hi.") == "end_turn"
    assert "Still here." in agent.agent_text()
    assert agent.proc.returncode is None


def test_clock_prefix_moves_node_s_clock(tmp_path: Path) -> None:
    """clock_prefix runs Node with its wall clock moved (ahead, or from a given time),
    and leaves Node's own Dates (fs.Stats) Dates."""
    node = shutil.which("node")
    assert node is not None, "node comes with the agents' CLIs"
    script = (
        "const real = Number(require('child_process').execSync('date +%s'));"
        "const st = require('fs').statSync('.');"
        "console.log(JSON.stringify({ahead: Date.now() / 1000 - real,"
        " iso: new Date().toISOString(), text: typeof Date(), stat: st.mtime instanceof Date}));"
    )
    for clock, check in [
        ("+120", lambda r: 115 < r["ahead"] < 125),
        ("@2026-01-01T12:00:00Z", lambda r: r["iso"].startswith("2026-01-01T12:00:0")),
    ]:
        done = subprocess.run(
            [*clock_prefix(clock), node, "-e", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=True,
        )
        result = json.loads(done.stdout)
        assert check(result), (clock, result)
        assert result["text"] == "string" and result["stat"] is True
    bad = subprocess.run(
        [*clock_prefix("@not a time"), node, "-e", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode != 0 and "cannot read" in bad.stderr
