"""What the e2e tests of permission requests share (tests/e2e/test_policy_agents.py,
test_links_agents.py): a real Claude Code or Codex CLI, hosted, against its fake model
API, set to ask before it runs a command; the commands they are asked about; the
history's ``permission`` entries.

The fixtures are imported by name into each test module (pytest finds them there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claude_env import DEFAULT_MODEL, FAST_RETRY_ENV, ClaudeDirs, claude_env, temp_dirs
from clis import require_cli
from codex_env import CodexEnv
from fakes.anthropic import FakeAnthropic
from fakes.openai import FakeOpenAI

import hosttools
from conftest import HostFactory
from hosttools import HostProc, history

WRITE_COMMAND = "touch marker.txt && echo hello"  # not read-only: Claude Code asks first
APPROVAL_COMMAND = "echo hello | tee approved.txt"
ASKING = ("--agent-opt", "approval_policy=untrusted")  # Codex asks before every command
TIMEOUT = 30.0

attached = functools.partial(hosttools.attached, timeout=TIMEOUT)


def decisions(host: HostProc) -> list[str]:
    """The history's record of every decision, in words ("allowed by link")."""
    return [e["content"] for e in history(host) if e["role"] == "permission"]


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return require_cli("claude")


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def dirs() -> Iterator[ClaudeDirs]:
    with temp_dirs() as created:
        yield created


def claude_host(
    host_factory: HostFactory,
    agent_id: str,
    claude_bin: Path,
    dirs: ClaudeDirs,
    env: dict[str, str],
    *args: str,
) -> HostProc:
    """A host running the real Claude Code in ``dirs.worktree`` with ``env`` (a
    :func:`claude_env`), ``args`` more options of ``serve``."""
    env = {**env, "AGENTHOST_CLAUDE_BIN": str(claude_bin)}
    return host_factory(
        agent_id,
        "--agent",
        "claude",
        "--cwd",
        str(dirs.worktree),
        *args,
        command=["--model", DEFAULT_MODEL],
        env=env,
    )


@pytest.fixture
def claude(
    claude_bin: Path, dirs: ClaudeDirs, anthropic: FakeAnthropic, host_factory: HostFactory
) -> Callable[[], HostProc]:
    """Starts host ``c1`` running Claude Code in ``dirs.worktree``."""

    def factory() -> HostProc:
        env = claude_env(anthropic.url, dirs, extra={**FAST_RETRY_ENV})
        return claude_host(host_factory, "c1", claude_bin, dirs, env)

    return factory


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return require_cli("codex")


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def codex(openai: FakeOpenAI) -> Iterator[CodexEnv]:
    env = CodexEnv.create(openai.url, request_max_retries=1, stream_max_retries=1)
    try:
        yield env
    finally:
        env.cleanup()


def start_codex(host_factory: HostFactory, codex: CodexEnv, codex_bin: Path) -> HostProc:
    """Host ``cx1`` running Codex, asking before every command, once it is idle."""
    env = {**codex.env, "AGENTHOST_CODEX_BIN": str(codex_bin)}
    host = host_factory("cx1", "--agent", "codex", "--cwd", str(codex.workdir), *ASKING, env=env)
    host.wait_state("idle", timeout=TIMEOUT)
    return host
