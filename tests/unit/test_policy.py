"""The approval policy's decisions (agenthost.attention.policy), table-driven."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.attention.policy import (
    DEFAULT_REASON,
    Decision,
    Grant,
    Subject,
    command_of,
    decide,
    describe,
    duration_text,
    grant_for,
    paths_of,
    subject_of,
)
from agenthost.config import PolicyRule, parse_config


def rule(**fields: Any) -> PolicyRule:
    return PolicyRule.model_validate(fields)


def bash(command: str | None, **more: Any) -> Subject:
    return Subject("Bash", command, **more)


# (rules, subject, behavior, rule number)
CASES: list[tuple[list[dict[str, Any]], Subject, str, int | None]] = [
    ([], bash("ls"), "ask", None),
    ([{"decision": "allow"}], bash("ls"), "allow", 1),
    ([{"tool": "Bash", "decision": "deny"}], bash("ls"), "deny", 1),
    ([{"tool": "Read", "decision": "allow"}], bash("ls"), "ask", None),
    ([{"tool": "mcp__*", "decision": "allow"}], Subject("mcp__db__query"), "allow", 1),
    ([{"tool": "bash", "decision": "allow"}], bash("ls"), "ask", None),  # case matters
    # first match wins
    (
        [{"command": "git *", "decision": "deny"}, {"command": "git status*", "decision": "allow"}],
        bash("git status"),
        "deny",
        1,
    ),
    (
        [{"command": "git status*", "decision": "allow"}, {"command": "git *", "decision": "deny"}],
        bash("git status -s"),
        "allow",
        1,
    ),
    (
        [{"command": "git status*", "decision": "allow"}, {"command": "git *", "decision": "deny"}],
        bash("git push"),
        "deny",
        2,
    ),
    # a command rule does not match a request without a command
    ([{"command": "*", "decision": "allow"}], Subject("Write", None, ("/a",)), "ask", None),
    ([{"command": "*", "decision": "deny"}], Subject("Write", None, ("/a",)), "ask", None),
    # regex: the whole command
    (
        [{"command_regex": r"npm (test|run lint)", "decision": "allow"}],
        bash("npm test"),
        "allow",
        1,
    ),
    ([{"command_regex": r"npm test", "decision": "allow"}], bash("npm test2"), "ask", None),
    ([{"command_regex": r"npm test", "decision": "allow"}], bash("xnpm test"), "ask", None),
    # the chaining safety of allow rules
    ([{"command": "git status*", "decision": "allow"}], bash("git status; rm -rf /"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status && rm x"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status || rm x"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status | sh"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status `rm x`"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status $(rm x)"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status\nrm x"), "ask", None),
    (
        [{"command": "git status*", "decision": "allow"}],
        bash("git status > ~/.bashrc"),
        "ask",
        None,
    ),
    ([{"command": "git status*", "decision": "allow"}], bash("git status < /etc/x"), "ask", None),
    ([{"command": "git status*", "decision": "allow"}], bash("git status & rm x"), "ask", None),
    ([{"command": "echo *", "decision": "allow"}], bash("echo 'a;b'"), "ask", None),  # careful
    ([{"command_regex": "git .*", "decision": "allow"}], bash("git log; rm x"), "ask", None),
    # ...unless the pattern has the operator itself
    (
        [{"command": "git log * | head*", "decision": "allow"}],
        bash("git log -3 | head"),
        "allow",
        1,
    ),
    ([{"command": "make *> out*", "decision": "allow"}], bash("make all > out.txt"), "allow", 1),
    # deny rules match chained commands (denying more is safe)
    ([{"command": "rm *", "decision": "deny"}], bash("rm -rf / ; echo"), "deny", 1),
    ([{"command": "*rm *", "decision": "deny"}], bash("ls; rm -rf /"), "deny", 1),
    # paths: a rule with a path does not match a request without one
    ([{"path": "*", "decision": "allow"}], bash("ls"), "ask", None),
    ([{"path": "/src/*", "decision": "allow"}], Subject("Edit", None, ("/src/a.py",)), "allow", 1),
    (
        [{"path": "/src/*", "decision": "allow"}],
        Subject("Edit", None, ("/etc/passwd",)),
        "ask",
        None,
    ),
    # allow: every path; deny: any path
    (
        [{"path": "/src/*", "decision": "allow"}],
        Subject("apply_patch", None, ("/src/a", "/etc/b")),
        "ask",
        None,
    ),
    (
        [{"path": "/etc/*", "decision": "deny"}],
        Subject("apply_patch", None, ("/src/a", "/etc/b")),
        "deny",
        1,
    ),
    (
        [{"path": "*.md", "decision": "allow"}],
        Subject("Write", None, ("/a/b/README.md",)),
        "allow",
        1,
    ),
    # agent and project
    ([{"agent": "ci-*", "decision": "allow"}], bash("ls", agent_id="ci-7"), "allow", 1),
    ([{"agent": "ci-*", "decision": "allow"}], bash("ls", agent_id="dev-1"), "ask", None),
    ([{"project": "web", "decision": "deny"}], bash("ls", project="web"), "deny", 1),
    ([{"project": "web", "decision": "deny"}], bash("ls", project=""), "ask", None),
    # an explicit ask rule stops the search
    ([{"tool": "Bash", "decision": "ask"}, {"decision": "allow"}], bash("ls"), "ask", 1),
]


@pytest.mark.parametrize(("rules", "subject", "behavior", "number"), CASES)
def test_decide(
    rules: list[dict[str, Any]], subject: Subject, behavior: str, number: int | None
) -> None:
    decision = decide([rule(**r) for r in rules], subject)
    assert (decision.behavior, decision.rule) == (behavior, number)
    assert decision.source == ("rule" if number else "default")


def test_reasons_name_the_rule() -> None:
    rules = [
        rule(tool="Read", decision="allow"),
        rule(tool="Bash", command="git status*", decision="allow", reason="read-only"),
    ]
    assert decide(rules, bash("git status")).reason == (
        'rule 2 (tool Bash, command "git status*"): read-only'
    )
    assert decide(rules, bash("ls")) == Decision("ask", DEFAULT_REASON)
    assert describe(rule(decision="deny"), 3) == "rule 3 (every request)"
    full = rule(command_regex="a.*", path="/x/*", agent="a*", project="p", decision="deny")
    assert describe(full, 1) == (
        'rule 1 (command_regex "a.*", path "/x/*", agent "a*", project "p")'
    )


@pytest.mark.parametrize(
    ("tool_input", "command"),
    [
        ({"command": "ls -l"}, "ls -l"),
        ({"command": ["ls", "-l", "a b"]}, "ls -l 'a b'"),
        ({"command": "/bin/bash -lc 'git status'"}, "git status"),
        ({"command": ["bash", "-c", "echo hi; rm x"]}, "echo hi; rm x"),
        ({"command": ["zsh", "-lc", "ls"]}, "ls"),
        ({"command": "echo 'unbalanced"}, "echo 'unbalanced"),
        ({"command": 3}, None),
        ({"command": ["ls", 3]}, None),
        ({"command": []}, None),
        ({}, None),
    ],
)
def test_command_of(tool_input: dict[str, Any], command: str | None) -> None:
    assert command_of(tool_input) == command


@pytest.mark.parametrize(
    ("tool_input", "locations", "paths"),
    [
        ({"file_path": "/a/b.py"}, None, ("/a/b.py",)),
        ({"notebook_path": "/n.ipynb", "path": "/n.ipynb"}, None, ("/n.ipynb",)),
        ({"file_path": "/src/../etc/passwd"}, None, ("/etc/passwd",)),
        ({"changes": [{"path": "/a", "kind": "add"}, {"path": "/b"}, "x"]}, None, ("/a", "/b")),
        ({"changes": {"/a": {"add": {}}, "/b": {}}}, None, ("/a", "/b")),
        ({}, [{"path": "/loc"}, {"line": 3}], ("/loc",)),
        ({"file_path": 3, "path": ""}, "not a list", ()),
    ],
)
def test_paths_of(tool_input: dict[str, Any], locations: Any, paths: tuple[str, ...]) -> None:
    assert paths_of(tool_input, locations) == paths


def test_subject_of_a_request() -> None:
    request = {"tool_name": "Bash", "input": {"command": "ls", "description": "x"}}
    assert subject_of(request, "a1", "web") == Subject("Bash", "ls", (), "a1", "web")
    assert subject_of({"tool_name": 3, "input": "garbage"}) == Subject("")
    codex = {"tool_name": "shell", "input": {"command": "/bin/bash -lc 'touch x'"}}
    assert subject_of(codex).command == "touch x"


def test_grants_turn_ask_into_allow_for_the_same_command_only() -> None:
    grant = grant_for(bash("git push"), "terminal")
    assert grant == Grant("Bash", "git push", "terminal")
    decision = decide([], bash("git push"), [grant])
    assert decision == Decision("allow", "allowed for this session by terminal", None, "session")
    assert decide([], bash("git push --force"), [grant]).behavior == "ask"
    assert decide([], Subject("Write", "git push"), [grant]).behavior == "ask"
    ask_rule = [rule(tool="Bash", decision="ask")]
    assert decide(ask_rule, bash("git push"), [grant]).source == "session"
    write = grant_for(Subject("Write", None, ("/a",)))
    assert decide([], Subject("Write", None, ("/b",)), [write]).behavior == "allow"
    assert decide([], Subject("Write", "x"), [write]).behavior == "ask"


def test_rules_from_config_toml() -> None:
    config = parse_config(
        """
[policy]
ask_timeout = "15m"
[[policy.rule]]
tool = "Bash"
command = "rm *"
decision = "deny"
reason = "never"
[[policy.rule]]
tool = "Read"
decision = "allow"
"""
    )
    assert config.policy.ask_timeout == 900
    assert decide(config.policy.rule, bash("rm -rf /")).reason == (
        'rule 1 (tool Bash, command "rm *"): never'
    )
    assert decide(config.policy.rule, Subject("Read", None, ("/x",))).behavior == "allow"


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
subjects = st.builds(
    Subject,
    tool=st.sampled_from(["Bash", "Read", "Write", "shell", ""]) | texts,
    command=st.none() | texts,
    paths=st.lists(texts, max_size=3).map(tuple),
    agent_id=texts,
    project=texts,
)
rule_dicts = st.fixed_dictionaries(
    {"decision": st.sampled_from(["allow", "deny", "ask"])},
    optional={
        "tool": st.sampled_from(["Bash", "Read", "*", "S*"]),
        "command": st.sampled_from(["*", "git *", "ls*", "*;*"]),
        "path": st.sampled_from(["*", "/src/*", "*.md"]),
        "agent": st.sampled_from(["*", "a*"]),
    },
)


@given(subjects)
def test_without_rules_everything_is_ask(subject: Subject) -> None:
    assert decide([], subject) == Decision("ask", DEFAULT_REASON)


@given(st.lists(rule_dicts, max_size=5), subjects, st.lists(subjects, max_size=3))
def test_grants_never_override_a_deny(
    rules: list[dict[str, Any]], subject: Subject, granted: list[Subject]
) -> None:
    models = [rule(**r) for r in rules]
    grants = [grant_for(s) for s in [*granted, subject]]
    without = decide(models, subject)
    with_grants = decide(models, subject, grants)
    if without.behavior == "deny":
        assert with_grants == without
    else:  # the subject's own grant covers it
        assert with_grants.behavior == "allow"


@given(texts, st.sampled_from([";", "&&", "||", "|", "`", "$(", "\n", ">", "<", "&"]), texts)
def test_an_allow_glob_never_allows_an_operator_it_does_not_contain(
    head: str, operator: str, tail: str
) -> None:
    allow = [rule(command="*", decision="allow")]
    assert decide(allow, bash(head + operator + tail)).behavior == "ask"


def test_an_ask_says_which_allow_rule_the_chaining_safety_stopped() -> None:
    rules = [rule(tool="Bash", command="git status*", decision="allow")]
    decision = decide(rules, bash("git status; rm -rf /"))
    assert decision.behavior == "ask"
    assert decision.reason == (
        'no rule matched: a person decides (rule 1 (tool Bash, command "git status*") '
        "does not allow a command with ';', which its pattern does not contain)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(900, "15m"), (0.5, "0.5s"), (90, "90s"), (7200, "2h"), (86400, "1d"), (61, "61s")],
)
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
