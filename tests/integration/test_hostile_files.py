"""Files planted, or left writable, in the home are never obeyed.

A home that was once open to other users (made under umask 000, a shared directory) may
hold a ``config.toml`` of theirs (an allow-everything rule, a ``command`` channel that
would run as us), a token store or a key they know, a registry that says what to
restart, a lock or a log of theirs; making the home private afterwards leaves those
files there. Each is refused unless it is ours and nobody else can write it (a secret:
nor read it), and the error names the file, what is wrong and how to fix it. Our own
files (0600) go on working.

Planting a file owned by another uid needs root; those cases skip without it. The
others (a mode 0666 or 0620, a symbolic link) run as anyone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_hostile_home import NOBODY, ROOT_ONLY, cli
from test_policy_host import ALLOW, ask_turn, decisions

from agenthost.attention.ledger import Ledger
from agenthost.daemon.discovery import end_from_log
from agenthost.daemon.registry import Registry
from agenthost.errors import ConfigError
from agenthost.journal.segments import segment_name, write_atomic
from agenthost.web.linkledger import LinkLedger

from conftest import HostFactory
from daemontools import DaemonWorld, daemon_world
from hosttools import DEADLINE, PY, attached, events_until, is_state, states, wait_for

ME = os.geteuid()

HOW = [pytest.param("foreign", marks=ROOT_ONLY), "0666", "0620", "symlink"]
"""How a file gets planted: owned by another uid, writable by others or by the group,
or a symbolic link (to a file of ours elsewhere)."""

ALLOW_EVERYTHING = '[[policy.rule]]\ndecision = "allow"\nreason = "planted"\n'
SECRET = "a" * 64 + "\n"


def plant(path: Path, data: str | bytes, how: str) -> str:
    """Put ``data`` at ``path`` the way ``how`` says; return what the refusal says."""
    raw = data.encode() if isinstance(data, str) else data
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if how == "symlink":
        elsewhere = path.parent / f".elsewhere-{path.name}"
        elsewhere.write_bytes(raw)
        elsewhere.chmod(0o600)  # a file of ours: only the link is wrong
        path.symlink_to(elsewhere)
        return f"{path} is a symbolic link, not the file itself: put the file in its place"
    path.write_bytes(raw)
    if how == "foreign":
        path.chmod(0o600)
        os.chown(path, NOBODY, NOBODY)
        return f"{path} is owned by uid {NOBODY}, not you (uid {ME}): remove it or chown it"
    mode = int(how, 8)
    path.chmod(mode)
    if not mode & 0o022:
        return ""  # ours, writable by us alone: nothing to refuse
    return f"{path} is writable by others (mode {mode:04o}): chmod go-w it"


def start(home: Path, *args: str, ready: str) -> subprocess.CompletedProcess[str]:
    """Run ``agenthost ARGS`` (a daemon, a gateway), expected to refuse to start; if
    it prints ``ready`` instead, it is stopped there (its output says so). stdout and
    stderr together are the result's ``stderr``."""
    env = {**os.environ, "AGENTHOST_HOME": str(home), "NO_COLOR": "1"}
    argv = [PY, "-m", "agenthost", *args]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        said = []
        for line in proc.stdout:
            said.append(line)
            if ready in line:
                said.append("(it started: stopped by the test)\n")
                proc.terminate()
        proc.wait(DEADLINE)
    return subprocess.CompletedProcess(argv, proc.returncode, "", "".join(said))


def refused(done: Any, says: str) -> None:
    """A command that ended with the refusal ``says``, and a non-zero status."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert says in done.stderr, done.stderr


# --- config.toml: the CLI -------------------------------------------------------------


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "verb",
    [
        ["config", "check"],
        ["policy", "test", "--tool", "Bash", "--command", "rm -rf ~"],
        ["notify", "test"],
    ],
    ids=["config-check", "policy-test", "notify-test"],
)
def test_the_cli_refuses_a_planted_config(
    home: Path, tmp_path: Path, how: str, verb: list[str]
) -> None:
    marker = tmp_path / "ran"
    says = plant(home / "config.toml", ALLOW_EVERYTHING + command_channel(marker), how)
    done = cli(home, *verb)
    refused(done, says)
    assert "allow" not in done.stdout and not marker.exists()


def test_the_cli_obeys_our_own_config(home: Path) -> None:
    plant(home / "config.toml", ALLOW_EVERYTHING, "0600")
    done = cli(home, "policy", "test", "--tool", "Bash", "--command", "ls")
    assert done.returncode == 0 and done.stdout.startswith("allow: rule 1"), done


# --- config.toml: a running host ------------------------------------------------------


def test_a_config_made_writable_by_others_is_no_longer_obeyed(
    home: Path, host_factory: HostFactory
) -> None:
    path = home / "config.toml"
    plant(path, ALLOW, "0600")
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        assert decisions(ask_turn(conn))[0]["behavior"] == "allow"  # ours: obeyed
        path.chmod(0o666)  # neither its size nor its mtime change: its ctime does
        events = ask_turn(conn)
        assert states(events)[-1] == "waiting" and decisions(events) == []
        (error,) = [e["error"] for e in events if e["type"] == "error"]
        assert error == (
            f"{path} is writable by others (mode 0666): chmod go-w it; "
            "the approval policy asks for everything until it is fixed"
        )
        (request,) = [e["request"] for e in events if e["type"] == "permission_request"]
        answer = {"request_id": request["request_id"], "behavior": "allow"}
        # while refused, a person may not make "allow for this session" either
        remembered = conn.request("host.respond", {**answer, "remember": "session"})
        assert remembered["code"] == "forbidden", remembered
        assert remembered["error"].startswith(
            "allow for this session is off while config.toml is not trusted: "
        )
        assert conn.request("host.respond", answer)["success"]
        events_until(conn, is_state("idle"))
        path.chmod(0o600)  # fixed: obeyed again
        assert decisions(ask_turn(conn))[0]["behavior"] == "allow"


@pytest.mark.parametrize("how", HOW)
def test_a_host_never_obeys_a_planted_config(
    home: Path, host_factory: HostFactory, how: str
) -> None:
    says = plant(home / "config.toml", ALLOW_EVERYTHING, how)
    host = host_factory("p1", "--agent", "demo")
    with attached(host) as conn:
        events = ask_turn(conn)
    assert states(events)[-1] == "waiting" and decisions(events) == []
    (error,) = [e["error"] for e in events if e["type"] == "error"]
    assert error.startswith(says)


# --- config.toml: the daemon's notices ------------------------------------------------


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


def command_channel(marker: Path) -> str:
    return (
        '[notify]\ndelay = "0s"\nevents = ["died"]\n'
        f'[notify.channels.evil]\ntype = "command"\nargv = ["touch", "{marker}"]\n'
    )


def kill_an_agent(world: DaemonWorld, agent_id: str) -> None:
    """Spawn a demo agent through the daemon and kill it: a ``died`` notice is due."""
    world.request("daemon.spawn", {"agent_id": agent_id, "agent": "demo"})
    wait_for(lambda: world.agents()[agent_id]["state"] == "idle", what=f"{agent_id} idle")
    os.kill(world.agents()[agent_id]["agent_pid"], signal.SIGKILL)


def notices(world: DaemonWorld) -> list[tuple[Any, ...]]:
    """The notice record's rows once each has its outcome (a row is written `sending`
    first, then `sent` or `failed`, `retrying` between): none while one is on its way."""
    path = world.home / "attention" / "notices.db"
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT agent, kind, channel, status, why FROM notices").fetchall()
    except sqlite3.OperationalError:  # made, its table not yet
        return []
    finally:
        db.close()
    return [] if any(row[3] not in ("sent", "failed") for row in rows) else rows


@pytest.mark.parametrize("how", [pytest.param("foreign", marks=ROOT_ONLY), "0666", "symlink"])
def test_a_planted_command_channel_never_runs(world: DaemonWorld, how: str) -> None:
    marker = world.home / "ran"
    says = plant(world.home / "config.toml", command_channel(marker), how)
    world.start_daemon("--scan-interval", "0")
    kill_an_agent(world, "n1")
    ((*row, why),) = wait_for(lambda: notices(world), what="the notice recorded")
    assert row == ["n1", "died", "config.toml", "failed"] and why.startswith(f"not sent: {says}")
    assert not marker.exists()


def test_our_own_command_channel_runs(world: DaemonWorld) -> None:
    marker = world.home / "ran"
    plant(world.home / "config.toml", command_channel(marker), "0600")
    world.start_daemon("--scan-interval", "0")
    kill_an_agent(world, "n1")
    wait_for(marker.exists, what="the command of our own channel")


# --- the web gateway's files ----------------------------------------------------------


WEB_FILES = {
    "web/tokens.json": json.dumps({"version": 1, "tokens": []}),
    "web/secret": SECRET,
    "attention/link.key": SECRET,
}


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", list(WEB_FILES))
def test_the_gateway_does_not_start_on_a_planted_file(home: Path, name: str, how: str) -> None:
    says = plant(home / name, WEB_FILES[name], how)
    refused(start(home, "web", "--listen", "127.0.0.1:0", ready="listening on"), says)


@pytest.mark.parametrize("name", ["web/secret", "attention/link.key"])
def test_a_secret_others_can_read_is_refused(home: Path, name: str) -> None:
    plant(home / name, SECRET, "0644")
    says = f"{home / name} is readable by others (mode 0644): chmod 600 it"
    refused(start(home, "web", "--listen", "127.0.0.1:0", ready="listening on"), says)


@pytest.mark.parametrize("how", HOW)
def test_token_commands_refuse_a_planted_store(home: Path, how: str) -> None:
    says = plant(home / "web" / "tokens.json", WEB_FILES["web/tokens.json"], how)
    refused(cli(home, "web", "token", "list"), says)


# --- the SQLite files ------------------------------------------------------------------


def planted_db(path: Path, make: Any, how: str) -> str:
    """A real database made by ``make(path)``, then planted as ``how`` says."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    make(path)
    data = path.read_bytes()
    path.unlink()
    return plant(path, data, how)


@pytest.mark.parametrize("how", HOW)
def test_the_daemon_does_not_start_on_a_planted_registry(home: Path, how: str) -> None:
    says = planted_db(home / "daemon.db", lambda p: Registry(p).close(), how)
    refused(start(home, "daemon", "--no-host-factory", ready="daemon.ready"), says)


@ROOT_ONLY
def test_a_planted_write_ahead_log_is_refused(home: Path) -> None:
    Registry(home / "daemon.db").close()
    says = plant(home / "daemon.db-wal", b"", "foreign")
    refused(start(home, "daemon", "--no-host-factory", ready="daemon.ready"), says)


@pytest.mark.parametrize("how", HOW)
def test_the_notice_record_is_refused(home: Path, how: str) -> None:
    says = planted_db(home / "attention" / "notices.db", lambda p: Ledger(home).close(), how)
    refused(cli(home, "notify", "log"), says)


@pytest.mark.parametrize("how", HOW)
def test_the_used_links_ledger_is_refused(home: Path, how: str) -> None:
    path = home / "web" / "links.db"
    says = planted_db(path, lambda p: LinkLedger(p).used("x"), how)
    with pytest.raises(ConfigError) as caught:
        LinkLedger(path).claim("nonce", 2_000_000_000)
    assert caught.value.message.startswith(says)


# --- what a host opens: its lock, its log, its journal ---------------------------------


@pytest.mark.parametrize("how", HOW)
def test_a_host_refuses_a_planted_lock(home: Path, how: str) -> None:
    says = plant(home / "hosts" / "x.lock", "", how)
    refused(cli(home, "serve", "--agent-id", "x", "--linger", "0", "--", "true"), says)


@pytest.mark.parametrize("how", HOW)
def test_a_detached_host_refuses_a_planted_log(home: Path, how: str) -> None:
    says = plant(home / "logs" / "x.log", "", how)
    refused(cli(home, "serve", "--agent-id", "x", "--detach", "--linger", "0", "--", "true"), says)


@ROOT_ONLY
def test_a_host_refuses_a_journal_directory_of_another_user(home: Path) -> None:
    journal = home / "journal" / "x"
    journal.mkdir(parents=True)
    os.chown(journal, NOBODY, NOBODY)
    done = cli(home, "serve", "--agent-id", "x", "--linger", "0", "--", "true")
    refused(done, f"{journal} belongs to uid {NOBODY}, not to this user")


@pytest.mark.parametrize("how", HOW)
def test_a_host_never_appends_to_a_planted_journal_segment(home: Path, how: str) -> None:
    says = plant(home / "journal" / "x" / segment_name(1), "", how)
    refused(cli(home, "serve", "--agent-id", "x", "--linger", "0", "--", "true"), says)


@pytest.mark.parametrize("how", HOW)
def test_a_planted_temporary_file_never_becomes_the_journals_meta(home: Path, how: str) -> None:
    directory = home / "journal" / "x"
    plant(directory / ".meta.json.tmp", "{}", how)
    write_atomic(directory / "meta.json", b'{"epoch": "e"}\n')
    made = (directory / "meta.json").lstat()
    assert stat.S_ISREG(made.st_mode) and made.st_uid == ME
    assert stat.S_IMODE(made.st_mode) == 0o600
    assert (directory / "meta.json").read_bytes() == b'{"epoch": "e"}\n'


@pytest.mark.parametrize("how", HOW)
def test_a_planted_log_says_nothing_of_how_an_agent_ended(home: Path, how: str) -> None:
    end = {"event": "agent.exited", "exit_code": 0, "signal": None, "stop_requested": True}
    path = home / "logs" / "x.log"
    plant(path, json.dumps(end) + "\n", how)
    assert end_from_log(path) is None  # else: "a stop was asked for", no restart
    path.unlink()
    plant(path, json.dumps(end) + "\n", "0600")
    assert end_from_log(path) == {"exit_code": 0, "signal": None, "stop_requested": True}


# --- what we make ourselves -------------------------------------------------------------


@pytest.fixture
def loose_world(home: Path) -> Iterator[DaemonWorld]:
    """A daemon world under umask 000: the reaper, so the daemon and its hosts, get it."""
    old = os.umask(0)
    try:
        with daemon_world(home) as world:
            os.umask(old)  # (the test's own files: as usual)
            yield world
    finally:
        os.umask(old)


def loose_files(home: Path, *skip: str) -> dict[str, str]:
    """The files and directories under ``home`` that group or others may use, and their
    mode; the test's own daemon logs (``daemon-N.log``) and ``skip`` left out."""
    loose = {}
    for directory, dirs, files in os.walk(home):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs + files:
            path = Path(directory) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077 and not name.startswith("daemon-") and name not in skip:
                loose[str(path.relative_to(home))] = f"{mode:04o}"
    return loose


def test_every_file_we_make_is_private_under_umask_000(
    loose_world: DaemonWorld, tmp_path: Path
) -> None:
    home = loose_world.home
    marker = tmp_path / "sent"
    config = command_channel(marker) + '[web]\npublic_url = "https://box.example"\n'
    plant(home / "config.toml", config, "0600")
    loose_world.start_daemon("--scan-interval", "0")
    kill_an_agent(loose_world, "n1")  # a host, its journal and log; a notice, its record
    wait_for(marker.exists, what="the notice sent")
    assert cli(home, "web", "token", "add", "t1", umask=0).returncode == 0
    names = {p.name for p in home.rglob("*")}
    assert names >= {"daemon.db", "notices.db", "link.key", "tokens.json", "n1.log"}
    assert loose_files(home) == {}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_worktree_setup_log_is_private_under_umask_000(loose_world: DaemonWorld) -> None:
    home = loose_world.home
    repo = home / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e.invalid", *args],
            check=True,
            capture_output=True,
        )
    loose_world.start_daemon("--scan-interval", "0")
    args = ["--agent", "demo", "--worktree", "--repo", str(repo), "--setup", "true"]
    done = loose_world.cli("run", "--agent-id", "w1", *args)
    assert done.returncode == 0, done.stderr
    assert "worktree setup: exit status 0" in (home / "logs" / "w1.log").read_text()
    # (what git makes in the repository and the worktree is the agent's work, not ours)
    assert loose_files(home, "repo", "worktrees") == {}
