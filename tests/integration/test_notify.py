"""The notification channels against real endpoints (an HTTP sink on 127.0.0.1, a
command, a session bus), ``agenthost notify test`` and ``agenthost notify log``."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.clis import unavailable
from notifysink import Sink, closed_port, sink

from agenthost.attention.channels import deliver, signature
from agenthost.attention.ledger import Ledger
from agenthost.attention.notices import Asked, Notice, with_links
from agenthost.config import parse_config

from hosttools import PY, wait_for

SECRET = "s3cret-for-the-sink"


def notify_cli(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {**os.environ, "AGENTHOST_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [PY, "-m", "agenthost", "notify", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=60,
    )


def waiting_notice() -> Notice:
    asked = Asked("req-1", "Bash", "touch demo-was-here", "2026-11-23T21:00:00.123456Z")
    return Notice(
        "waiting",
        "agent-7",
        "proj",
        "agent-7 (proj) asks to use Bash: touch demo-was-here",
        "Bash: touch demo-was-here",
        time.time(),
        "ep",
        3,
        (asked,),
        "waiting",
    )


def verify(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """What a receiver does (docs/notify.md)."""
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest("sha256=" + expected.hexdigest(), header)


def test_webhook_body_headers_and_signature() -> None:
    config = parse_config(
        f'[notify.channels.hook]\ntype = "webhook"\nurl = "URL/hook"\nsecret = "{SECRET}"\n'
        '[notify.channels.hook.headers]\n"X-Team" = "ops"\n'.replace("URL", "http://127.0.0.1:1")
    )
    with sink() as server:
        channel = config.notify.channels["hook"].model_copy(update={"url": server.url + "/hook"})
        notice = with_links(
            waiting_notice(), "https://box.example", b"k" * 32, now=time.time(), ttl=60
        )
        result = asyncio.run(deliver(channel, notice))
        assert result.ok, result.why
        (got,) = server.wait(1, "/hook")
    body = got.json()
    assert body["kind"] == "waiting" and body["agent_id"] == "agent-7" and body["project"] == "proj"
    assert body["requests"] == [
        {
            "request_id": "req-1",
            "tool": "Bash",
            "summary": "touch demo-was-here",
            "created_at": "2026-11-23T21:00:00.123456Z",
        }
    ]
    assert body["approve_url"].startswith("https://box.example/l/")
    assert body["url"] == "https://box.example/#/agent/agent-7"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Team"] == "ops"
    stamp = got.headers["X-Agenthost-Timestamp"]
    assert abs(int(stamp) - time.time()) < 3600
    header = got.headers["X-Agenthost-Signature"]
    assert verify(SECRET, stamp, got.body, header)
    assert not verify("another secret", stamp, got.body, header)
    assert not verify(SECRET, str(int(stamp) + 1), got.body, header)  # a replayed stamp
    assert header == signature(SECRET, stamp, got.body)


def test_webhook_without_secret_is_unsigned_and_secret_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "hook.secret"
    secret_file.write_text(SECRET + "\nignored\n")
    with sink() as server:
        config = parse_config(
            f'[notify.channels.a]\ntype = "webhook"\nurl = "{server.url}/a"\n'
            f'[notify.channels.b]\ntype = "webhook"\nurl = "{server.url}/b"\n'
            f'secret_file = "{secret_file}"\n'
        )
        for name in ("a", "b"):
            assert asyncio.run(deliver(config.notify.channels[name], waiting_notice())).ok
        (a,) = server.wait(1, "/a")
        (b,) = server.wait(1, "/b")
    assert "X-Agenthost-Signature" not in a.headers
    stamp = b.headers["X-Agenthost-Timestamp"]
    assert verify(SECRET, stamp, b.body, b.headers["X-Agenthost-Signature"])


def test_ntfy_headers_and_actions(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tk_abc\n")
    with sink() as server:
        config = parse_config(
            f'[notify.channels.phone]\ntype = "ntfy"\nurl = "{server.url}/agents"\n'
            f'token_file = "{token}"\n'
        )
        notice = with_links(
            waiting_notice(), "https://box.example", b"k" * 32, now=time.time(), ttl=60
        )
        assert asyncio.run(deliver(config.notify.channels["phone"], notice)).ok
        (got,) = server.wait(1, "/agents")
    assert got.body.decode() == "Bash: touch demo-was-here"
    assert got.headers["Title"] == "agent-7 (proj) asks to use Bash: touch demo-was-here"
    assert got.headers["Priority"] == "4"
    assert got.headers["Tags"] == "bell,agenthost"
    assert got.headers["Click"] == "https://box.example/#/agent/agent-7"
    assert got.headers["Authorization"] == "Bearer tk_abc"
    assert notice.approve_url and notice.deny_url
    assert got.headers["Actions"] == (
        f"http, Approve, {notice.approve_url}, method=POST, clear=true; "
        f"http, Deny, {notice.deny_url}, method=POST, clear=true"
    )


def test_ntfy_non_ascii_title_is_encoded() -> None:
    with sink() as server:
        config = parse_config(
            f'[notify.channels.p]\ntype = "ntfy"\nurl = "{server.url}/t"\npriority = 2\n'
        )
        notice = dataclasses.replace(waiting_notice(), title="café ☕")
        assert asyncio.run(deliver(config.notify.channels["p"], notice)).ok
        (got,) = server.wait(1, "/t")
    title = got.headers["Title"]
    assert title.startswith("=?UTF-8?B?") and title.endswith("?=")
    assert base64.b64decode(title[10:-2]).decode() == "café ☕"
    assert (
        got.headers["Priority"] == "2"
        and "Actions" not in got.headers
        and "Click" not in got.headers
    )


def test_http_failures_say_why() -> None:
    with sink() as server:
        server.status = 500
        config = parse_config(
            f'[notify.channels.a]\ntype = "webhook"\nurl = "{server.url}/a"\n'
            f'[notify.channels.b]\ntype = "ntfy"\nurl = "http://127.0.0.1:{closed_port()}/b"\n'
        )
        a = asyncio.run(deliver(config.notify.channels["a"], waiting_notice()))
        b = asyncio.run(deliver(config.notify.channels["b"], waiting_notice()))
    assert not a.ok and a.why == f"HTTP 500 from {server.url}/a: sink says no"
    assert not b.ok and b.why is not None and b.why.startswith("cannot reach http://127.0.0.1:")


def test_a_slow_endpoint_times_out() -> None:
    with sink() as server:
        server.hang.set()
        config = parse_config(
            f'[notify.channels.a]\ntype = "webhook"\nurl = "{server.url}/a"\ntimeout = 0.5\n'
        )
        result = asyncio.run(deliver(config.notify.channels["a"], waiting_notice()))
    assert not result.ok and result.why == f"no answer from {server.url}/a within 0.5s"


def command_config(tmp_path: Path, script: str, timeout: str = "30s") -> Path:
    path = tmp_path / "hook.py"
    path.write_text(script)
    (tmp_path / "config.toml").write_text(
        f'[notify.channels.cmd]\ntype = "command"\nargv = ["{PY}", "{path}", "{tmp_path}"]\n'
        f'timeout = "{timeout}"\n'
    )
    return tmp_path


WRITER = """
import json, os, sys
out = sys.argv[1]
notice = json.load(sys.stdin)
env = {k: v for k, v in os.environ.items() if k.startswith("AGENTHOST_NOTICE_")}
with open(os.path.join(out, "got.json"), "w") as f:
    json.dump({"notice": notice, "env": env}, f)
"""


def test_command_channel_gets_json_and_env(tmp_path: Path) -> None:
    home = command_config(tmp_path, WRITER)
    done = notify_cli(home, "test")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cmd (command): sent\n"
    got = json.loads((tmp_path / "got.json").read_text())
    assert got["notice"]["test"] is True and got["notice"]["agent_id"] == "notify-test"
    env = got["env"]
    assert env["AGENTHOST_NOTICE_KIND"] == "waiting"
    assert env["AGENTHOST_NOTICE_AGENT"] == "notify-test"
    assert env["AGENTHOST_NOTICE_TITLE"] == "agenthost: test notice"
    assert env["AGENTHOST_NOTICE_APPROVE_URL"] == "" and env["AGENTHOST_NOTICE_DENY_URL"] == ""


def test_agent_text_reaches_a_command_as_data_never_a_shell_word(tmp_path: Path) -> None:
    # an agent chooses what it asks to run, hence the notice's text: it travels in the
    # environment and on stdin of a program run without a shell, never in its argv
    mark = tmp_path / "pwned"
    hostile = f"x$(touch {mark}); touch {mark}2 `touch {mark}3` | sh"
    command_config(tmp_path, WRITER)
    config = parse_config((tmp_path / "config.toml").read_text())
    notice = dataclasses.replace(waiting_notice(), title=hostile, message=hostile)
    result = asyncio.run(deliver(config.notify.channels["cmd"], notice))
    assert result.ok, result.why
    got = json.loads((tmp_path / "got.json").read_text())
    assert got["env"]["AGENTHOST_NOTICE_TITLE"] == hostile
    assert got["notice"]["title"] == hostile
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")]


def test_command_channel_failure_and_timeout(tmp_path: Path) -> None:
    home = command_config(
        tmp_path,
        "import sys\nprint('line one', file=sys.stderr)\n"
        "print('no webhook for you', file=sys.stderr)\nsys.exit(3)\n",
    )
    done = notify_cli(home, "test", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    (channel,) = report["channels"]
    assert channel["channel"] == "cmd" and channel["ok"] is False
    assert channel["why"].endswith("exited with 3: line one no webhook for you")
    command_config(tmp_path, "import time\ntime.sleep(600)\n", timeout="0.5s")
    done = notify_cli(home, "test")
    assert done.returncode == 1
    assert done.stdout.endswith("did not finish within 0.5s\n")


def test_desktop_without_a_session_bus(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[notify.channels.desk]\ntype = "desktop"\n')
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    done = subprocess.run(
        [PY, "-m", "agenthost", "notify", "test", "--home", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        done.stdout
        == "desk (desktop): failed: no session bus: DBUS_SESSION_BUS_ADDRESS is not set\n"
    )


@pytest.fixture
def session_bus(tmp_path: Path) -> Iterator[str]:
    if shutil.which("dbus-daemon") is None or shutil.which("gdbus") is None:
        unavailable("a session bus needs dbus-daemon, and desktop notices gdbus")
    proc = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1",
         "--address", f"unix:path={tmp_path}/bus"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    address = proc.stdout.readline().strip()
    yield address
    proc.terminate()
    proc.wait(timeout=30)
    proc.stdout.close()


def test_desktop_on_a_bus_without_a_notification_server(tmp_path: Path, session_bus: str) -> None:
    (tmp_path / "config.toml").write_text('[notify.channels.desk]\ntype = "desktop"\n')
    done = notify_cli(tmp_path, "test", env={"DBUS_SESSION_BUS_ADDRESS": session_bus})
    assert done.returncode == 1
    assert done.stdout.startswith("desk (desktop): failed: desktop notification failed: ")
    assert "org.freedesktop.Notifications" in done.stdout


SYSTEM_PY = "/usr/bin/python3"
SERVER = Path(__file__).resolve().parent.parent / "fixtures" / "notification_server.py"


def has_system_dbus() -> bool:
    try:
        done = subprocess.run([SYSTEM_PY, "-c", "import dbus, gi"], capture_output=True, timeout=30)
    except OSError:
        return False
    return done.returncode == 0


def test_desktop_notification_reaches_the_server(
    tmp_path: Path, session_bus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not has_system_dbus():  # a failure in CI, where every real component runs
        unavailable("the notification server needs Debian's python3-dbus and python3-gi")
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": session_bus}
    server = subprocess.Popen(
        [SYSTEM_PY, str(SERVER), str(calls)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None and server.stdout.readline() == "ready\n"
        (tmp_path / "config.toml").write_text('[notify.channels.desk]\ntype = "desktop"\n')
        done = notify_cli(tmp_path, "test", env={"DBUS_SESSION_BUS_ADDRESS": session_bus})
        assert done.returncode == 0, done.stdout
        assert done.stdout == "desk (desktop): sent\n"
        (call,) = [json.loads(line) for line in calls.read_text().splitlines()]
        assert call["app"] == "agenthost" and call["summary"] == "agenthost: test notice"
        assert call["body"].startswith("This is a test") and call["timeout"] == -1
        # quotes, backslashes and newlines reach the server as written
        config = parse_config('[notify.channels.desk]\ntype = "desktop"\n')
        odd = Notice("failed", "a", "", 'say "hi" \\ there', "two\nlines 'q'", 0.0)
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session_bus)
        assert asyncio.run(deliver(config.notify.channels["desk"], odd)).ok
        last = json.loads(calls.read_text().splitlines()[-1])
        assert (last["summary"], last["body"]) == ('say "hi" \\ there', "two\nlines 'q'")
    finally:
        server.terminate()
        server.wait(timeout=30)
        assert server.stdout is not None
        server.stdout.close()


def test_notify_test_reports_each_channel(tmp_path: Path) -> None:
    with sink() as server:
        (tmp_path / "config.toml").write_text(
            f'[web]\npublic_url = "https://box.example"\n'
            f'[notify.channels.good]\ntype = "webhook"\nurl = "{server.url}/good"\n'
            f'[notify.channels.bad]\ntype = "ntfy"\nurl = "http://127.0.0.1:{closed_port()}/x"\n'
        )
        done = notify_cli(tmp_path, "test")
        assert done.returncode == 1
        lines = done.stdout.splitlines()
        assert lines[0] == "good (webhook): sent"
        assert lines[1].startswith("bad (ntfy): failed: cannot reach http://127.0.0.1:")
        (got,) = server.wait(1, "/good")
        assert got.json()["url"] == "https://box.example/#/agent/notify-test"
        done = notify_cli(tmp_path, "test", "--channel", "good", "--json")
        assert done.returncode == 0
        assert json.loads(done.stdout) == {
            "ok": True,
            "channels": [{"channel": "good", "type": "webhook", "ok": True, "why": None}],
        }
        server.wait(2, "/good")
        done = notify_cli(tmp_path, "test", "--channel", "nope")
        assert done.returncode == 2
        assert "no channel 'nope' in config.toml; channels: bad, good" in done.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[notify]\ndelay = "soon"\n', "notify.delay: 'soon' is not a duration"),
        ("[notify]\nretries = -1\n", "notify.retries"),
        ('[notify]\nevents = ["exploded"]\n', "notify.events[1]"),
        ('[notify.channels.x]\ntype = "pager"\n', "notify.channels.x"),
        (
            '[notify.channels.x]\ntype = "webhook"\nurl = "ftp://x"\n',
            "is not an http:// or https:// URL",
        ),
        ('[notify.channels.x]\ntype = "command"\nargv = []\n', "notify.channels.x.argv"),
        (
            '[notify.channels.x]\ntype = "ntfy"\nurl = "https://n.example/t"\npriority = 9\n',
            "priority",
        ),
        ("[[notify.override]]\nmute = true\n", "an override needs agent or project"),
        ('[[notify.override]]\nagent = "a"\nchannels = ["ghost"]\n', "names channel 'ghost'"),
        ("[notify\n", "not valid TOML"),
        ("[notify]\nbogus = 1\n", "notify.bogus: unknown key"),
    ],
)
def test_garbage_config_is_refused_with_its_reason(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(toml)
    done = notify_cli(tmp_path, "test")
    assert done.returncode == 2, done.stdout
    assert message in done.stderr


def test_no_channel_configured(tmp_path: Path) -> None:
    done = notify_cli(tmp_path, "test")
    assert done.returncode == 2
    assert "config.toml has no notification channel" in done.stderr


def test_notify_log(tmp_path: Path) -> None:
    assert notify_cli(tmp_path, "log").stdout == "no notices recorded\n"
    ledger = Ledger(tmp_path)
    row = ledger.claim("a1|e|3|waiting", "a1", "waiting", "hook", "a1 asks to use Bash: ls")
    assert row is not None
    ledger.update(row, "sent", 1, None)
    again = ledger.claim("a1|e|3|waiting", "a1", "waiting", "hook", "a1 asks to use Bash: ls")
    assert again is None  # the same notice, the same channel: recorded once
    row = ledger.claim("b2|e|0|died", "b2", "died", "phone", "b2 died: its host vanished")
    assert row is not None
    ledger.update(row, "failed", 3, "HTTP 500 from http://x/: no")
    ledger.close()
    lines = notify_cli(tmp_path, "log").stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("  a1  waiting  hook  sent  a1 asks to use Bash: ls")
    assert lines[1].endswith(
        "  b2  died  phone  failed after 3 attempts: HTTP 500 from http://x/: no"
        "  b2 died: its host vanished"
    )
    only = json.loads(notify_cli(tmp_path, "log", "b2", "--json").stdout)["notices"]
    assert [(n["agent"], n["status"], n["attempts"]) for n in only] == [("b2", "failed", 3)]
    last = json.loads(notify_cli(tmp_path, "log", "--limit", "1", "--json").stdout)["notices"]
    assert [n["agent"] for n in last] == ["b2"]
    bad = notify_cli(tmp_path, "log", "--limit", "0")
    assert bad.returncode == 2 and "--limit" in bad.stderr


def test_wait_for_is_used_not_sleep(tmp_path: Path) -> None:
    server = Sink()
    try:
        config = parse_config(f'[notify.channels.a]\ntype = "webhook"\nurl = "{server.url}/a"\n')
        assert asyncio.run(deliver(config.notify.channels["a"], waiting_notice())).ok
        assert wait_for(lambda: server.of("/a"))[0].json()["offset"] == 3
    finally:
        server.close()


def test_the_ledger_keeps_the_newest_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import agenthost.attention.ledger as ledger_module

    monkeypatch.setattr(ledger_module, "MAX_ROWS", 3)
    ledger = Ledger(tmp_path)
    for i in range(5):
        assert ledger.claim(f"k{i}", "a", "waiting", "hook", f"t{i}") is not None
    ledger.close()
    ledger = Ledger(tmp_path)
    assert [e.title for e in ledger.entries()] == ["t2", "t3", "t4"]
    ledger.close()


def test_a_notice_the_full_queue_refuses_is_recorded_as_failed(tmp_path: Path) -> None:
    from agenthost.attention.notifier import Notifier

    (tmp_path / "config.toml").write_text(
        '[notify.channels.hook]\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
    )
    notifier = Notifier(tmp_path, max_queue=1)  # not started: nothing drains the queue
    first = waiting_notice()
    second = dataclasses.replace(first, offset=first.offset + 1)
    notifier._submit([first, second])
    assert notifier.ledger is not None
    (entry,) = notifier.ledger.entries()
    assert (entry.kind, entry.channel, entry.status, entry.attempts) == (
        "waiting",
        "hook",
        "failed",
        0,
    )
    assert entry.why == "not sent: 1 notices were already waiting"
    notifier.ledger.close()
