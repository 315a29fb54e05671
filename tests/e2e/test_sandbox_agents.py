"""The real Claude Code, Codex and one ACP agent (Claude's ACP adapter) run a tool turn
inside the ``strict`` sandbox, against the fake model APIs on 127.0.0.1, reached only
through the sandbox's proxy (docs/sandbox.md):

- the tool's file is written in the worktree and is there afterwards, outside;
- the fake API makes the agent read a planted ``~/.ssh/id_ed25519`` (the host's HOME is
  a user home holding it) with its shell or read tool: the tool result the agent sends
  back says there is no such file, and the key never reaches the API. Each agent is
  first shown to read it unconfined (``off``), so the refusal is the sandbox's doing;
- a permission request still reaches the person (answered through the host) and the
  policy (a rule of config.toml decides).

Codex's own sandbox is bubblewrap too, which cannot nest in ours (no user namespaces
inside): the host turns it off inside ours by itself (``Adapter.inside_sandbox``), and
ours replaces it; unconfined it is on, as configured. Skipped without the CLIs or
bubblewrap, unless ``AGENTHOST_E2E_REQUIRED=1`` (CI), where that fails.
"""

# ruff: noqa: F811 (the fixtures imported from asking.py are parameters of the tests)
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from acp_env import COMMAND, KITS, AgentDirs, agent_command, agent_dirs, require_agent
from asking import (  # noqa: F401 (fixtures)
    ASKING,
    anthropic,
    attached,
    claude_bin,
    claude_host,
    codex,
    codex_bin,
    decisions,
    dirs,
    openai,
)
from claude_env import FAST_RETRY_ENV, ClaudeDirs, claude_env
from codex_env import CodexEnv
from fakes import anthropic as fake_anthropic
from fakes import openai as fake_openai
from fakes.anthropic import FakeAnthropic
from fakes.openai import FakeOpenAI
from sandboxtools import SECRET_KEY, require_sandbox

from conftest import HostFactory
from hosttools import Event, HostProc, RawConn, entries, events_until, history, states

PROFILES = ["off", "strict"]
NO_FILE = "No such file or directory"
KEY_TEXT = SECRET_KEY.strip()
WRITE = "echo sandboxed > made.txt"


@pytest.fixture(autouse=True)
def _confinable() -> None:
    require_sandbox()


def plant_key(user_home: Path) -> Path:
    """A private key in the user's home, as a real one would be."""
    ssh = user_home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    key = ssh / "id_ed25519"
    key.write_text(SECRET_KEY)
    key.chmod(0o600)
    return key


def sandbox_args(profile: str) -> tuple[str, ...]:
    return ("--sandbox", profile) if profile != "off" else ()


def write_config(home: Path, *rules: str, allow_url: str | None = None) -> None:
    """config.toml with one ``[[policy.rule]]`` per TOML text of ``rules``, and the
    host of ``allow_url`` in ``[sandbox] allow_hosts``."""
    text = ""
    if allow_url is not None:
        text += f'[sandbox]\nallow_hosts = ["{urlsplit(allow_url).netloc}"]\n'
    text += "".join(f"[[policy.rule]]\n{rule}\n" for rule in rules)
    (home / "config.toml").write_text(text)
    (home / "config.toml").chmod(0o600)


def turn(conn: RawConn, text_in: str) -> list[Event]:
    """Send ``text_in``; the events until the agent is idle again or waits for a person."""
    assert conn.request("host.send", {"input": text_in})["success"]
    return events_until(conn, lambda e: e["type"] == "state" and e["state"] in ("idle", "waiting"))


def asked(events: list[Event]) -> dict[str, Any]:
    """The permission request the agent waits on (the last one: the policy answered
    the others)."""
    assert states(events)[-1] == "waiting", states(events)
    request = [e["request"] for e in events if e["type"] == "permission_request"][-1]
    return request  # type: ignore[no-any-return]


def allow(conn: RawConn, request: dict[str, Any], **extra: str) -> list[Event]:
    """The person allows ``request``; the events until the agent is idle or waits again."""
    answer = {"request_id": request["request_id"], "behavior": "allow", **extra}
    assert conn.request("host.respond", answer)["success"]
    return events_until(conn, lambda e: e["type"] == "state" and e["state"] in ("idle", "waiting"))


def tool_results(events: list[Event]) -> list[str]:
    return [str(e["tool_result"]) for e in entries(events) if "tool_result" in e]


def sent_to_api(requests: list[Any]) -> str:
    """Everything the agent sent its model API (the bodies of every request)."""
    return "\n".join(json.dumps(r.body) for r in requests)


def check_key_read(profile: str, results: list[str], api_requests: list[Any]) -> None:
    """Unconfined the agent reads the key and sends it to its API; confined it is told
    there is no such file, and the key never leaves."""
    assert results, "the tool ran and its result came back"
    if profile == "off":
        assert any(KEY_TEXT in r for r in results), results
        assert KEY_TEXT in sent_to_api(api_requests)
    else:
        assert all(NO_FILE in r or "does not exist" in r for r in results), results
        assert KEY_TEXT not in sent_to_api(api_requests)


# ---- Claude Code -----------------------------------------------------------------------


def start_claude(
    host_factory: HostFactory,
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    profile: str = "strict",
) -> HostProc:
    env = claude_env(anthropic.url, dirs, extra={**FAST_RETRY_ENV})
    return claude_host(host_factory, "c1", claude_bin, dirs, env, *sandbox_args(profile))


def test_claude_code_writes_in_the_worktree_after_asking_the_person(
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    host_factory: HostFactory,
) -> None:
    anthropic.add(fake_anthropic.tool_use("Bash", {"command": WRITE}), fake_anthropic.text("Made."))
    host = start_claude(host_factory, claude_bin, dirs, anthropic)
    assert host.agent()["sandbox"] == "strict"
    with attached(host) as conn:
        request = asked(turn(conn, "Make a file"))
        assert request["tool_name"] == "Bash" and request["tool_input"] == WRITE
        events = allow(conn, request)
    assert states(events)[-1] == "idle" and len(tool_results(events)) == 1
    assert (dirs.worktree / "made.txt").read_text() == "sandboxed\n"
    assert decisions(host) == ["allowed by client"]


def test_claude_codes_own_sandbox_is_off_inside_ours(
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    host_factory: HostFactory,
) -> None:
    # a user who turned Claude Code's own sandbox on, and asked it to fail without one:
    # inside ours it cannot start its bubblewrap (no user namespaces), so the host
    # turns it off for the run (--settings), and the turn works
    settings = dirs.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"sandbox": {"enabled": True, "failIfUnavailable": True}}))
    anthropic.add(fake_anthropic.tool_use("Bash", {"command": WRITE}), fake_anthropic.text("Made."))
    host = start_claude(host_factory, claude_bin, dirs, anthropic)
    assert '{"sandbox":{"enabled":false}}' in host.agent()["command"]
    with attached(host) as conn:
        allow(conn, asked(turn(conn, "Make a file")))
    assert (dirs.worktree / "made.txt").read_text() == "sandboxed\n"


@pytest.mark.parametrize("profile", PROFILES)
def test_claude_code_cannot_read_the_planted_key(
    profile: str,
    claude_bin: Path,
    dirs: ClaudeDirs,
    anthropic: FakeAnthropic,
    host_factory: HostFactory,
    home: Path,
) -> None:
    key = plant_key(dirs.home)
    # the policy lets both tools read it: only the sandbox stands in the way
    write_config(home, 'tool = "Bash"\ncommand = "cat *"\ndecision = "allow"')
    anthropic.add(fake_anthropic.tool_use("Bash", {"command": f"cat {key}"}))
    anthropic.add(fake_anthropic.tool_use("Read", {"file_path": str(key)}))
    anthropic.add(fake_anthropic.text("Read it, or not."))
    host = start_claude(host_factory, claude_bin, dirs, anthropic, profile)
    with attached(host) as conn:
        events = turn(conn, "Show me the key")
        if states(events)[-1] == "waiting":  # Read outside the worktree asks a person
            events += allow(conn, asked(events))
    assert decisions(host)[0].startswith("allowed by policy: rule 1 (tool Bash")
    check_key_read(profile, tool_results(events), anthropic.requests)


# ---- Codex -----------------------------------------------------------------------------


def start_codex(
    host_factory: HostFactory, codex: CodexEnv, codex_bin: Path, profile: str = "strict"
) -> HostProc:
    """Codex, asking before every command (its own sandbox is off inside ours).

    Its provider's address is in its own config.toml, not in a variable the sandbox
    reads: config.toml's ``allow_hosts`` of the host names it (done by the caller)."""
    env = {**codex.env, "AGENTHOST_CODEX_BIN": str(codex_bin)}
    host = host_factory(
        "cx1",
        "--agent",
        "codex",
        "--cwd",
        str(codex.workdir),
        *ASKING,
        *sandbox_args(profile),
        env=env,
    )
    host.wait_state("idle", timeout=30)
    return host


def test_codex_writes_in_the_worktree_after_asking_the_person(
    codex_bin: Path, codex: CodexEnv, openai: FakeOpenAI, host_factory: HostFactory, home: Path
) -> None:
    write_config(home, allow_url=openai.url)
    openai.enqueue(fake_openai.shell(WRITE), fake_openai.text("Made."))
    host = start_codex(host_factory, codex, codex_bin)
    assert host.agent()["sandbox"] == "strict"
    with attached(host) as conn:
        request = asked(turn(conn, "Make a file"))
        assert WRITE in request["tool_input"]
        allow(conn, request)
    assert (codex.workdir / "made.txt").read_text() == "sandboxed\n"
    assert decisions(host) == ["allowed by client"]


@pytest.mark.parametrize("profile", PROFILES)
def test_codex_cannot_read_the_planted_key(
    profile: str,
    codex_bin: Path,
    codex: CodexEnv,
    openai: FakeOpenAI,
    host_factory: HostFactory,
    home: Path,
) -> None:
    key = plant_key(codex.home)
    rule = 'tool = "shell"\ncommand = "cat *"\ndecision = "allow"'
    write_config(home, rule, allow_url=openai.url)
    openai.enqueue(fake_openai.shell(f"cat {key}"), fake_openai.text("Read it, or not."))
    host = start_codex(host_factory, codex, codex_bin, profile)
    with attached(host) as conn:
        events = turn(conn, "Show me the key")
    assert states(events)[-1] == "idle"
    assert decisions(host)[0].startswith("allowed by policy: rule 1 (tool shell")
    check_key_read(profile, tool_results(events), openai.requests)


# ---- an ACP agent: Claude's ACP adapter --------------------------------------------------


@pytest.fixture
def acp_dirs() -> Iterator[AgentDirs]:
    with agent_dirs() as made:
        yield made


def start_acp(
    host_factory: HostFactory,
    dirs: AgentDirs,
    api: FakeAnthropic,
    profile: str = "strict",
    *args: str,
) -> HostProc:
    argv, env = agent_command("claude", api.url, dirs)
    host = host_factory(
        "acp1",
        "--agent",
        "acp",
        "--cwd",
        str(dirs.work),
        "--agent-opt",
        f"mode={KITS['claude'].ask_mode}",
        *sandbox_args(profile),
        *args,
        command=argv,
        env=env,
    )
    host.wait_state("idle", timeout=60)
    return host


@pytest.mark.parametrize("profile", PROFILES)
def test_an_acp_agent_writes_but_cannot_read_the_planted_key(
    profile: str, acp_dirs: AgentDirs, host_factory: HostFactory
) -> None:
    require_agent("claude")
    key = plant_key(acp_dirs.home)
    kit = KITS["claude"]
    with kit.fake(kit.shell(COMMAND), kit.shell(f"cat {key}"), default=kit.text("Done.")) as api:
        host = start_acp(host_factory, acp_dirs, api, profile)
        with attached(host) as conn:
            events = turn(conn, "Write the file, then show me the key.")
            for _ in range(2):  # each command asks the person
                request = asked(events)
                option = next(o["id"] for o in request["options"] if o["kind"] == "allow_once")
                events = allow(conn, request, option_id=option)
        assert states(events)[-1] == "idle"
        assert (acp_dirs.work / "approved.txt").read_text() == "hello\n"
        results = [str(e["tool_result"]) for e in history(host) if "tool_result" in e]
        check_key_read(profile, results[1:], api.requests)


def test_an_acp_agent_resumes_its_session_in_a_new_sandbox(
    acp_dirs: AgentDirs, host_factory: HostFactory
) -> None:
    """Its sessions are kept in its own directory of the user's home, made and bound
    for it (``~/.claude`` for Claude's adapter), not on the sandbox's tmpfs: a host
    started with ``--resume`` after the first one ended loads the same session."""
    require_agent("claude")
    kit = KITS["claude"]
    with kit.fake(kit.text("First answer."), default=kit.text("Second answer.")) as api:
        host = start_acp(host_factory, acp_dirs, api)
        sid = host.agent()["session_id"]
        with attached(host) as conn:
            turn(conn, "First question.")
        with host.client() as client:
            client.stop()
        host.wait_exit()
        again = start_acp(host_factory, acp_dirs, api, "strict", "--resume", sid)
        assert again.agent()["session_id"] == sid
        with attached(again) as conn:
            turn(conn, "Second question.")
        bodies = [str(r.body) for r in api.requests]
        assert any("First question." in b and "Second question." in b for b in bodies)
