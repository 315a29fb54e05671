"""agenthost.agents.codexsandbox: Codex's own sandbox inside and outside agenthost's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.agents import AGENT_KINDS, adapter_class
from agenthost.agents.base import AdapterOptions, ErrorNote, Write
from agenthost.agents.codex import CodexAdapter
from agenthost.agents.codexsandbox import helper_alias_problem, inside_sandbox
from agenthost.errors import ConfigError

# --- inside agenthost's sandbox: Codex's own is off ----------------------------------


@pytest.mark.parametrize("mode", [None, "read-only", "workspace-write", "danger-full-access"])
def test_inside_sandbox_turns_codexs_own_off_and_keeps_the_rest(mode: str | None) -> None:
    params = {"approval_policy": "untrusted", "model": "m"}
    if mode is not None:
        params["sandbox"] = mode
    confined = inside_sandbox(params)
    expected = {"approval_policy": "untrusted", "model": "m", "sandbox": "danger-full-access"}
    assert confined == expected
    assert "sandbox" not in params or params["sandbox"] == mode  # the caller's is untouched


def test_inside_sandbox_leaves_the_default_approval_policy() -> None:
    adapter = CodexAdapter(AdapterOptions(params=CodexAdapter.inside_sandbox({})))
    assert adapter.params == {"approval_policy": "on-request", "sandbox": "danger-full-access"}
    thread = _thread_params(adapter)
    assert thread["sandbox"] == "danger-full-access" and thread["approvalPolicy"] == "on-request"


@pytest.mark.parametrize("garbage", ["", "none", "workspace_write", "Danger-Full-Access", "\x00"])
def test_inside_sandbox_refuses_a_mode_codex_does_not_have(garbage: str) -> None:
    with pytest.raises(ConfigError, match="sandbox must be one of"):
        inside_sandbox({"sandbox": garbage})


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=5))
def test_inside_sandbox_of_any_params(params: dict[str, str]) -> None:
    try:
        confined = inside_sandbox(params)
    except ConfigError:
        assert params.get("sandbox") not in ("read-only", "workspace-write", "danger-full-access")
        return
    assert confined["sandbox"] == "danger-full-access"
    assert {k: v for k, v in confined.items() if k != "sandbox"} == {
        k: v for k, v in params.items() if k != "sandbox"
    }


@pytest.mark.parametrize("kind", [k for k in AGENT_KINDS if k not in ("codex", "claude")])
def test_other_kinds_keep_their_params_inside(kind: str) -> None:
    # (Claude Code turns its own off: tests/unit/test_claude_adapter.py)
    cls = adapter_class(kind)
    assert cls is not None
    params = {"anything": "as asked"}
    assert cls.inside_sandbox(params) == params and cls.inside_sandbox(params) is not params


# --- outside: Codex's helper and the temporary directory -----------------------------


@pytest.mark.parametrize(
    ("env", "sandbox"),
    [
        ({"CODEX_HOME": "/tmp/cx/codex-home"}, "workspace-write"),
        ({"CODEX_HOME": "/tmp"}, "read-only"),
        ({"CODEX_HOME": "/tmp/./cx//home/"}, "workspace-write"),
        ({"HOME": "/tmp/h"}, "workspace-write"),  # ~/.codex, in /tmp
        ({"CODEX_HOME": "/scratch/me/codex", "TMPDIR": "/scratch"}, "workspace-write"),
        ({"CODEX_HOME": "", "HOME": "/tmp/h"}, "workspace-write"),  # empty: unset
        ({"CODEX_HOME": "/tmp/c", "TMPDIR": ""}, "workspace-write"),  # empty: /tmp
    ],
)
def test_codex_home_in_the_temporary_directory_is_a_problem(
    env: dict[str, str], sandbox: str
) -> None:
    problem = helper_alias_problem(env, sandbox)
    assert problem is not None and "codex-linux-sandbox" in problem
    assert "bubblewrap older than 0.9" in problem


@pytest.mark.parametrize(
    ("env", "sandbox"),
    [
        ({"CODEX_HOME": "/tmp/cx/codex-home"}, "danger-full-access"),  # no helper runs
        ({"CODEX_HOME": "/tmp/cx/codex-home", "TMPDIR": "/tmp/cx/tmp"}, "workspace-write"),
        ({"HOME": "/home/me"}, "workspace-write"),
        ({"CODEX_HOME": "/tmpfoo/codex"}, "workspace-write"),  # a sibling, not below
        ({"CODEX_HOME": "relative/tmp"}, "workspace-write"),
        ({}, "workspace-write"),  # no home at all: Codex says so itself
        ({"CODEX_HOME": "/var/tmp/c"}, "workspace-write"),
    ],
)
def test_codex_home_elsewhere_is_none(env: dict[str, str], sandbox: str) -> None:
    assert helper_alias_problem(env, sandbox) is None


def test_startup_says_so_before_the_handshake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", "/tmp/agenthost-test/codex-home")
    monkeypatch.delenv("TMPDIR", raising=False)
    note, handshake = CodexAdapter(AdapterOptions(worktree="/w")).startup()
    assert isinstance(note, ErrorNote) and "CODEX_HOME (/tmp/agenthost-test" in note.message
    assert isinstance(handshake, Write) and b'"initialize"' in handshake.data
    # unconfined (as inside agenthost's sandbox), nothing to say
    options = AdapterOptions(worktree="/w", params=inside_sandbox({}))
    (handshake,) = CodexAdapter(options).startup()
    assert isinstance(handshake, Write)


def _thread_params(adapter: CodexAdapter) -> dict[str, object]:
    adapter.startup()
    events = adapter.parse_line(json.dumps({"id": 1, "result": {}}))
    (start,) = [json.loads(e.data) for e in events if isinstance(e, Write)][1:]
    assert start["method"] == "thread/start"
    params: dict[str, object] = start["params"]
    return params
