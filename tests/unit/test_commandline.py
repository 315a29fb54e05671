"""Command lines read with bash's grammar (agenthost.attention.commandline), and the
approval policy on top of it: a corpus of attempts to talk an allow rule past, deny
rules that must see through wrappers and quoting, and everyday commands that must stay
allowed."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agenthost.attention.commandline import (
    MAX_COMMAND_CHARS,
    RESERVED_WORDS,
    SHELLS,
    Simple,
    ansi_c,
    read,
    read_argv,
    shell_script,
)
from agenthost.attention.policy import Subject, decide, subject_of
from agenthost.config import PolicyRule


def rules(*specs: tuple[str, str]) -> list[PolicyRule]:
    return [
        PolicyRule.model_validate({"tool": "Bash", "command": pattern, "decision": decision})
        for pattern, decision in specs
    ]


def behavior(rule_list: list[PolicyRule], command: str) -> str:
    return decide(rule_list, Subject("Bash", command)).behavior


# --- the findings of the outside test: each must not be allowed by `echo *` -------------------

FINDINGS = [
    "bash -c 'echo hi'$'\\x3b'touch$'\\x20'pwned",
    "bash -c 'echo hi'$'\\n'touch$'\\x20'pwned",
    "bash -c 'echo hi'$'\\073'touch$'\\x20'pwned",
    "bash -c 'echo hi'$'\\x7c'sh",
    "bash -c 'echo hi'\"${IFS:2:1}\"'touch pwned'",
]


@pytest.mark.parametrize("command", FINDINGS)
def test_the_reported_bypasses_are_asked(command: str) -> None:
    allow_echo = rules(("echo *", "allow"))
    assert behavior(allow_echo, command) == "ask"
    assert not read(command).certain


# --- attempts to run `touch pwned` past generous allow rules -----------------------------------

GENEROUS = rules(
    *(
        (pattern, "allow")
        for pattern in (
            "echo *",
            "git *",
            "ls*",
            "cat *",
            "find *",
            "env *",
            "xargs *",
            "timeout *",
            "nice *",
            "sudo *",
            "exec *",
            "command *",
            "grep *",
            "fish *",
        )
    )
)

BYPASSES = [
    # quoting bash knows and shlex does not
    "echo hi$'\\x3b'touch pwned",
    "echo $'\\x3b'; touch pwned",
    'echo $"hi"; touch pwned',
    "echo $'hi'",
    # operators, each way
    "echo hi;touch pwned",
    "echo hi && touch pwned",
    "echo hi || touch pwned",
    "echo hi | touch pwned",
    "echo hi |& touch pwned",
    "echo hi & touch pwned",
    "echo hi\ntouch pwned",
    "echo hi\n\ntouch pwned",
    # substitutions and expansions
    "echo $(touch pwned)",
    "echo `touch pwned`",
    'echo "$(touch pwned)"',
    'echo "`touch pwned`"',
    "echo ${IFS}touch",
    "echo $IFS",
    "echo $((1+1))",
    "echo ~root",
    "echo ~/x",
    "echo a=~/x",
    "echo *",
    "echo ?",
    "echo [a]",
    "echo {a,b}",
    "echo {1..3}",
    "ls @(a|b)",
    # redirections, here-strings, here-documents, process substitution
    "echo hi > ~/.bashrc",
    "echo hi >> pwned",
    "echo hi 2>pwned",
    "echo hi >&pwned",
    "echo hi &>pwned",
    "cat < /etc/shadow",
    "cat <<< hi",
    "cat <<EOF\nhi\nEOF",
    "cat <(touch pwned)",
    "echo >(touch pwned)",
    # assignments change what a command does
    "LD_PRELOAD=/tmp/x.so echo hi",
    "GIT_SSH_COMMAND='touch pwned' git fetch",
    "export PATH=/tmp; echo hi",
    # control structures, groups, functions, negation, tests
    "( touch pwned )",
    "{ touch pwned; }",
    "! touch pwned",
    "if true; then touch pwned; fi",
    "for i in 1; do touch pwned; done",
    "while false; do :; done",
    "echo() { touch pwned; }; echo hi",
    "[[ -n $(touch pwned) ]]",
    "case x in x) touch pwned;; esac",
    # comments
    "echo hi # ; touch pwned",
    # nested shells
    "bash -c 'echo hi; touch pwned'",
    "sh -c \"sh -c 'touch pwned'\"",
    'bash -lc "$CMD"',
    'bash -c "$(curl -s x)"',
    "bash -o posix -c 'touch pwned'",
    "bash --rcfile x -c 'echo hi'",
    "fish -c 'touch pwned'",
    "busybox sh -c 'touch pwned'",
    'bash -c \'bash -c "bash -c \\"bash -c \\\\\\"bash -c touch\\\\\\"\\""\'',
    "eval echo hi",
    "eval 'touch pwned'",
    "source ./evil.sh",
    ". ./evil.sh",
    "trap 'touch pwned' EXIT",
    "alias ls='touch pwned'",
    # wrappers: what they run must be allowed too
    "env touch pwned",
    "env -i touch pwned",
    "env FOO=1 touch pwned",
    "env -S 'touch pwned'",
    "timeout 5 touch pwned",
    "nice -n 5 touch pwned",
    "sudo touch pwned",
    "sudo -u root touch pwned",
    "exec touch pwned",
    "command touch pwned",
    "echo pwned | xargs touch",
    "xargs -a list touch",
    "find . -exec touch pwned \\;",
    "find . -execdir sh -c 'touch pwned' \\;",
    "find . -ok touch {} +",
    "git ls-files | xargs cat",
    # look-alike and invisible characters, NUL, CR
    "echo hi\u00a0; touch pwned",
    "ec\u200bho hi",
    "echo hi\u2028touch pwned",
    "echo hi\u202e",
    "echo hi\x00; touch pwned",
    "echo hi\r; touch pwned",
    "echo hi\rtouch pwned",
    "echo hi\x1b[2K",
    # a backslash that continues the line, a stray or unbalanced quote
    "echo a\\\nb",
    "echo 'unbalanced",
    'echo "unbalanced',
    "echo hi )",
    # a name that is not allowed, however it is spelled
    "\\touch pwned",
    "'touch' pwned",
    't"ouc"h pwned',
    # too long to read
    "echo " + "a" * MAX_COMMAND_CHARS,
]


@pytest.mark.parametrize("command", BYPASSES)
def test_bypass_attempts_are_never_allowed(command: str) -> None:
    decision = decide(GENEROUS, Subject("Bash", command))
    assert decision.behavior == "ask", decision
    assert decision.source == "default"


@pytest.mark.parametrize("command", BYPASSES)
def test_bypass_attempts_as_an_argv_list_are_never_allowed(command: str) -> None:
    # Codex and ACP agents give `[shell, -lc, script]`
    request = {"tool_name": "Bash", "input": {"command": ["/bin/bash", "-lc", command]}}
    assert decide(GENEROUS, subject_of(request)).behavior == "ask"


# --- deny rules see every reading ----------------------------------------------------------

DENIED = [
    "rm -rf /",
    "/bin/rm -rf /",
    "=rm -rf /",  # zsh: the path of rm
    "\\rm -rf /",
    "'rm' -rf /",
    '"rm" -rf /',
    "r'm' -rf /",
    "r$'\\x6d' -rf /",
    "$'\\x72\\x6d' -rf /",
    "\uff52\uff4d -rf /",  # fullwidth letters
    "ls; rm -rf /",
    "ls && rm -rf /",
    "ls || rm -rf /",
    "true | rm -rf /",
    "echo $(rm -rf /)",
    "echo `rm -rf /`",
    "echo x > $(rm -rf /)",
    "bash -c 'rm -rf /'",
    "bash -lc 'ls; rm -rf /'",
    "sh -c \"sh -c 'rm -rf /'\"",
    "bash -c 'r'$'m'' -rf /'",
    "eval 'rm -rf /'",
    "eval rm -rf /",
    "env rm -rf /",
    "env -i FOO=1 rm -rf /",
    "sudo rm -rf /",
    "sudo -u root /bin/rm -rf /",
    "timeout 5 rm -rf /",
    "nice -n 5 rm -rf /",
    "nohup rm -rf / &",
    "command rm -rf /",
    "exec rm -rf /",
    "echo / | xargs rm -rf",
    "find / -exec rm -rf {} \\;",
    "find / -execdir rm -rf {} +",
    "if true; then rm -rf /; fi",
    "( rm -rf / )",
    "FOO=1 rm -rf /",
    "rm -rf / # just kidding",
    "rm -rf /\r",
]


@pytest.mark.parametrize("command", DENIED)
def test_deny_rules_match_any_reading(command: str) -> None:
    deny_rm = rules(("rm *", "deny"), ("*", "allow"))
    assert behavior(deny_rm, command) == "deny"


def test_a_deny_rule_still_matches_commands_that_only_mention_it_literally() -> None:
    # what is denied is a command line whose reading is `rm ...`; a literal argument
    # naming rm is not run, and stays allowed
    allow_echo = rules(("rm *", "deny"), ("echo *", "allow"))
    assert behavior(allow_echo, "echo 'rm -rf /'") == "allow"
    assert behavior(allow_echo, "echo rm -rf /") == "allow"


# --- everyday commands stay allowed -----------------------------------------------------------

EVERYDAY = rules(
    *(
        (pattern, "allow")
        for pattern in (
            "git status*",
            "git diff*",
            "git log*",
            "git add *",
            "git commit *",
            "npm test*",
            "npm run lint*",
            "ls*",
            "cat *",
            "grep *",
            "find *",
            "echo *",
            "pytest*",
            "python -m pytest*",
            "head*",
            "tail*",
            "wc *",
            "cd *",
            "timeout *",
            "env *",
            "sort*",
        )
    )
)

BENIGN = [
    "git status",
    "git status -s",
    "git diff --stat HEAD~1",
    "git log --oneline -5",
    "git log --format=%H%n%s -3",
    'git commit -m "fix: handle a; b | c && d"',
    "git commit -m 'it'\"'\"'s done'",
    "git add -A && git commit -m 'wip'",
    "npm test",
    "npm test -- --watch=false",
    "npm run lint -- --fix",
    "npm test 2>&1 | tail -20",
    "ls -la src/",
    "ls >/dev/null 2>&1",
    "cat README.md",
    'grep -rn "foo|bar" src',
    "grep -rn 'TODO' .",
    "grep -E '^(a|b)$' file.txt",
    "find . -name '*.py' -type f",
    "find . -name \\*.py",
    'echo "hello world"',
    "echo hi\\;there",
    "echo 'a;b'",
    "pytest -q tests/unit/test_x.py::test_y",
    "python -m pytest -x",
    "cd src && npm test",
    "git status\ngit diff",
    "timeout 60 npm test",
    "env NODE_ENV=test npm test",
    "/bin/bash -lc 'git status'",
    'bash -c "npm test"',
    "sh -c 'git status && git diff'",
    "cat a.txt | sort | head -3",
    "wc -l $'x'" if False else "wc -l x",
    "echo \u00e9t\u00e9 \u6f22\u5b57",
]


@pytest.mark.parametrize("command", BENIGN)
def test_everyday_commands_stay_allowed(command: str) -> None:
    decision = decide(EVERYDAY, Subject("Bash", command))
    assert decision.behavior == "allow", decision


def test_codex_argv_of_a_plain_command_is_allowed() -> None:
    request = {"tool_name": "shell", "input": {"command": ["/bin/bash", "-lc", "git status"]}}
    allow = [PolicyRule.model_validate({"command": "git status*", "decision": "allow"})]
    assert decide(allow, subject_of(request)).behavior == "allow"
    plain = {"tool_name": "Bash", "input": {"command": ["ls", "*.py"]}}  # no shell: literal
    assert decide([*allow, *EVERYDAY], subject_of(plain)).behavior == "allow"


# --- the reading itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "argvs"),
    [
        ("git status -s", [["git", "status", "-s"]]),
        ('echo "a b" c\\ d', [["echo", "a b", "c d"]]),
        ("a && b | c; d\ne", [["a"], ["b"], ["c"], ["d"], ["e"]]),
        ("/bin/bash -lc 'git status; ls'", [["git", "status"], ["ls"]]),
        ("bash -c 'sh -c \"ls -l\"'", [["ls", "-l"]]),
        ("npm test 2>&1 >/dev/null", [["npm", "test"]]),
        ("find . -exec rm {} \\;", [["find", ".", "-exec", "rm", "{}", ";"]]),
        ("echo ''", [["echo", ""]]),
        ('echo ""', [["echo", ""]]),
    ],
)
def test_certain_readings(command: str, argvs: list[list[str]]) -> None:
    reading = read(command)
    assert reading.doubt is None
    assert [list(c.argv) for c in reading.commands] == argvs


@pytest.mark.parametrize(
    ("command", "doubt"),
    [
        ("echo $'x'", "it uses $'…' quoting"),
        ('echo $"x"', 'it uses $"…" quoting'),
        ("echo ${IFS}", "it uses a parameter expansion (${…})"),
        ("echo $X", "it uses a variable ($NAME)"),
        ("echo *.py", "it uses a pattern that the shell expands to file names (*)"),
        ("echo {a,b}", "it uses a brace expansion ({…})"),
        ("echo ~", "it uses a home directory expansion (~)"),
        ("ls > out", "it redirects input or output (> out)"),
        ("a & b", "it runs a command in the background (&)"),
        ("X=1 ls", "it uses a variable assignment (NAME=…)"),
        ("ls # c", "it uses a comment (#…)"),
        ("echo 'x", "bash's grammar cannot read it (an unclosed quote, a stray operator)"),
        ("eval ls", "eval runs text as code"),
        ("echo \u202e", "it contains the invisible or control character U+202E"),
        ("bash -c 'ls $X'", "the script it gives bash is in doubt: it uses a variable ($NAME)"),
        ("", "it runs no command"),
    ],
)
def test_doubts_say_why(command: str, doubt: str) -> None:
    assert read(command).doubt == doubt


def test_wrappers_know_what_they_run() -> None:
    (timeout,) = read("timeout -s KILL 5 npm test").commands
    assert timeout.runs == (Simple(("npm", "test")),)
    (env,) = read("env -i A=1 B=2 -- git status").commands
    assert env.runs == (Simple(("git", "status")),)
    (nested,) = read("env bash -c 'ls; pwd'").commands
    assert nested.runs == (Simple(("ls",)), Simple(("pwd",)))
    for unknown in ("xargs rm", "find . -exec rm {} +", "env -S 'a b'", "sudo -Z x"):
        (simple,) = read(unknown).commands
        assert simple.runs is None, unknown
    for alone in ("env", "command -v git", "find . -name x"):
        (simple,) = read(alone).commands
        assert simple.runs == (), alone


@pytest.mark.parametrize(
    ("argv", "script"),
    [
        (["bash", "-c", "ls"], "ls"),
        (["/bin/bash", "-lc", "ls"], "ls"),
        (["zsh", "-l", "-c", "ls", "name", "arg"], "ls"),
        (["sh", "-ec", "ls"], "ls"),
        (["bash", "--login", "-c", "ls"], "ls"),
        (["bash", "script.sh"], None),
        (["bash"], None),
        (["bash", "-c"], None),
        (["bash", "-o", "posix", "-c", "ls"], None),
        (["python", "-c", "x"], None),
    ],
)
def test_shell_script(argv: list[str], script: str | None) -> None:
    assert shell_script(argv) == script


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("\\x3b", ";"),
        ("\\073", ";"),
        ("\\n", "\n"),
        ("\\x7c", "|"),
        ("\\u00e9", "\u00e9"),
        ("\\cA", "\x01"),
        ("a\\'b", "a'b"),
        ("\\q", "\\q"),
    ],
)
def test_ansi_c_decoding(body: str, value: str) -> None:
    assert ansi_c(body) == value


literal_words = st.text(
    st.characters(
        codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")
    )
    | st.just(" "),
    max_size=10,
)


@given(st.lists(literal_words, min_size=1, max_size=6))
def test_any_literal_argv_reads_back_word_for_word(argv: list[str]) -> None:
    assume(argv[0] and "=" not in argv[0] and shell_script(argv) is None)
    assume(argv[0].rsplit("/", 1)[-1] not in {*SHELLS, "eval", "alias", "trap", "source", "."})
    assume("fish" not in argv[0] and "busybox" not in argv[0])
    reading = read_argv(argv)
    assert reading.doubt is None, (argv, reading.doubt)
    assert [list(c.argv) for c in reading.commands] == [argv]


@given(st.text(max_size=200))
def test_garbage_is_read_without_error(command: str) -> None:
    reading = read(command)
    if reading.certain:
        # a certain line is certain word for word: a second reader agrees
        for simple in reading.commands:
            assert shlex.split(simple.text) == list(simple.argv)
    assert command in reading.texts


@given(st.text(alphabet="ab;|&$'\"\\`(){}<>#*?~!= \n\t", max_size=40))
def test_shell_syntax_soup_is_never_allowed_unless_certain(command: str) -> None:
    allow_all = rules(("*", "allow"))
    decision = decide(allow_all, Subject("Bash", command))
    assert (decision.behavior == "allow") == read(command).certain


def test_deep_lists_do_not_exhaust_the_stack() -> None:
    line = " && ".join(["true"] * 5000)
    reading = read(line)
    assert reading.certain and len(reading.commands) == 5000
    assert behavior(rules(("true", "allow")), line) == "allow"


def test_paths_are_resolved_before_an_allow_rule_matches(tmp_path: Any) -> None:
    # path = "WT/*" must not allow WT/link-to-etc/passwd
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "link-to-etc").symlink_to("/etc")
    allow = [PolicyRule.model_validate({"path": f"{worktree}/*", "decision": "allow"})]
    deny = [PolicyRule.model_validate({"path": "/etc/*", "decision": "deny"})]
    request = {"tool_name": "Edit", "input": {"file_path": f"{worktree}/link-to-etc/passwd"}}
    import os

    resolved = subject_of(request, resolve=os.path.realpath)
    assert resolved.real_paths == ("/etc/passwd",)
    assert decide(allow, resolved).behavior == "ask"
    assert decide(deny, resolved).behavior == "deny"
    inside = {"tool_name": "Edit", "input": {"file_path": f"{worktree}/src/a.py"}}
    assert decide(allow, subject_of(inside, resolve=os.path.realpath)).behavior == "allow"


@pytest.mark.parametrize("code_point", [0x31860, 0xD0000, 0xE0000, 0xF0000, 0x10FFFF])
@pytest.mark.parametrize("line", ["{%s", "echo ${%s", "echo {%s}", "a {%s b"])
def test_characters_that_crash_the_grammar_never_reach_it(line: str, code_point: int) -> None:
    # tree-sitter-bash's scanner hands a character after `{` to isdigit(), which reads
    # out of bounds for such code points and crashed this process (upstream #337);
    # the grammar now reads a masked copy. Many parses: the crash depended on luck
    command = line % chr(code_point)
    for _ in range(50):
        read.cache_clear()
        reading = read(command)
        assert not reading.certain and command in reading.texts


@pytest.mark.parametrize(
    "word", sorted(RESERVED_WORDS | {"unset", "export", "declare", "local", "[", "1@", "a'b"})
)
def test_an_argv_of_a_reserved_word_is_that_program(word: str) -> None:
    # an argv is never read by a shell: ["if"] runs a program named if (hypothesis
    # found that bash's grammar read the joined line as an unfinished `if`, and `1@`
    # and a bare `unset` as no command at all)
    for argv in ([word], [word, "x"], ["echo", word]):
        reading = read_argv(argv)
        assert reading.doubt is None, (argv, reading.doubt)
        assert [list(c.argv) for c in reading.commands] == [argv]
