"""Forks, sans-IO: what each adapter does for a fork, the journal offset -> the agent's
own fork point, refusals, and what the daemon fills in and refuses (agenthost.forks,
agenthost.daemon.forking)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agenthost.agents import AGENT_KINDS, make_adapter
from agenthost.agents.acp import AcpAdapter
from agenthost.agents.base import AdapterOptions, Write
from agenthost.agents.claude import ClaudeAdapter
from agenthost.agents.codex import CodexAdapter
from agenthost.daemon.forking import forked_record, inherit
from agenthost.daemon.protocol import ForkSpec, SpawnSpec
from agenthost.daemon.spawner import host_options
from agenthost.errors import ConfigError, ForkRefused
from agenthost.forks import FORKABLE, check_offset, fork_point, inherit_env, refusal

HIDDEN = "<hidden>"
HOME = Path("/tmp/h")


def out(offset: int, obj: Any) -> dict[str, Any]:
    """A journaled ``output`` event of a JSON line."""
    line = obj if isinstance(obj, str) else json.dumps(obj)
    return {"kind": "event", "type": "output", "offset": offset, "data": line}


# --- Claude Code ----------------------------------------------------------------------


def test_claude_fork_resumes_the_parents_session_as_a_new_one() -> None:
    argv = ClaudeAdapter(AdapterOptions(fork="S1")).build_command(["--model", "m"])
    i = argv.index("--resume")
    assert argv[i : i + 3] == ["--resume", "S1", "--fork-session"]
    assert "--resume-session-at" not in argv
    assert argv[-2:] == ["--model", "m"]  # the user's flags stay last


def test_claude_fork_at_a_point_names_the_assistant_message() -> None:
    argv = ClaudeAdapter(AdapterOptions(fork="S1", fork_at="u-2")).build_command([])
    i = argv.index("--fork-session")
    assert argv[i + 1 : i + 3] == ["--resume-session-at", "u-2"]


def test_a_resume_never_forks() -> None:
    argv = ClaudeAdapter(AdapterOptions(resume="S2")).build_command([])
    assert "--fork-session" not in argv
    assert argv[argv.index("--resume") + 1] == "S2"


# --- Codex ----------------------------------------------------------------------------


def _thread_request(options: AdapterOptions) -> dict[str, Any]:
    adapter = CodexAdapter(options)
    first = adapter.startup()
    assert isinstance(first[0], Write)
    init = json.loads(first[0].data)
    answer = json.dumps({"id": init["id"], "result": {}})
    writes = [e for e in adapter.parse_line(answer) if isinstance(e, Write)]
    msg: dict[str, Any] = json.loads(writes[-1].data)
    return msg


def test_codex_fork_is_a_thread_fork_of_the_parents_thread() -> None:
    msg = _thread_request(AdapterOptions(worktree="/w", fork="T1"))
    assert msg["method"] == "thread/fork"
    assert msg["params"]["threadId"] == "T1"
    assert msg["params"]["cwd"] == "/w"
    assert "lastTurnId" not in msg["params"]


def test_codex_fork_at_a_point_names_the_last_turn() -> None:
    msg = _thread_request(AdapterOptions(fork="T1", fork_at="turn-1"))
    assert msg["params"]["lastTurnId"] == "turn-1"


def test_codex_fork_answer_gives_the_fork_its_own_thread() -> None:
    adapter = CodexAdapter(AdapterOptions(fork="T1"))
    init = json.loads(adapter.startup()[0].data)  # type: ignore[union-attr]
    writes = adapter.parse_line(json.dumps({"id": init["id"], "result": {}}))
    fork = json.loads([e for e in writes if isinstance(e, Write)][-1].data)
    events = adapter.parse_line(json.dumps({"id": fork["id"], "result": {"thread": {"id": "T9"}}}))
    assert adapter.thread_id == "T9"
    assert any(getattr(e, "fields", {}).get("session_id") == "T9" for e in events)


def test_codex_fork_that_fails_leaves_no_thread() -> None:
    adapter = CodexAdapter(AdapterOptions(fork="T1"))
    init = json.loads(adapter.startup()[0].data)  # type: ignore[union-attr]
    writes = adapter.parse_line(json.dumps({"id": init["id"], "result": {}}))
    fork = json.loads([e for e in writes if isinstance(e, Write)][-1].data)
    events = adapter.parse_line(
        json.dumps({"id": fork["id"], "error": {"code": -1, "message": "no such thread"}})
    )
    assert adapter.thread_id is None
    assert any("thread/fork failed: no such thread" in getattr(e, "message", "") for e in events)


# --- who can fork ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(set(AGENT_KINDS) - FORKABLE))
def test_other_kinds_refuse_a_fork(kind: str) -> None:
    with pytest.raises(ConfigError, match="cannot fork"):
        make_adapter(kind, AdapterOptions(fork="S"))
    assert refusal(kind, "S") is not None


def test_a_fork_and_a_resume_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        ClaudeAdapter(AdapterOptions(resume="A", fork="B"))
    with pytest.raises(ConfigError, match="--fork"):
        ClaudeAdapter(AdapterOptions(fork_at="u"))


@pytest.mark.parametrize(
    ("kind", "session", "tui", "why"),
    [
        ("demo", "S", False, "no session to fork"),
        ("lines", "S", False, "any program"),
        ("pty", "S", False, "terminal agent"),
        ("claude", None, False, "no session yet"),
        ("codex", "", False, "no session yet"),
        ("claude", "S", True, "TUI"),
        ("nonsense", "S", False, "'nonsense'"),
    ],
)
def test_refusals_say_why(kind: str, session: str | None, tui: bool, why: str) -> None:
    reason = refusal(kind, session, tui)
    assert reason is not None and why in reason


def test_forkable_agents_with_a_session_may_fork() -> None:
    assert refusal("claude", "S") is None
    assert refusal("codex", "T") is None
    assert refusal("acp", "S") is None  # its host not asked: it says so when it starts
    assert refusal("acp", "S", info={"session_fork": True}) is None


def test_an_acp_agent_without_session_fork_is_refused() -> None:
    reason = refusal("acp", "S", info={"agent_name": "gemini-cli"})
    assert reason is not None and "gemini-cli does not offer session/fork" in reason
    assert refusal("acp", "S", info={"session_fork": "yes"}) is not None


# --- ACP ------------------------------------------------------------------------------


def _acp(caps: dict[str, Any], **options: Any) -> tuple[AcpAdapter, list[Any]]:
    """An ACP adapter whose ``initialize`` was answered with ``caps``; what it did next."""
    adapter = AcpAdapter(AdapterOptions("/w", **options))
    (init,) = [json.loads(e.data) for e in adapter.startup() if isinstance(e, Write)]
    answer = {"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": {"name": "ag"}}
    line = json.dumps({"jsonrpc": "2.0", "id": init["id"], "result": answer})
    return adapter, adapter.parse_line(line)[1:]


def test_acp_fork_is_a_session_fork_where_the_agent_offers_it() -> None:
    adapter, events = _acp({"sessionCapabilities": {"fork": {}}}, fork="S1")
    assert events[0].fields["session_fork"] is True
    (request,) = [json.loads(e.data) for e in events if isinstance(e, Write)]
    assert request["method"] == "session/fork"
    assert request["params"] == {"sessionId": "S1", "cwd": "/w", "mcpServers": []}
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "S2"}}
    adapter.parse_line(json.dumps(answer))
    assert adapter.session_id == "S2"  # its own session, not the parent's


def test_acp_fork_without_the_capability_opens_no_session() -> None:
    adapter, events = _acp({"sessionCapabilities": {"resume": {}}}, fork="S1")
    assert "session_fork" not in events[0].fields
    assert not [e for e in events if isinstance(e, Write)]  # no fresh session instead
    assert any("ag does not offer session/fork" in getattr(e, "message", "") for e in events)
    assert adapter.session_id is None


def test_acp_fork_answered_without_a_session_id_opens_none() -> None:
    adapter, events = _acp({"sessionCapabilities": {"fork": {}}}, fork="S1")
    (request,) = [json.loads(e.data) for e in events if isinstance(e, Write)]
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": 7}}
    events = adapter.parse_line(json.dumps(answer))
    assert any("session/fork without a sessionId" in getattr(e, "message", "") for e in events)
    assert adapter.session_id is None


def test_acp_fork_at_a_point_is_refused() -> None:
    with pytest.raises(ConfigError, match="whole session"):
        AcpAdapter(AdapterOptions("/w", fork="S1", fork_at="x"))
    with pytest.raises(ForkRefused, match="whole session"):
        fork_point("acp", [], 3)


# --- offsets and points ---------------------------------------------------------------

CLAUDE_JOURNAL = [
    out(1, {"type": "system", "subtype": "init", "session_id": "S"}),
    {"type": "chat_entry", "offset": 2, "data": {"role": "user"}},
    out(3, {"type": "assistant", "uuid": "a-1", "message": {}}),
    out(4, {"type": "result", "uuid": "r-1"}),
    out(5, {"type": "user", "uuid": "u-2"}),
    out(6, {"type": "assistant", "uuid": "a-2a", "message": {}}),
    out(7, "not json at all"),
    out(8, {"type": "assistant", "uuid": "a-2b", "message": {}}),
    out(9, {"type": "result", "uuid": "r-2"}),
]


@pytest.mark.parametrize(
    ("offset", "point"),
    [(3, "a-1"), (4, "a-1"), (5, "a-1"), (7, "a-2a"), (9, "a-2b"), (99, "a-2b")],
)
def test_claude_point_is_the_last_assistant_message_at_or_before(offset: int, point: str) -> None:
    assert fork_point("claude", CLAUDE_JOURNAL, offset) == point


def test_an_offset_before_any_answer_names_no_point() -> None:
    with pytest.raises(ForkRefused, match="no assistant message"):
        fork_point("claude", CLAUDE_JOURNAL, 2)


CODEX_JOURNAL = [
    out(1, {"id": 1, "result": {"thread": {"id": "T"}}}),
    out(2, {"method": "turn/started", "params": {"turn": {"id": "t1"}}}),
    out(3, {"method": "turn/completed", "params": {"turn": {"id": "t1", "status": "completed"}}}),
    out(4, {"method": "turn/completed", "params": {"turn": {"id": "t2", "status": "failed"}}}),
    out(5, {"method": "turn/completed", "params": {"turn": {"id": "t3", "status": "completed"}}}),
    out(6, {"method": "turn/completed", "params": None}),
]


@pytest.mark.parametrize(("offset", "point"), [(3, "t1"), (4, "t1"), (5, "t3"), (6, "t3")])
def test_codex_point_is_the_last_completed_turn(offset: int, point: str) -> None:
    assert fork_point("codex", CODEX_JOURNAL, offset) == point


def test_codex_offset_before_a_completed_turn_is_refused() -> None:
    with pytest.raises(ForkRefused, match="no completed turn"):
        fork_point("codex", CODEX_JOURNAL, 2)


@pytest.mark.parametrize(
    "garbage",
    [
        out(1, '{"type": "assistant", "uuid": 5}'),
        out(1, '{"type": "assistant", "uuid": ""}'),
        out(1, "[1, 2]"),
        out(1, '{"type": "assistant", "uuid": "x"'),
        {"type": "output", "offset": "1", "data": '{"type":"assistant","uuid":"x"}'},
        {"type": "output", "offset": 1, "data": {"uuid": "x"}},
        {**out(1, {"type": "assistant", "uuid": "x"}), "continued": True},
    ],
)
def test_garbage_in_the_journal_names_no_point(garbage: dict[str, Any]) -> None:
    with pytest.raises(ForkRefused):
        fork_point("claude", [garbage], 5)


@pytest.mark.parametrize(("offset", "why"), [(0, "start at 1"), (-3, "start at 1"), (10, "beyond")])
def test_offsets_outside_the_journal_are_refused(offset: int, why: str) -> None:
    with pytest.raises(ForkRefused, match=why):
        check_offset(offset, 9)
    check_offset(9, 9)
    check_offset(1, 9)


# --- the spec, the daemon's checks, restarts --------------------------------------------


def spec(**fields: Any) -> SpawnSpec:
    base: dict[str, Any] = {"agent_id": "new", "agent": "claude"}
    return SpawnSpec(**{**base, **fields})


FORK = ForkSpec(from_agent="p1", session_id="S", offset=4, point="a-1")


def test_a_forks_first_host_forks_and_its_restarts_resume_its_own_session() -> None:
    forked = spec(fork=FORK)
    first = host_options(forked, HOME)
    assert (first.fork, first.fork_at, first.resume) == ("S", "a-1", None)
    restart = host_options(forked, HOME, resume="S-own")
    assert (restart.fork, restart.fork_at, restart.resume) == (None, None, "S-own")
    assert "--fork" in first.to_argv()
    assert "--fork" not in restart.to_argv()


def test_a_fork_spec_is_validated() -> None:
    for bad in (
        {"from_agent": "../x", "session_id": "S"},
        {"from_agent": "p", "session_id": ""},
        {"from_agent": "p", "session_id": "S", "offset": -1},
        {"from_agent": "p", "session_id": "S", "offset": "4"},
        {"from_agent": "p", "session_id": "S", "point": ""},
    ):
        with pytest.raises(ValidationError):
            ForkSpec(**bad)
    # an older daemon's client: no fork field at all
    assert SpawnSpec(agent_id="a").fork is None


def test_the_daemon_puts_the_parents_environment_back() -> None:
    parent = spec(agent_id="p1", env={"KEY": "secret", "B": "b"})
    child = spec(fork=FORK, env={"KEY": HIDDEN, "B": "b2"})
    assert inherit(child, parent, HIDDEN).env == {"KEY": "secret", "B": "b2"}


def test_a_fork_never_gets_more_than_its_parent() -> None:
    parent = spec(agent_id="p1", budget_usd=2.0, budget_tokens=100, sandbox="strict", env={})
    ok = spec(fork=FORK, budget_usd=2.0, budget_tokens=50, sandbox="strict")
    assert inherit(ok, parent, HIDDEN).budget_usd == 2.0
    for more in (
        {"budget_usd": 3.0, "budget_tokens": 100, "sandbox": "strict"},
        {"budget_tokens": 100, "sandbox": "strict"},  # no limit is more than one
        {"budget_usd": 2.0, "budget_tokens": 101, "sandbox": "strict"},
        {"budget_usd": 2.0, "budget_tokens": 100, "sandbox": "none"},
        {"budget_usd": 2.0, "budget_tokens": 100},
        {"budget_usd": 2.0, "budget_tokens": 100, "sandbox": "strict", "env": {"X": "1"}},
    ):
        with pytest.raises(ForkRefused):
            inherit(spec(fork=FORK, **more), parent, HIDDEN)


def test_inherit_env_refuses_names_the_parent_lacks() -> None:
    with pytest.raises(ForkRefused, match="EXTRA"):
        inherit_env({"EXTRA": "1"}, {}, HIDDEN)


def test_the_forks_journal_record_says_where_it_came_from() -> None:
    record = forked_record(spec(fork=FORK))
    assert record["action"] == "forked"
    assert record["from_agent"] == "p1"
    assert record["from_offset"] == 4
    assert record["session_id"] == "S"
    assert "p1" in str(record["reason"])
    whole = forked_record(spec(fork=ForkSpec(from_agent="p1", session_id="S")))
    assert "from_offset" not in whole  # all of it: no offset


def test_a_forks_tui_resumes_its_own_session_and_back_it_does_not_fork_again() -> None:
    from agenthost.daemon.tuispec import to_structured, to_tui

    forked = spec(fork=FORK)
    tui = to_tui(forked, "S-own")
    assert tui.fork is None  # a terminal agent cannot fork, and need not
    assert host_options(tui, HOME).fork is None
    back = to_structured(forked, "S-own")
    options = host_options(back, HOME)
    assert (options.resume, options.fork, options.forked_from) == ("S-own", None, "p1")
