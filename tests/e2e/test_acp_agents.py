"""The three real ACP agents hosted by agenthost: ``serve --agent acp -- <agent>``.

Claude Code (``claude-agent-acp``), Codex (``codex-acp``) and Gemini CLI (``gemini
--acp``) run under a real host, against their fake model APIs on 127.0.0.1, in the
clean environment of :mod:`acp_env` (the host itself is started with every variable of
the test process removed, so nothing of the caller's reaches the agent). Tests talk to
the host over its socket like any client. Skipped when an agent cannot be installed,
unless ``AGENTHOST_E2E_REQUIRED=1`` (CI), where that is a failure. Nothing sleeps.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
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

import hosttools
from conftest import HostFactory
from hosttools import PY, Event, HostProc, chat, events_until, history, is_result, wait_for

TIMEOUT = 60.0
#: An agent line carrying a chunk of LONG (the model's words, not a warning).
STREAMED = re.compile(r'"agent_message_chunk".*"text":\s*"word')
#: Variables the host itself needs from the test process (not the agent's business).
HOST_KEEPS = ("PYTHONPATH",)


@pytest.fixture(params=AGENTS)
def kit(request: pytest.FixtureRequest) -> AgentKit:
    """The agent under test; its package installed (skip, or fail in CI, without it)."""
    require_agent(request.param)
    return KITS[request.param]


@pytest.fixture
def dirs() -> Iterator[AgentDirs]:
    with agent_dirs() as made:
        yield made


def clean_wrapper(agent_env: dict[str, str]) -> list[str]:
    """``env -u ...``: the host starts without the test process's variables, so the
    agent sees only its own explicit environment (plus the host's notify socket)."""
    drop = [k for k in os.environ if k not in agent_env and k not in HOST_KEEPS]
    return ["env", *(f"--unset={k}" for k in drop)]


Start = Callable[..., HostProc]


@pytest.fixture
def start(kit: AgentKit, dirs: AgentDirs, host_factory: HostFactory) -> Start:
    """Start a host of the agent against ``api`` (in the agent's asking mode unless
    ``mode`` says otherwise); wait until its session exists."""

    def factory(
        api: Any, *args: str, agent_id: str = "acp1", prefix: tuple[str, ...] = ()
    ) -> HostProc:
        argv, env = agent_command(kit.name, api.url, dirs)
        host = host_factory(
            agent_id,
            "--agent",
            "acp",
            "--cwd",
            str(dirs.work),
            "--agent-opt",
            f"mode={kit.ask_mode}",
            *args,
            command=[*prefix, *argv],
            env=env,
            wrapper=clean_wrapper(env),
        )
        host.wait_state("idle", timeout=TIMEOUT)
        return host

    return factory


# The real agents answer slower than a fixture: every read waits up to TIMEOUT.
attached = functools.partial(hosttools.attached, timeout=TIMEOUT)
turn = functools.partial(hosttools.turn, timeout=TIMEOUT)


def said(events: list[Event]) -> str:
    """Every assistant text among ``events``, joined."""
    return "\n".join(str(e.get("content", "")) for e in chat(events) if e["role"] == "assistant")


def titled(api: Any) -> bool:
    """Whether codex-acp's title request (after a session's first turn) has come."""
    return any("very short title" in str(r.body) for r in api.requests)


def option_of(request: Event, kind: str) -> str:
    """The id of the request's option of this kind (ids differ per agent)."""
    return next(str(o["id"]) for o in request["options"] if o["kind"] == kind)


# --------------------------------------------------------------------------- tests


def test_text_turn(kit: AgentKit, start: Start) -> None:
    """A text turn: the ACP session id in status, the answer as an assistant entry, the
    turn's result, usage in status (Gemini reports none over ACP)."""
    with kit.fake(kit.text("Hello from the fake model.")) as api:
        host = start(api)
        agent = host.agent()
        assert agent["session_id"]
        assert agent["modes"]["current"] == kit.ask_mode
        events = turn(host, "Say hello.")
        assert "Hello from the fake model." in said(events)
        result = events[-1]["result"]
        assert result["stop_reason"] == "end_turn" and result["is_error"] is False
        assert result["session_id"] == agent["session_id"]
        agent = host.wait_state("idle")
        if kit.name == "gemini":
            assert "usage" not in result
        else:
            assert result["usage"]["output_tokens"] > 0
            assert agent["usage"]["output_tokens"] == result["usage"]["output_tokens"]
            assert agent["context"]["size"] > 0
        if kit.name == "claude":
            assert agent["cost_usd"] > 0
        assert any("Say hello." in str(r.body) for r in api.requests)


@pytest.mark.parametrize("kind", ["allow_once", "reject_once"])
def test_tool_turn_answered_after_a_detach(
    kit: AgentKit, start: Start, dirs: AgentDirs, kind: str
) -> None:
    """The agent asks before a shell command; the first client detaches; a second one
    answers with ``host.respond`` and the option of the wanted kind."""
    with kit.fake(kit.shell(COMMAND), default=kit.text("Done.")) as api:
        host = start(api)
        with attached(host) as first:
            assert first.request("host.send", {"input": "Write the file."})["success"]
            asked = events_until(first, lambda e: e["type"] == "permission_request")
            request = asked[-1]["request"]
            assert first.request("host.detach")["success"]
        assert "approved.txt" in request["tool_input"]
        assert {o["kind"] for o in request["options"]} >= {"allow_once", "reject_once"}
        host.wait_state("waiting", timeout=TIMEOUT)
        with attached(host) as second:
            (pending,) = second.request("host.pending")["payload"]["requests"]
            assert pending["request_id"] == request["request_id"]
            behavior = "allow" if kind == "allow_once" else "deny"
            answer = {
                "request_id": request["request_id"],
                "behavior": behavior,
                "option_id": option_of(request, kind),
            }
            assert second.request("host.respond", answer)["success"]
            events = events_until(second, is_result)
        host.wait_state("idle", timeout=TIMEOUT)
    ran = (dirs.work / "approved.txt").exists()
    stop = events[-1]["result"]["stop_reason"]
    tools = [e for e in history(host) if e["role"] == "tool"]
    results = [e for e in tools if "tool_result" in e]
    if kind == "allow_once":
        assert ran and stop == "end_turn"
        assert [r["is_error"] for r in results] == [False]
        if kit.name == "claude":  # Codex's output is elsewhere (below), Gemini sends none
            assert "hello" in results[0]["tool_result"]
        assert "Done." in said(events)
    else:
        assert not ran
        assert stop == (
            "cancelled" if kind == "reject_once" and kit.name == "codex" else "end_turn"
        )
        if kit.name == "gemini":
            assert tools == []  # Gemini never announces a rejected call
    starts = [e for e in tools if "tool_result" not in e]
    if not (kit.name == "gemini" and kind == "reject_once"):
        assert len(starts) == 1 and COMMAND in starts[0]["tool_input"]
        assert starts[0]["tool_use_id"] == request["tool_use_id"]


def test_cancel_mid_stream(kit: AgentKit, start: Start) -> None:
    """``host.interrupt`` while the model streams: the turn ends cancelled, the partial
    message is kept as aborted, and the session goes on."""
    with kit.fake(kit.slow(LONG), default=kit.text("After.")) as api:
        host = start(api)
        with attached(host) as conn:
            assert conn.request("host.send", {"input": "Talk."})["success"]
            events_until(
                conn, lambda e: e["type"] == "output" and bool(STREAMED.search(e.get("data", "")))
            )
            answer = conn.request("host.interrupt")
            assert answer["success"] and answer["payload"]["sent"] is True
            events = events_until(conn, is_result)
        assert events[-1]["result"]["stop_reason"] == "cancelled"
        assert events[-1]["result"]["interrupted"] is True
        partial = [e for e in chat(events) if e.get("aborted")]
        # (Codex's warning, a chunk without messageId, is joined to the model's words.)
        assert len(partial) == 1 and "word" in partial[0]["content"]
        assert partial[0]["content"].count("word") < 60
        host.wait_state("idle", timeout=TIMEOUT)
        assert "After." in said(turn(host, "Again."))


def test_cancel_with_an_open_permission_request(kit: AgentKit, start: Start) -> None:
    """``host.interrupt`` while the agent waits for a permission: the request is
    answered (or withdrawn) as cancelled, the turn ends cancelled, nothing runs.
    Gemini would wait for ever without that answer."""
    with kit.fake(kit.shell(COMMAND), default=kit.text("After.")) as api:
        host = start(api)
        with attached(host) as conn:
            assert conn.request("host.send", {"input": "Write the file."})["success"]
            events_until(conn, lambda e: e["type"] == "permission_request")
            assert conn.request("host.interrupt")["success"]
            events = events_until(conn, is_result)
        decided = [e["decision"]["behavior"] for e in events if e["type"] == "permission_response"]
        assert decided == ["cancelled"]
        assert events[-1]["result"]["stop_reason"] == "cancelled"
        assert host.wait_state("idle", timeout=TIMEOUT)["pending_requests"] == 0


def test_api_error(kit: AgentKit, start: Start) -> None:
    """A model API error ends the turn with an error (Codex reports it as text and a
    normal end); the next turn works."""
    with kit.fake(kit.api_error(), default=kit.text("Recovered.")) as api:
        host = start(api)
        events = turn(host, "Hi.")
        result = events[-1]["result"]
        if kit.name == "codex":
            assert result["stop_reason"] == "end_turn"
            assert "currently experiencing high demand" in said(events)
        else:
            assert result["is_error"] is True
            assert "fake boom" in said(events) or any(
                "fake boom" in str(e.get("error")) for e in events if e["type"] == "error"
            )
        host.wait_state("idle", timeout=TIMEOUT)
        assert "Recovered." in said(turn(host, "Again."))


def test_resume_after_a_host_restart(kit: AgentKit, start: Start) -> None:
    """Stop the host, start another with ``--resume SESSION_ID``: the same ACP session,
    the earlier conversation reaches the model, nothing of a replay recorded twice.
    (Gemini's agent runs with its clock two minutes ahead: it loses a session loaded in
    the minute it was made.)"""
    prefix: tuple[str, ...] = ()
    if kit.name == "gemini":
        prefix = tuple(clock_prefix("+120"))
    with kit.fake(kit.text("First answer."), default=kit.text("Second answer.")) as api:
        host = start(api)
        sid = host.agent()["session_id"]
        assert "First answer." in said(turn(host, "First question."))
        with host.client() as client:
            client.stop()
        host.wait_exit()
        again = start(api, "--resume", sid, prefix=prefix)
        assert again.agent()["session_id"] == sid
        assert "Second answer." in said(turn(again, "Second question."))
        # (some request: side calls, e.g. for a title, carry only the new prompt)
        bodies = [str(r.body) for r in api.requests]
        assert any("First question." in b and "Second question." in b for b in bodies)
    entries = history(again)
    assert [e["content"] for e in entries if e["role"] == "user"] == [
        "First question.",
        "Second question.",
    ]
    answers = [e["content"] for e in entries if e["role"] == "assistant"]
    assert sum("First answer." in a for a in answers) == 1  # the replay is not recorded


@pytest.mark.parametrize("kit", ["gemini"], indirect=True)
def test_gemini_with_the_auth_option(kit: AgentKit, start: Start) -> None:
    """``--agent-opt auth=gemini-api-key``: the host authenticates with a method Gemini
    offered before the session; the session works (Gemini also works without it)."""
    with kit.fake(kit.text("Authenticated.")) as api:
        host = start(api, "--agent-opt", "auth=gemini-api-key")
        assert host.agent().get("last_error") is None
        assert "Authenticated." in said(turn(host, "Hi."))


@pytest.mark.parametrize("kit", ["codex"], indirect=True)
def test_codex_command_output_is_the_tool_result(kit: AgentKit, start: Start) -> None:
    """codex-acp announces a terminal (``content: [{type: terminal}]``) and sends the
    command's output in ``_meta.terminal_output_delta {data}`` of its updates, its exit
    in ``_meta.terminal_exit``: that output is the tool's result."""
    with kit.fake(kit.shell(COMMAND), default=kit.text("Done.")) as api:
        host = start(api)
        with attached(host) as conn:
            assert conn.request("host.send", {"input": "Write the file."})["success"]
            request = events_until(conn, lambda e: e["type"] == "permission_request")[-1]["request"]
            answer = {"request_id": request["request_id"], "behavior": "allow"}
            assert conn.request("host.respond", answer)["success"]
            events_until(conn, is_result)
    (result,) = [e for e in history(host) if "tool_result" in e]
    assert result["tool_result"].strip() == "hello"


@pytest.mark.parametrize("kit", ["codex"], indirect=True)
def test_codex_warning_and_answer_are_two_messages(kit: AgentKit, start: Start) -> None:
    """Codex's adapter prints a warning as an agent message chunk without ``messageId``
    before the model's message, whose chunks carry one: two ACP messages."""
    with kit.fake(default=kit.text("Hello from the fake model.")) as api:
        host = start(api)
        contents = [e["content"] for e in chat(turn(host, "Say hello.")) if "content" in e]
    assert "Hello from the fake model." in contents


@pytest.mark.asyncio
async def test_an_editor_through_agenthost_acp(
    kit: AgentKit, start: Start, dirs: AgentDirs
) -> None:
    """The whole chain: an ACP editor (the SDK) runs ``agenthost acp ID``, which bridges
    to the host of the real agent. ``session/load`` replays what was said before the
    editor came (from the host's journal); a prompt with a shell command brings the
    agent's own permission options to the editor, whose allow_once runs it."""
    with kit.fake(kit.text("Said before."), default=kit.text("Done.")) as api:
        host = start(api)
        assert "Said before." in said(turn(host, "Before the editor."))
        if kit.name == "codex":  # its title request follows the first turn: let it pass
            wait_for(lambda: titled(api), TIMEOUT, "Codex's title request")
        api.add(kit.shell(COMMAND))
        host.wait_state("idle", timeout=TIMEOUT)
        bridge = [PY, "-m", "agenthost", "acp", host.agent_id, "--home", str(host.home)]
        async with AcpAgent(bridge, dict(os.environ), dirs.work) as editor:
            await editor.initialize()
            assert editor.init["agentCapabilities"]["loadSession"] is True
            editor.session_id = host.agent_id
            await asyncio.wait_for(
                editor.connection.load_session(
                    cwd=str(dirs.work), session_id=host.agent_id, mcp_servers=[]
                ),
                TIMEOUT,
            )
            assert "Said before." in editor.agent_text()
            users = [u for u in editor.updates() if u["sessionUpdate"] == "user_message_chunk"]
            assert [u["content"]["text"] for u in users] == ["Before the editor."]
            prompt = editor.prompt_task("Write the file.")
            ask = await editor.next_ask(timeout=TIMEOUT)
            assert {o["kind"] for o in ask.options} >= {"allow_once", "reject_once"}
            ask.choose("allow_once")
            assert await asyncio.wait_for(prompt, TIMEOUT) == "end_turn"
            assert "Done." in editor.agent_text()
    assert (dirs.work / "approved.txt").read_text() == "hello\n"
    assert [e["content"] for e in history(host) if e["role"] == "user"] == [
        "Before the editor.",
        "Write the file.",
    ]
