"""Auto-resume after a usage limit with the real Claude Code and Codex CLIs, hosted by a
real host, against the fake model APIs answering with a usage limit and then
succeeding: the agent is paused until the reset, resumed, and the next model request
carries the message that tells it what was interrupted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from asking import claude_host
from claude_env import claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes import anthropic, openai

from conftest import HostFactory
from hosttools import attached, events_until, is_state

RESUMED_TEXT = "stopped by a usage limit"


def _is_action(action: str) -> object:
    return lambda e: e["type"] == "governance" and e["governance"]["action"] == action


@pytest.fixture
def claude_bin() -> Path:
    return require_cli("claude")


@pytest.fixture
def codex_bin() -> Path:
    return require_cli("codex")


@pytest.fixture
def fake_anthropic() -> Iterator[anthropic.FakeAnthropic]:
    with anthropic.FakeAnthropic() as fake:
        yield fake


def test_claude_signed_in_is_paused_and_resumed_by_itself(
    claude_bin: Path, fake_anthropic: anthropic.FakeAnthropic, host_factory: HostFactory
) -> None:
    reset = int(time.time()) + 2
    limited = anthropic.error(
        429,
        body={"type": "error", "error": {"type": "rate_limit_error", "message": "limited"}},
        headers={
            # what the API tells a subscription's client when its limit is spent
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(reset),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
        },
    )
    fake_anthropic.add(limited, anthropic.text("Carrying on."))
    with temp_dirs() as dirs:
        env = claude_env(fake_anthropic.url, dirs, extra={"CLAUDE_CODE_MAX_RETRIES": "0"})
        # signed in with a subscription (an OAuth token), not an API key: only then does
        # the CLI report when the limit resets (tests/e2e/CLAUDE_FINDINGS.md)
        env.pop("ANTHROPIC_API_KEY")
        env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-fake"
        host = claude_host(host_factory, "cl1", claude_bin, dirs, env)
        with attached(host, timeout=60) as conn:
            assert conn.request("host.send", {"input": "Refactor the parser."})["success"]
            events = events_until(conn, is_state("paused"))
            [paused] = [e["governance"] for e in events if e["type"] == "governance"]
            assert "5-hour limit" in paused["reason"]
            assert paused["until"] >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(reset))
            events_until(conn, _is_action("resumed"))  # type: ignore[arg-type]
            events = events_until(conn, lambda e: e["type"] == "result")
        assert events[-1]["result"]["is_error"] is False
        assert any(
            e["type"] == "chat_entry" and e["chat_entry"].get("content") == "Carrying on."
            for e in events
        )
        last = fake_anthropic.turn_requests()[-1]
        assert RESUMED_TEXT in str(last.body) and "Refactor the parser." in str(last.body)
        assert time.time() >= reset


def test_codex_is_paused_until_the_stated_time_and_resumed_on_request(
    codex_bin: Path, host_factory: HostFactory
) -> None:
    with openai.FakeOpenAI() as fake:
        env0 = CodexEnv.create(fake.url, request_max_retries=0, stream_max_retries=0)
        try:
            reset = int(time.time()) + 600
            body = {
                "error": {
                    "type": "usage_limit_reached",
                    "message": "The usage limit has been reached",
                    "plan_type": "plus",
                    "resets_at": reset,
                }
            }
            fake.enqueue(openai.error(429, body), openai.text("Carrying on."))
            env = {**env0.env, "AGENTHOST_CODEX_BIN": str(codex_bin)}
            host = host_factory("cx1", "--agent", "codex", "--cwd", str(env0.workdir), env=env)
            host.wait_state("idle", timeout=30)
            with attached(host, timeout=60) as conn:
                assert conn.request("host.send", {"input": "Fix the tests."})["success"]
                events = events_until(conn, is_state("paused"))
                [paused] = [e["governance"] for e in events if e["type"] == "governance"]
                assert "try again at" in paused["reason"]
                # "12:42 AM" has minute precision: paused to the end of that minute
                until = paused["until"]
                stated = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(reset))
                assert until[:16] >= stated
                resumed = conn.request("host.resume")
                assert resumed["payload"]["resumed"] is True
                events_until(conn, _is_action("resumed"))  # type: ignore[arg-type]
                events = events_until(conn, lambda e: e["type"] == "result")
            assert events[-1]["result"]["is_error"] is False
            last = fake.responses_requests()[-1]
            assert RESUMED_TEXT in str(last.body) and "Fix the tests." in str(last.body)
        finally:
            env0.cleanup()
