"""Access, measured: who can reach a host, what its files let through, which names it
accepts, and where the agent's secrets go.

Extends what tests/integration already proves (``test_peer_of_another_uid_is_refused``,
``test_a_peer_of_another_uid_is_refused``, ``test_invalid_agent_id_is_refused_and_
creates_nothing``, ``test_spawned_env_secrets_stay_private``): modes at the moment of
creation (traced and watched, under a permissive umask), every file under the home
against another user, the library and the CLI as another user, agent ids through every
entry point (CLI verbs, the daemon's requests, the journal commands), and secrets
checked everywhere they could leak (status, lists, logs at debug level, events, the
registry's rows, command lines).

Running as another user needs root (``setuid``); without it those tests skip, because a
process cannot present another uid over ``SO_PEERCRED`` without the privilege to become
it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemontools import DaemonWorld, daemon_world
from hosttools import PY, HostProc, RawConn, start_host, wait_for

HostFactory = Callable[..., HostProc]
Figure = Callable[..., None]

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(
    os.getuid() != 0, reason="needs root: only a privileged process can act as another uid"
)
# Runs first in every child that acts as another user: it must really be that user,
# with no way back to root.
DROP = """
import json, os, sys
os.setgroups([])
os.setgid({uid})
os.setuid({uid})
assert (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) == ({uid},) * 4
assert os.getgroups() == []
try:
    os.setuid(0)
except PermissionError:
    pass
else:
    raise SystemExit("privileges were not dropped")
"""


def as_user(body: str, *args: str, uid: int = NOBODY, prelude: str = "") -> str:
    """Run ``body`` in a Python child that became ``uid`` (after ``prelude``, which
    runs as root: imports, since the interpreter's files may be private to root)."""
    code = prelude + DROP.format(uid=uid) + body
    out = subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# --- modes from the moment of creation ------------------------------------------------


class ModeWatcher:
    """A thread that ``lstat``s paths in a tight loop and keeps every mode it saw."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.seen: dict[Path, set[int]] = {p: set() for p in paths}
        self.observations = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in self.paths:
                try:
                    mode = os.lstat(path).st_mode
                except (FileNotFoundError, NotADirectoryError):
                    continue
                self.seen[path].add(mode)
                self.observations += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def private(mode: int) -> bool:
    return stat.S_IMODE(mode) & 0o077 == 0


UMASK_000 = ["sh", "-c", 'umask 000; exec "$@"', "sh"]


def test_files_are_private_from_the_moment_they_exist(
    home: Path, host_factory: HostFactory, figure: Figure
) -> None:
    """Under umask 000 (the worst a user could have), every path the host creates is
    seen only with its private mode, by a watcher polling from before the host starts,
    across host starts and 20 re-creations of the socket (SIGUSR1)."""
    hosts = home / "hosts"
    journal = home / "journal" / "a1"
    paths = [
        hosts,
        hosts / "a1.sock",
        hosts / "a1.lock",
        home / "journal",
        journal,
        journal / "meta.json",
        journal / "00000000000000000001.jsonl",
    ]
    watcher = ModeWatcher(paths)
    try:
        for _ in range(3):
            host = host_factory("a1", "--agent", "lines", command=["cat"], wrapper=UMASK_000)
            with host.raw() as conn:
                conn.request("host.send", {"input": "x"})  # the segment gets written
                for _ in range(20):
                    os.unlink(host.socket_path)
                    host.signal(signal.SIGUSR1)
                    wait_for(host.socket_path.exists, what="socket re-created")
                conn.request("host.stop", {"timeout": 5})
            assert host.wait_exit() == 0
    finally:
        watcher.stop()
    for path in paths:
        assert watcher.seen[path], f"{path} was never observed"
        bad = [oct(m) for m in watcher.seen[path] if not private(m)]
        assert not bad, f"{path} was seen with modes {bad}"
    assert watcher.seen[hosts / "a1.sock"] == {stat.S_IFSOCK | 0o600}
    figure("mode observations of host files (umask 000)", watcher.observations, "lstat")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_socket_is_bound_under_a_restrictive_umask(home: Path, host_factory: HostFactory) -> None:
    """The system calls, traced: the hosts directory is made 0700 by mkdir itself, and
    the socket is bound while the umask is 0177, so its inode is born 0600 (a watcher
    could miss a window of microseconds; the trace cannot)."""
    trace = home / "strace.out"
    wrapper = ["strace", "-f", "-qq", "-o", str(trace), "-e", "trace=umask,bind,mkdir,mkdirat"]
    host = host_factory("a1", "--agent", "lines", command=["cat"], wrapper=[*wrapper, "--"])
    with host.raw() as conn:
        conn.request("host.stop", {"timeout": 5})
    assert host.wait_exit() == 0
    umask: int | None = None
    binds = 0
    made_hosts = False
    for line in trace.read_text().splitlines():
        if m := re.search(r"umask\((0[0-7]*)\)", line):
            umask = int(m.group(1), 8)
        elif "bind(" in line and f'"{home}/hosts/a1.sock"' in line and line.endswith("= 0"):
            binds += 1
            assert umask == 0o177, f"bound with umask {umask and oct(umask)}: {line}"
        elif re.search(rf'mkdir(at)?\(.*"{home}/hosts", 0700\) = 0', line):
            made_hosts = True
    assert binds == 1 and made_hosts, trace.read_text()[-3000:]


def test_daemon_files_are_private_under_umask_000(home: Path) -> None:
    """The daemon and the hosts it spawns, all started with umask 000: nothing under the
    home has a group or other permission bit (socket, registry and its WAL, logs,
    journals, locks)."""
    old = os.umask(0)
    try:
        world_cm = daemon_world(home)  # the reaper, and all it starts, inherit umask 000
        world = world_cm.__enter__()
    finally:
        os.umask(old)
    try:
        world.start_daemon("--scan-interval", "0")
        world.spawn("d1", ["sh", "-c", "echo hello; exec cat"])
        wait_for(lambda: world.agents()["d1"]["last_offset"] >= 2, what="followed")
        world.registry("SELECT 1")  # the WAL and shared-memory files exist by now
        found = {p: p.lstat().st_mode for p in home.rglob("*")}
    finally:
        world_cm.__exit__(None, None, None)
    ours = {
        p: m
        for p, m in found.items()
        if not re.fullmatch(r"(daemon-\d+|cli-.*)\.(log|out)", p.name)
    }
    names = {p.name for p in ours}
    assert {"daemon.sock", "daemon.db", "daemon.db-wal", "d1.sock", "d1.log", "meta.json"} <= names
    bad = {
        str(p.relative_to(home)): oct(stat.S_IMODE(m)) for p, m in ours.items() if not private(m)
    }
    assert not bad


# --- other users -----------------------------------------------------------------------


@ROOT_ONLY
def test_nothing_under_the_home_is_readable_by_another_user(home: Path) -> None:
    """With the home itself opened up to others (0711), another user still gets EACCES on
    every socket, lock, journal, log, the registry, and the host's environment."""
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        world.spawn("d1", ["sh", "-c", "echo hello; exec cat"], env={"TOKEN": "s3cret"})
        wait_for(lambda: world.agents()["d1"]["last_offset"] >= 2, what="followed")
        host_pid = world.host_pids()["d1"]
        os.chmod(home, 0o711)
        targets = {
            "connect hosts/d1.sock": home / "hosts" / "d1.sock",
            "connect daemon.sock": home / "daemon.sock",
            "open hosts/d1.lock": home / "hosts" / "d1.lock",
            "list hosts": home / "hosts",
            "list journal": home / "journal",
            "open journal segment": home / "journal" / "d1" / "00000000000000000001.jsonl",
            "open logs/d1.log": home / "logs" / "d1.log",
            "open daemon.db": home / "daemon.db",
            "open daemon.db-wal": home / "daemon.db-wal",
            "open host environ": Path(f"/proc/{host_pid}/environ"),
        }
        body = """
out = {}
for name, path in json.loads(sys.argv[1]).items():
    try:
        if name.startswith("connect"):
            socket.socket(socket.AF_UNIX).connect(path)
        elif name.startswith("list"):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        out[name] = "allowed"
    except PermissionError:
        out[name] = "EACCES"
print(json.dumps(out))
"""
        paths = json.dumps({k: str(v) for k, v in targets.items()})
        result = json.loads(as_user(body, paths, prelude="import socket\n"))
        assert result == dict.fromkeys(targets, "EACCES")
        # the command line is world-readable: it carries no secret (see the env tests)
        cmdline = as_user(
            "print(open(sys.argv[1], 'rb').read().hex())", f"/proc/{host_pid}/cmdline"
        )
        assert b"s3cret" not in bytes.fromhex(cmdline) and b"--agent-id" in bytes.fromhex(cmdline)


@ROOT_ONLY
def test_library_and_cli_of_another_user_get_forbidden(host_factory: HostFactory) -> None:
    """Past loosened file modes, the peer check refuses another uid through the Python
    client (a typed ``Forbidden``) and the CLI (exit status 7, a clear message); the
    owner and root still get in."""
    host = host_factory("a1", "--agent", "lines", command=["cat"])
    os.chmod(host.home, 0o711)
    os.chmod(host.socket_path.parent, 0o711)
    os.chmod(host.socket_path, 0o666)
    # the interpreter's files are root's: load every CLI module (they load lazily) and
    # build the models (built when first used, which imports more of pydantic) first
    prelude = (
        "import importlib, pkgutil, agenthost.cli\n"
        "for m in pkgutil.iter_modules(agenthost.cli.__path__):\n"
        "    importlib.import_module('agenthost.cli.' + m.name)\n"
        "from agenthost.client import Client\nfrom agenthost.cli import main\n"
        "from agenthost.protocol import build_models\nbuild_models()\n"
    )
    body = """
home = sys.argv[1]
try:
    Client("a1", home=home).connect()
    print("connected")
except Exception as exc:
    print(type(exc).__name__, exc.code, exc)
os.environ["AGENTHOST_HOME"] = home  # (--home would insist on a readable directory)
sys.argv = ["agenthost", "status", "a1"]
sys.stderr = sys.stdout
try:
    main()
except SystemExit as exc:
    print("exit", exc.code)
"""
    lines = as_user(body, str(host.home), prelude=prelude).splitlines()
    assert lines[0].startswith("Forbidden forbidden uid 65534 may not use this host"), lines
    assert lines[-1] == "exit 7", lines
    assert any("uid 65534 may not use this host" in line for line in lines[1:-1]), lines
    assert host.status()["agent"]["state"] == "running"  # the owner (root) still gets in
    assert host.alive()


# --- agent ids --------------------------------------------------------------------------

BAD_IDS = [
    "../x",
    "..",
    ".",
    "/etc/passwd",
    "/tmp/x",
    "a/../../b",
    "x" * 1000,
    "a\nb",
    "a b",
    "a\\b",
    "ａ1",  # fullwidth a
    "a\u2215b",  # division slash, looks like /
    "a\u2024\u2024",  # one dot leaders, look like ..
    "\u202ea1",  # right-to-left override
    "a1\u200b",  # zero width space
    "-rf",
    "~root",
    "$HOME",
]


VERBS = [
    ["serve", "--agent", "lines"],
    ["status"],
    ["attach"],
    ["history"],
    ["send", "hello"],
    ["stop"],
    ["export"],
    ["ping"],
]


def test_cli_refuses_ids_that_could_escape(home: Path) -> None:
    """Every CLI verb that takes an agent id refuses all of ``BAD_IDS`` with exit status
    2 before touching the disk (a NUL cannot be passed in argv; the daemon test covers
    it). The real CLI, run in-process by click's runner: 144 process starts would cost
    most of a minute."""
    from click.testing import CliRunner

    from agenthost.cli import cli

    root = home / "h"
    (root / "journal").mkdir(parents=True, mode=0o700)
    runner = CliRunner()
    for verb in VERBS:
        for agent_id in BAD_IDS:
            if verb[0] == "serve":
                args = [*verb, "--home", str(root), "--agent-id", agent_id, "--", "cat"]
            else:
                args = [verb[0], "--home", str(root), "--", agent_id, *verb[1:]]
            result = runner.invoke(cli, args, env={"AGENTHOST_HOME": str(root)})
            assert result.exit_code == 2, (verb, agent_id, result.output)
            assert "invalid agent id" in result.output, (verb, agent_id, result.output)
    leftovers = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert leftovers == ["journal"]
    assert sorted(p.name for p in home.iterdir()) == ["h"]


def test_daemon_requests_refuse_ids_that_could_escape(home: Path) -> None:
    """``daemon.spawn``, ``stop`` and ``forget`` with every bad id, NUL included: each
    one ``invalid_payload``, nothing created anywhere, the daemon unharmed. (``watch``
    takes names only as a filter, compared in memory: it watches nothing for them.)"""
    outside = home.parent / f"{home.name}-outside"
    with daemon_world(home) as world:
        world.start_daemon("--scan-interval", "0")
        before = sorted(p.relative_to(home) for p in home.rglob("*"))
        for agent_id in [*BAD_IDS, "a\x00b", "\x00", f"../{outside.name}/x", ""]:
            spec = {"agent_id": agent_id, "agent": "lines", "command": ["cat"]}
            for mtype, payload in [
                ("daemon.spawn", spec),
                ("daemon.spawn", {**spec, "cwd": "/", "env": {agent_id or "K": agent_id}}),
                ("daemon.stop", {"agent_id": agent_id}),
                ("daemon.forget", {"agent_id": agent_id}),
            ]:
                response = world.call(mtype, payload)
                assert response["success"] is False, (mtype, agent_id, response)
                assert response["code"] == "invalid_payload", (mtype, agent_id, response)
            since = {agent_id: {"epoch": "e", "offset": 1}}
            watched = world.request("daemon.watch", {"agents": [agent_id], "since": since})
            assert watched["agents"] == {}
        after = sorted(p.relative_to(home) for p in home.rglob("*"))
        assert after == before
        assert not outside.exists()
        assert world.ping()["agents"] == 0


def test_journal_commands_stay_inside_the_home(home: Path, host_factory: HostFactory) -> None:
    """``export`` refuses bad ids; ``gc`` skips a symlink in the journal directory (it
    used to die on it with a traceback) and never touches what it points to."""
    host = host_factory("a1", "--agent", "lines", "--linger", "0", command=["true"])
    host.wait_exit()
    outside = Path(f"{home}-outside")
    outside.mkdir()
    try:
        (outside / "00000000000000000001.jsonl").write_text("precious\n")
        (home / "journal" / "evil").symlink_to(outside)
        old = 1_000_000_000.0
        for path in [*(home / "journal" / "a1").iterdir(), outside / "00000000000000000001.jsonl"]:
            os.utime(path, (old, old))

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [PY, "-m", "agenthost", *args, "--home", str(home)],
                capture_output=True,
                text=True,
                timeout=60,
            )

        for agent_id in ["../journal/a1", str(outside), "evil/../a1"]:
            out = cli("export", agent_id)
            assert out.returncode == 2 and "invalid agent id" in out.stderr
        gc = cli("gc", "--older-than", "1d", "--json")
        assert gc.returncode == 0, gc.stderr
        assert [(d["agent_id"], d["action"]) for d in json.loads(gc.stdout)] == [("a1", "removed")]
        assert (outside / "00000000000000000001.jsonl").read_text() == "precious\n"
        assert (home / "journal" / "evil").is_symlink()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


# --- secrets --------------------------------------------------------------------------


def secret_free(text: str | bytes, secret: str) -> bool:
    data = text.encode() if isinstance(text, str) else text
    return secret.encode() not in data


def everything_in(directory: Path, exclude: tuple[str, ...] = ()) -> bytes:
    out = b""
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.name.startswith(exclude):
            with contextlib.suppress(OSError):
                out += path.read_bytes()
    return out


PRINT_HASH = ["sh", "-c", 'printf %s "$API_TOKEN" | sha256sum; exec cat']


def test_serve_env_secret_stays_out_of_everything_the_host_shows(home: Path) -> None:
    """``serve --detach --env``: the agent gets the value; the host's command line,
    status, list, history, events, journal and its debug log never show it."""
    secret = "sk-host-5ecret-value-91"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    env = {**os.environ, "AGENTHOST_DEMO_PACE": "0"}
    env.pop("NOTIFY_SOCKET", None)
    args = ["serve", "--agent-id", "s1", "--home", str(home), "--detach", "--log-level", "debug"]
    args += ["--agent", "lines", "--env", f"API_TOKEN={secret}", "--", *PRINT_HASH]
    started = subprocess.run(
        [PY, "-m", "agenthost", *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert started.returncode == 0, started.stderr
    lock = json.loads((home / "hosts" / "s1.lock").read_text())
    host_pid, agent_pid = lock["pid"], lock["agent_pid"]
    try:
        with RawConn(home / "hosts" / "s1.sock") as conn:
            conn.request("host.attach", {"offset": 0})
            conn.read_until(lambda f: digest in str(f.get("data", "")))
            conn.request("host.send", {"input": "ping"})
            conn.read_until(lambda f: f.get("data") == "ping")
            shown = [
                json.dumps(conn.request(t)) for t in ("host.status", "host.list", "host.history")
            ]
        for text in shown:
            assert secret_free(text, secret)
        assert secret_free(Path(f"/proc/{host_pid}/cmdline").read_bytes(), secret)
        # the agent has it, as asked
        assert secret.encode() in Path(f"/proc/{agent_pid}/environ").read_bytes()
        for verb in (["status", "s1", "--json"], ["list", "--json"], ["history", "s1"]):
            out = subprocess.run(
                [PY, "-m", "agenthost", *verb, "--home", str(home)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0 and secret_free(out.stdout + out.stderr, secret)
        assert secret_free(everything_in(home / "journal"), secret)
        assert secret_free(everything_in(home / "logs"), secret)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(host_pid, signal.SIGTERM)
        wait_for(lambda: not (home / "hosts" / "s1.lock").exists(), what="host gone")
    assert secret_free(everything_in(home / "logs"), secret)  # its last words included


def test_daemon_env_secret_only_in_the_registry_spec(world: DaemonWorld) -> None:
    """Beyond the integration test: a restart of the agent (it needs the value again),
    every row and column of every table except ``agents.spec``, the watch stream with
    its notices, the spawn response, ``daemon.list``, and the logs at debug level."""
    secret = "sk-daemon-5ecret-value-42"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    daemon = world.start_daemon("--scan-interval", "0", "--flush-interval", "0.05")
    with world.conn() as watch:
        assert watch.request("daemon.watch", {})["success"]
        command = ["sh", "-c", 'printf %s "$API_TOKEN" | sha256sum; read x; exit 3']
        spawned = world.call(
            "daemon.spawn",
            {
                "agent_id": "sec",
                "agent": "lines",
                "command": command,
                "env": {"API_TOKEN": secret},
                "restart": {"policy": "on-failure", "max_restarts": 1, "backoff": 0.05},
            },
        )
        assert spawned["success"] and secret_free(json.dumps(spawned), secret)
        frames: list[dict[str, Any]] = []
        seen = 0

        def hashes() -> int:
            return sum(1 for f in frames if digest in str(f.get("data", "")))

        for _ in range(2):  # the first run, and the restart after its failure
            while hashes() == seen:
                frames.append(watch.frame())
            seen = hashes()
            host_pid = world.host_pids()["sec"]
            assert secret_free(Path(f"/proc/{host_pid}/cmdline").read_bytes(), secret)
            with socket.socket(socket.AF_UNIX) as s:  # end this run: exit status 3
                s.connect(str(world.home / "hosts" / "sec.sock"))
                s.sendall(b'{"type": "host.send", "payload": {"input": "go"}}\n')
                s.recv(4096)
        wait_for(lambda: world.agents()["sec"]["status"] == "failed", what="gave up")
    assert secret_free(json.dumps(frames), secret)
    assert secret_free(json.dumps(world.agents()), secret)
    for table in ("agents", "exits", "meta"):
        columns = [r[1] for r in world.registry(f"PRAGMA table_info({table})")]
        for row in world.registry(f"SELECT * FROM {table}"):
            for column, value in zip(columns, row, strict=True):
                if (table, column) != ("agents", "spec"):
                    assert secret_free(str(value), secret), (table, column)
    (spec,) = world.registry("SELECT spec FROM agents WHERE agent_id = 'sec'")[0]
    assert secret in spec  # kept, in cleartext, for restarts: the file is 0600 in a 0700 home
    assert stat.S_IMODE(world.db_path.stat().st_mode) == 0o600
    assert secret_free(daemon.log(), secret)
    assert secret_free(everything_in(world.home / "logs"), secret)
    assert secret_free(everything_in(world.home / "journal"), secret)


def test_foreground_serve_env_is_on_the_command_line(home: Path) -> None:
    """Documented, not hidden: ``serve --env K=V`` in the foreground carries the value in
    its own argv (the user typed it there), so /proc/PID/cmdline shows it to every user;
    ``--detach``, ``run`` and the daemon do not (tests above). Status, list and the log
    still never show it."""
    secret = "sk-foreground-5ecret"
    host = start_host(home, "f1", "--agent", "lines", "--env", f"K={secret}", command=["cat"])
    try:
        assert secret.encode() in Path(f"/proc/{host.pid}/cmdline").read_bytes()
        with host.raw() as conn:
            for t in ("host.status", "host.list"):
                assert secret_free(json.dumps(conn.request(t)), secret)
            conn.request("host.stop", {"timeout": 5})
        host.wait_exit()
        assert secret_free(host.log(), secret)
    finally:
        if host.alive():
            host.proc.kill()
            host.proc.wait()
