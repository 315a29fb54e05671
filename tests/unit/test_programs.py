"""agenthost.agents.programs: where an agent's program is, and the sentence when it is
not there (what is missing, the PATH searched, how to install it); and
launch.start_failure, the same for a host that could not spawn its agent."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agenthost.agents import AdapterOptions, make_adapter
from agenthost.agents.programs import NPM_PACKAGES, Program, check_argv, check_program, lookup
from agenthost.errors import AgentCannotStart, ConfigError
from agenthost.launch import start_failure
from agenthost.models import AgentInfo


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agent").write_text("#!/bin/sh\n")
    (bin_dir / "agent").chmod(0o755)
    (bin_dir / "plain").write_text("not a program\n")
    return bin_dir


def test_lookup_follows_path_and_cwd(tools: Path) -> None:
    env = {"PATH": f"/nonexistent:{tools}"}
    assert lookup("agent", None, env).path == str(tools / "agent")
    assert lookup("agent", None, env).searched == ("/nonexistent", str(tools))
    assert lookup("./bin/agent", str(tools.parent), {}).path is not None  # from the cwd
    assert lookup("plain", None, env).denied
    assert lookup("agent", str(tools / "gone"), env).no_cwd
    assert lookup("", None, env).path is None


@pytest.mark.parametrize(
    ("name", "cwd", "program", "says"),
    [
        ("nope", None, Program(), "the agent's program `nope` is not on your PATH (BIN)"),
        ("nope", None, Program(), "install it, or give its full path after --"),
        ("claude", None, Program("Claude Code", "AGENTHOST_CLAUDE_BIN"), "Claude Code is not"),
        ("claude", None, Program(), "npm install -g @anthropic-ai/claude-code"),
        ("gemini", None, Program(), "npm install -g @google/gemini-cli"),
        ("plain", None, Program(), "`plain` cannot be run: plain is not an executable file"),
        ("./x/agent", "CWD", Program(), "`./x/agent` does not exist (relative to CWD)"),
        ("/abs/agent", None, Program(), "`/abs/agent` does not exist;"),
        ("agent", "CWD/gone", Program(), "the agent's working directory CWD/gone does not exist"),
        ("", None, Program(), "the agent's command is empty"),
    ],
)
def test_the_sentence_says_what_is_missing_and_how_to_get_it(
    tools: Path, name: str, cwd: str | None, program: Program, says: str
) -> None:
    cwd = cwd.replace("CWD", str(tools.parent)) if cwd else None
    says = says.replace("CWD", str(tools.parent)).replace("BIN", str(tools))
    with pytest.raises(AgentCannotStart) as missing:
        check_program(name, cwd=cwd, env={"PATH": str(tools)}, program=program)
    assert says in missing.value.message
    assert "\n" not in missing.value.message  # one line: it crosses the wire
    assert isinstance(missing.value, ConfigError) and missing.value.code == "cannot_start"


def test_whose_path_it_was(tools: Path) -> None:
    with pytest.raises(AgentCannotStart, match=r"no `claude` on the daemon's PATH \(/x\)"):
        check_program(
            "claude",
            cwd=None,
            env={"PATH": "/x"},
            program=Program("Claude Code"),
            whose="the daemon's",
        )


def test_the_variable_that_names_the_program(tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTHOST_CLAUDE_BIN", "/opt/none/claude")
    adapter = make_adapter("claude")
    with pytest.raises(AgentCannotStart) as missing:
        check_argv(adapter, adapter.build_command(()), cwd=None, env={}, agent_env={})
    assert missing.value.message.startswith(
        "Claude Code is not where AGENTHOST_CLAUDE_BIN says: /opt/none/claude does not exist"
    )
    monkeypatch.setenv("AGENTHOST_CLAUDE_BIN", str(tools / "agent"))
    adapter = make_adapter("claude")
    found = check_argv(adapter, adapter.build_command(()), cwd=None, env={}, agent_env={})
    assert found == str(tools / "agent")


def test_the_agents_env_path_wins(tools: Path) -> None:
    adapter = make_adapter("lines", AdapterOptions())
    argv = adapter.build_command(["agent"])
    with pytest.raises(AgentCannotStart):
        check_argv(adapter, argv, cwd=None, env={"PATH": "/nonexistent"}, agent_env={})
    found = check_argv(
        adapter, argv, cwd=None, env={"PATH": "/nonexistent"}, agent_env={"PATH": str(tools)}
    )
    assert found == str(tools / "agent")


def test_every_known_cli_has_its_package() -> None:
    assert NPM_PACKAGES["claude"] == "@anthropic-ai/claude-code"
    assert NPM_PACKAGES["codex"] == "@openai/codex"


def _info(**fields: object) -> AgentInfo:
    now = datetime.now(UTC)
    return AgentInfo.model_validate(
        {"id": "a1", "state": "error", "started_at": now, "backend": "claude", **fields}
    )


def test_a_host_that_could_not_spawn_its_agent_is_a_failed_start() -> None:
    assert start_failure("a1", _info(exit_code=3)) is None  # it ran, and failed: a start
    failure = start_failure(
        "a1",
        _info(
            command=["claude", "-p"],
            start_error="command not found: claude (No such file or directory)",
        ),
    )
    assert isinstance(failure, AgentCannotStart)
    assert failure.message == (
        "the host for 'a1' could not start its agent: command not found: claude (No such "
        "file or directory); install it with `npm install -g @anthropic-ai/claude-code`, "
        "or set AGENTHOST_CLAUDE_BIN to the program's path"
    )
    other = start_failure("a1", _info(start_error="cannot start cat: [Errno 7] too long"))
    assert other is not None and "install" not in other.message
