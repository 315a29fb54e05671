"""``agenthost policy test|show``, ``agenthost config check``, ``respond --session``, and
the decisions in ``history`` and ``export`` (the audit trail), with a real host."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import HostFactory
from hosttools import attached, cli, events_until, is_state

CONFIG = """
[policy]
ask_timeout = "15m"

[[policy.rule]]
tool = "Bash"
command = "rm *"
decision = "deny"
reason = "never delete"

[[policy.rule]]
tool = "Bash"
command = "touch demo*"
decision = "allow"
"""


def ah(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(home, *args)


def ah_json(home: Path, *args: str) -> Any:
    out = ah(home, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def configured(home: Path) -> Path:
    (home / "config.toml").write_text(CONFIG)
    return home


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["--command", "rm -rf /"], 'deny: rule 1 (tool Bash, command "rm *"): never delete'),
        (["--command", "touch demo-x"], 'allow: rule 2 (tool Bash, command "touch demo*")'),
        (["--command", "ls"], "ask: no rule matched: a person decides"),
        (
            ["--command", "touch demo; rm x"],
            'deny: rule 1 (tool Bash, command "rm *") for "rm x": never delete',
        ),
        (
            ["--command", "touch demo; ls"],
            "ask: no rule matched: a person decides (no rule "
            'allows "ls", one of the commands it runs)',
        ),
        ([], "ask: no rule matched: a person decides"),  # no command: no command rule
    ],
)
def test_policy_test_says_what_and_why(configured: Path, args: list[str], first_line: str) -> None:
    out = ah(configured, "policy", "test", "--tool", "Bash", *args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(first_line)
    if first_line.startswith("ask"):
        assert out.stdout.splitlines()[1] == "(denied if nobody answers within 15m)"


def test_the_reported_quoting_bypass_is_asked(home: Path) -> None:
    # the outside test's finding: an allow rule for `echo *` answered `allow` to a
    # command that runs `touch pwned` once bash has read its $'...' quoting
    (home / "config.toml").write_text(
        '[[policy.rule]]\ntool = "Bash"\ncommand = "echo *"\ndecision = "allow"\n'
    )
    for command in (
        "bash -c 'echo hi'$'\\x3b'touch$'\\x20'pwned",
        "bash -c 'echo hi'\"${IFS:2:1}\"'touch pwned'",
    ):
        out = ah(home, "policy", "test", "--tool", "Bash", "--command", command)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("ask: no rule matched: a person decides (no rule can "), (
            out.stdout
        )
    plain = ah(home, "policy", "test", "--tool", "Bash", "--command", "echo hi")
    assert plain.stdout.startswith("allow: rule 1")


def test_policy_test_json(configured: Path) -> None:
    found = ah_json(
        configured,
        "policy",
        "test",
        "--tool",
        "Write",
        "--path",
        "/src/../etc/passwd",
        "--agent",
        "a1",
        "--project",
        "web",
    )
    assert found["behavior"] == "ask" and found["rule"] is None and found["source"] == "default"
    assert found["subject"] == {
        "tool": "Write",
        "command": None,
        "paths": ["/etc/passwd"],
        "real_paths": ["/etc/passwd"],
        "agent": "a1",
        "project": "web",
    }


def test_policy_test_resolves_symlinks_in_the_agents_directory(home: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "link-to-etc").symlink_to("/etc")
    (home / "config.toml").write_text(
        f'[[policy.rule]]\npath = "{worktree}/*"\ndecision = "allow"\n'
    )
    args = ("policy", "test", "--tool", "Edit", "--cwd", str(worktree), "--path")
    assert ah(home, *args, "src/a.py").stdout.startswith("allow: rule 1")
    found = ah_json(home, *args, "link-to-etc/passwd")
    assert found["behavior"] == "ask" and found["subject"]["real_paths"] == ["/etc/passwd"]


def test_policy_show(configured: Path) -> None:
    out = ah(configured, "policy", "show")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[1:] == [
        '  deny   rule 1 (tool Bash, command "rm *"): never delete',
        '  allow  rule 2 (tool Bash, command "touch demo*")',
        "  ask    anything else (a person decides)",
        "ask_timeout: 15m",
        "allow for this session: allowed",
    ]
    shown = ah_json(configured, "policy", "show")
    assert [r["number"] for r in shown["rules"]] == [1, 2]
    assert shown["rules"][0]["reason"] == "never delete" and shown["ask_timeout"] == 900


def test_no_config_asks_for_everything(home: Path) -> None:
    out = ah(home, "policy", "test", "--tool", "Bash", "--command", "rm -rf /")
    assert out.stdout == "ask: no rule matched: a person decides\n"
    assert "does not exist: the defaults apply" in ah(home, "config", "check").stdout


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[policy\n", "not valid TOML"),
        ("[[policy.rule]]\ndecision = 'maybe'\n", "policy.rule[1].decision"),
        ("[[policy.rule]]\ndecision = 'allow'\ncommand_regex = '('\n", "not a regular expression"),
        ("[policy]\nask_timeout = 'soon'\n", "policy.ask_timeout"),
        ("[polcy]\n", "polcy: unknown key (did you mean 'policy'?)"),
        # issue 28: said without the key it meant, and a link born expired passed
        ("[notify]\ndelai = 3\n", "notify.delai: unknown key (did you mean 'delay'?)"),
        ("[web]\nlink_ttl = '0s'\n", "web.link_ttl: must be more than 0 seconds"),
    ],
)
def test_a_bad_config_is_named_with_its_key(home: Path, text: str, named: str) -> None:
    (home / "config.toml").write_text(text)
    for args in (["policy", "test", "--tool", "Bash"], ["policy", "show"], ["config", "check"]):
        out = ah(home, *args)
        assert out.returncode == 2 and named in out.stderr and out.stdout == ""
    failed = json.loads(ah(home, "config", "check", "--json").stdout)
    assert failed["ok"] is False and named in failed["error"]


def test_bad_arguments_are_usage_errors(home: Path) -> None:
    assert ah(home, "policy", "test").returncode == 2  # --tool is required
    assert ah(home, "policy", "test", "--tool", "Bash", "--nope").returncode == 2


def test_config_check_hides_secrets(home: Path) -> None:
    (home / "config.toml").write_text(
        '[notify.channels.hook]\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
        'secret = "s3cr3t"\n[web]\npublic_url = "https://box.example:8765/"\n'
    )
    out = ah(home, "config", "check")
    assert out.returncode == 0 and "s3cr3t" not in out.stdout
    assert "1 channel(s): hook (webhook); events: waiting, failed, died; after 10s" in out.stdout
    assert "public_url https://box.example:8765" in out.stdout
    checked = ah_json(home, "config", "check")
    assert checked["notify"]["channels"]["hook"]["secret"] == "(set)"
    assert "s3cr3t" not in json.dumps(checked)


def test_a_zero_delay_is_valid_and_said_to_notify_at_once(home: Path) -> None:
    (home / "config.toml").write_text("[notify]\ndelay = 0\n")
    out = ah(home, "config", "check")
    assert out.returncode == 0 and "; at once (delay 0)" in out.stdout


def test_respond_session_then_history_and_export(home: Path, host_factory: HostFactory) -> None:
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        conn.request("host.send", {"input": "/ask"})
        (event,) = [
            e for e in events_until(conn, is_state("waiting")) if e["type"] == "permission_request"
        ]
        rid = event["request"]["request_id"]
        refused = ah(home, "respond", "p1", rid, "deny", "--session")
        assert refused.returncode == 2 and "--session" in refused.stderr
        out = ah(home, "respond", "p1", rid, "allow", "--session")
        assert out.returncode == 0, out.stderr
        assert "(and the same for the rest of the session)" in out.stdout
        events_until(conn, is_state("idle"))
        (home / "config.toml").write_text('[[policy.rule]]\ntool = "Bash"\ndecision = "deny"\n')
        conn.request("host.send", {"input": "/ask"})
        events_until(conn, is_state("idle"))
        (home / "config.toml").unlink()
        conn.request("host.send", {"input": "/ask"})  # the grant again
        events_until(conn, is_state("idle"))
    shown = ah(home, "history", "p1").stdout
    decided = [line.strip() for line in shown.splitlines() if "⚖" in line]
    assert decided == [
        "⚖ Bash: allowed by cli (and for the rest of the session)",
        "⚖ Bash: denied by policy: rule 1 (tool Bash)",
        "⚖ Bash: allowed by policy: allowed for this session by cli",
    ]
    md = ah(home, "export", "p1", "--format", "md").stdout
    assert "> **Permission** Bash `touch demo-was-here`: denied by policy: rule 1 (tool Bash)" in md
    assert "allowed by policy: allowed for this session by cli" in md
    lines = ah(home, "export", "p1").stdout.splitlines()
    actors = [json.loads(x)["decision"]["actor"] for x in lines if '"permission"' in x]
    assert actors == ["cli", "policy", "policy"]
