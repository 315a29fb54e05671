"""The pure parts of remotes: what an ssh exit says (exit_error), a remote's stderr
read for a message, another machine's ``list --json`` checked, the MACHINE table, and
the ``--remote`` option's usage errors."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from agenthost.cli import cli
from agenthost.cli.listing import machine_rows
from agenthost.errors import (
    DaemonNotRunning,
    Forbidden,
    HostNotFound,
    NotConnected,
    RemoteError,
)
from agenthost.inventory import remote_items
from agenthost.remote import (
    STDERR_KEPT,
    Remote,
    as_remote,
    cannot_run,
    exit_error,
    for_good,
    parse_remote,
    read_stderr,
)

R = Remote("box", "me", 2222)
BRIDGE_NO_HOST = (
    b"agenthost: error: no host is running for agent 'a1' (No such file or directory: "
    b"/srv/h/hosts/a1.sock)\nagenthost: hint: did you mean 'a2'?\n"
)


@pytest.mark.parametrize(
    ("status", "stderr", "kind", "text"),
    [
        (None, b"", None, None),
        (0, b"whatever", None, None),
        (-9, b"", None, None),
        (
            255,
            b"me@box: Permission denied (publickey).\r\n",
            RemoteError,
            "ssh to me@box:2222 failed: me@box: Permission denied (publickey).",
        ),
        (255, b"", RemoteError, "no message (exit status 255)"),
        (
            127,
            b"bash: line 1: agenthost: command not found\n",
            RemoteError,
            "agenthost is not installed on me@box:2222",
        ),
        (126, b"sh: /opt/agenthost: Permission denied\n", RemoteError, "not installed"),
        (1, b"zsh: command not found: agenthost\n", RemoteError, "not installed"),
        (3, BRIDGE_NO_HOST, HostNotFound, "no host answers for agent 'a1' on me@box:2222"),
        (3, b"", HostNotFound, "no host answers for agent 'a1' on me@box:2222"),
        (
            7,
            b"agenthost: error: the host socket x is served by uid 5\n",
            Forbidden,
            "me@box:2222: the host socket",
        ),
        (
            2,
            b"Usage: agenthost [OPTIONS] COMMAND\nError: No such command 'bridge'.\n",
            RemoteError,
            "has no `bridge` command",
        ),
        (1, b"agenthost: error: boom\n", RemoteError, "failed (exit status 1): boom"),
        (4, b"\xff\xfe\x1b[31mgarbage\x00\n", RemoteError, "garbage"),
    ],
)
def test_exit_error(
    status: int | None, stderr: bytes, kind: type[Exception] | None, text: str | None
) -> None:
    error = exit_error(R, status, stderr, target="agent 'a1'")
    if kind is None:
        assert error is None
        return
    assert isinstance(error, kind)
    assert text is not None and text in error.message
    assert "\x1b" not in error.message and "\x00" not in error.message


def test_ssh_failures_get_a_hint_of_their_own() -> None:
    def hint(stderr: bytes) -> str:
        error = exit_error(R, 255, stderr, target="x")
        assert error is not None and error.hint is not None
        return error.hint

    assert "`ssh -p 2222 me@box`" in hint(b"Host key verification failed.\r\n")
    assert "authorized_keys" in hint(b"me@box: Permission denied (publickey).")
    assert "BatchMode" in hint(b"ssh: Could not resolve hostname box")


def test_no_host_keeps_the_remotes_hint_and_its_class() -> None:
    error = exit_error(R, 3, BRIDGE_NO_HOST, target="agent 'a1'")
    assert error is not None and error.hint == "did you mean 'a2'?"
    daemon = exit_error(R, 3, b"", target="the daemon", not_found=DaemonNotRunning)
    assert isinstance(daemon, DaemonNotRunning)


def test_missing_is_told_from_a_dropped_link() -> None:
    missing = exit_error(R, 127, b"", target="x")
    assert missing is not None and for_good(missing)
    too_old = exit_error(R, 2, b"No such command 'bridge'.", target="x")
    assert too_old is not None and for_good(too_old)
    failed = exit_error(R, 255, b"Connection refused", target="x")
    assert failed is not None and not for_good(failed)
    assert not for_good(NotConnected("lost"))
    assert for_good(cannot_run(R, "ssh", "No such file or directory"))


def test_read_stderr_is_bounded_and_clean() -> None:
    said = read_stderr(b"x" * (3 * STDERR_KEPT) + b"\nlast words \x07\n\n")
    assert said.error == "last words"
    assert len(said.text) <= STDERR_KEPT
    assert all(len(line) <= 300 for line in said.text.splitlines())
    assert read_stderr(b"").error == ""
    assert read_stderr(b"\r\n\r\n").hint is None


def test_as_remote() -> None:
    assert as_remote(None) is None
    assert as_remote(R) is R
    assert as_remote("me@box:2222") == R
    with pytest.raises(Exception, match="invalid"):
        as_remote("-oProxyCommand=x")


def test_ssh_argv_quotes_the_remote_command() -> None:
    argv = parse_remote("box").ssh_argv(["bridge", "a b;rm"], env={})
    assert argv[:2] == ["ssh", "-o"] and argv[-2:] == ["box", "agenthost bridge 'a b;rm'"]


ITEM: dict[str, Any] = {
    "agent_id": "a1",
    "socket_path": "/srv/h/hosts/a1.sock",
    "reachable": True,
    "alive": True,
    "agent": {
        "id": "a1",
        "project": "p",
        "state": "idle",
        "pid": 42,
        "worktree": "",
        "started_at": "2026-11-23T10:00:00Z",
        "backend": "demo",
    },
    "host": {
        "pid": 41,
        "version": "0.1.0",
        "protocol_version": "1.2",
        "started_at": "2026-11-23T10:00:00Z",
        "socket_path": "/srv/h/hosts/a1.sock",
    },
}


@pytest.mark.parametrize(
    "out",
    [b"", b"not json", b"{}", b'[{"agent_id": 3}]', b"[1]", b'"x"', b"\xff\xfe"],
)
def test_remote_items_refuses_garbage(out: bytes) -> None:
    with pytest.raises(RemoteError, match="me@box:2222"):
        remote_items(R, out)


def test_remote_items_adds_the_machine() -> None:
    import json

    assert remote_items(R, json.dumps([ITEM]).encode()) == [{**ITEM, "machine": "me@box:2222"}]


def test_machine_rows() -> None:
    odd = {"agent_id": "zz", "socket_path": "/x", "agent": {"state": 5}, "alive": False}
    record = {"agent_id": "b0", "status": "lost", "restarts": 2}
    when = {"created_at": "2026-11-23T10:00:00Z", "updated_at": "2026-11-23T10:00:00Z"}
    known = {"agent_id": "b0", "daemon": {**record, **when}}
    headers, rows = machine_rows([("m2", [ITEM, odd]), ("m1", [ITEM])])
    assert headers[:3] == ["machine", "agent", "state"]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("m2", "a1", "idle"),
        ("m2", "zz", "stale"),  # an item that does not read: shown, not fatal
        ("m1", "a1", "idle"),
    ]
    headers, rows = machine_rows([("m1", [ITEM]), ("m2", [known])])
    assert headers[-2:] == ["daemon", "restarts"]
    assert all(len(row) == len(headers) for row in rows)
    assert rows[1][:3] == ["m2", "b0", "-"] and rows[1][-2:] == ["lost", "2"]
    _, rows = machine_rows([("m1", [{"agent_id": "c0", "daemon": {"garbage": 1}}])])
    assert [r[:3] for r in rows] == [["m1", "c0", "stale"]]


@pytest.mark.parametrize(
    "args",
    [
        ["status", "a1", "--remote", "-oProxyCommand=touch /tmp/x"],
        ["status", "a1", "--remote", "box:99999"],
        ["list", "--remote", "ok", "--remote", "bad host"],
        ["attach", "a1", "--remote", ""],
        ["run", "--agent-id", "a1", "--remote", "@box"],
    ],
)
def test_bad_remote_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "--remote" in result.output


@pytest.mark.asyncio
async def test_the_remote_follow_policy() -> None:
    from pathlib import Path

    from agenthost.errors import RequestTimeout
    from agenthost.follow import Lost, default_policy, while_link_fails

    policy = while_link_fails(60.0)
    dropped = NotConnected("the connection to agent 'a1' on box ended (ssh was killed)")
    refused = exit_error(R, 255, b"Connection refused", target="x")
    assert refused is not None
    for error in (dropped, refused, RequestTimeout("slow")):
        assert policy(Lost(error, 1, 1)) is True
        assert policy(Lost(error, 1, 0)) is True  # not attached yet: the link may come
    gone = HostNotFound("no host answers for agent 'a1' on box")
    assert policy(Lost(gone, 1, 3)) is False  # the host ended: the follow ends
    with pytest.raises(HostNotFound):
        policy(Lost(gone, 1, 0))  # never attached: say why
    missing = exit_error(R, 127, b"", target="x")
    assert missing is not None
    with pytest.raises(RemoteError, match="not installed"):
        policy(Lost(missing, 1, 0))
    give_up = while_link_fails(0.0)  # no time for the link to come back
    assert give_up(Lost(dropped, 2, 2)) is False
    with pytest.raises(NotConnected):
        give_up(Lost(dropped, 2, 0))

    class Local:
        remote = None
        socket_path = Path("/nonexistent/hosts/a1.sock")

    class Far(Local):
        remote = R

    with pytest.raises(NotConnected):  # a local host without its lock: never attached
        default_policy(Local())(Lost(dropped, 1, 0))  # type: ignore[arg-type]
    assert default_policy(Far())(Lost(dropped, 1, 0)) is True  # type: ignore[arg-type]


def test_remote_items_name_the_machine_as_written() -> None:
    import json

    out = json.dumps([ITEM]).encode()
    assert remote_items(R, out, name="me@box:2222")[0]["machine"] == "me@box:2222"
