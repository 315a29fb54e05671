"""The approval policy's decisions (agenthost.attention.policy), table-driven."""

from __future__ import annotations

import shlex
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
    # a line is allowed command by command: here `rm` is allowed by no rule
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
    ([{"command_regex": "git .*", "decision": "allow"}], bash("git log; rm x"), "ask", None),
    # a quoted operator is a literal word: echo prints it
    ([{"command": "echo *", "decision": "allow"}], bash("echo 'a;b'"), "allow", 1),
    # a pipeline whose every command is allowed
    (
        [{"command": "git log*", "decision": "allow"}, {"command": "head*", "decision": "allow"}],
        bash("git log -3 | head"),
        "allow",
        1,
    ),
    # an operator in an allow pattern matches nothing: commands are matched one by one
    (
        [{"command": "git log * | head*", "decision": "allow"}],
        bash("git log -3 | head"),
        "ask",
        None,
    ),
    ([{"command": "make *> out*", "decision": "allow"}], bash("make all > out.txt"), "ask", None),
    # harmless redirections are certain
    ([{"command": "npm test*", "decision": "allow"}], bash("npm test 2>&1"), "allow", 1),
    ([{"command": "ls*", "decision": "allow"}], bash("ls >/dev/null 2>&1"), "allow", 1),
    # deny rules match any command of a line (denying more is safe)
    ([{"command": "rm *", "decision": "deny"}], bash("rm -rf / ; echo"), "deny", 1),
    ([{"command": "*rm *", "decision": "deny"}], bash("ls; rm -rf /"), "deny", 1),
    ([{"command": "rm *", "decision": "deny"}], bash("ls; rm -rf /"), "deny", 1),
    # ...and a deny anywhere in a line beats the allow of another command
    (
        [{"command": "ls*", "decision": "allow"}, {"command": "rm *", "decision": "deny"}],
        bash("ls && rm -rf /"),
        "deny",
        2,
    ),
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
        ({"command": "/bin/bash -lc 'git status'"}, "/bin/bash -lc 'git status'"),
        ({"command": ["bash", "-c", "echo hi; rm x"]}, "bash -c 'echo hi; rm x'"),
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
        ({"file_path": "/src/../etc/passwd"}, None, ("/src/../etc/passwd",)),
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
    assert subject_of(codex).command == "/bin/bash -lc 'touch x'"
    edit = {"tool_name": "Edit", "input": {"file_path": "/src/../etc/passwd"}}
    assert subject_of(edit).paths == ("/etc/passwd",)  # normalised as written
    real = subject_of(edit, resolve=lambda p: "/real" + p)
    assert real.real_paths == ("/real/src/../etc/passwd",)  # the path as given is resolved
    assert subject_of(edit, resolve=lambda p: None).real_paths is None


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
    decision = decide([], subject)
    assert (decision.behavior, decision.rule, decision.source) == ("ask", None, "default")
    assert decision.reason.startswith(DEFAULT_REASON)


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


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@given(
    st.lists(words, min_size=1, max_size=4),
    st.sampled_from([";", "&&", "||", "|", "\n"]),
    st.lists(words, min_size=1, max_size=4),
)
def test_a_line_is_allowed_only_when_each_of_its_commands_is(
    first: list[str], operator: str, second: list[str]
) -> None:
    # any words, quoted as a shell reads them, joined by an operator: the line is
    # allowed exactly when both of its commands are allowed on their own
    rules = [rule(command="git *", decision="allow"), rule(command="ls*", decision="allow")]
    one, two = shlex.join(["git", *first]), shlex.join(second)
    line = decide(rules, bash(f"{one} {operator} {two}"))
    alone = decide(rules, bash(one)), decide(rules, bash(two))
    both = all(d.behavior == "allow" for d in alone)
    assert (line.behavior == "allow") == both, (one, two, line)


@given(texts, st.sampled_from(["$'", '$"', "${", "$(", "`", "$((", "<(", ">(", "*", "~", "{a,b}"]))
def test_an_allow_glob_never_allows_an_expansion(head: str, construct: str) -> None:
    allow = [rule(command="*", decision="allow")]
    assert decide(allow, bash(f"echo {construct}{head}")).behavior == "ask"


def test_an_ask_says_why_no_rule_could_allow() -> None:
    rules = [rule(tool="Bash", command="git status*", decision="allow")]
    decision = decide(rules, bash("git status; rm -rf /"))
    assert (decision.behavior, decision.reason) == (
        "ask",
        'no rule matched: a person decides (no rule allows "rm -rf /", one of the '
        "commands it runs)",
    )
    decision = decide(rules, bash("git status $'-s'"))
    assert (decision.behavior, decision.reason) == (
        "ask",
        "no rule matched: a person decides (no rule can allow it: it uses $'…' quoting)",
    )
    decision = decide([rule(command="xargs *", decision="allow")], bash("xargs rm"))
    assert decision.reason == (
        "no rule matched: a person decides (no rule can allow it: what xargs runs is not "
        "known in full)"
    )


def test_the_reason_of_an_allowed_line_names_a_rule_for_each_command() -> None:
    rules = [
        rule(command="git log*", decision="allow"),
        rule(command="head*", decision="allow", reason="reads"),
    ]
    decision = decide(rules, bash("git log -3 | head -n 2"))
    assert decision == Decision(
        "allow",
        'rule 1 (command "git log*") for "git log -3"; rule 2 (command "head*") for '
        '"head -n 2": reads',
        1,
        "rule",
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(900, "15m"), (0.5, "0.5s"), (90, "90s"), (7200, "2h"), (86400, "1d"), (61, "61s")],
)
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
