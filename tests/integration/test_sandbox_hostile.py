"""A hostile agent in each sandbox profile (real bubblewrap, a real host): every
attempt on what decides for it (the agenthost home, the host's socket, the host's
process), on the user's secrets, and on the network is refused, while the agent keeps
working in its worktree. Each attempt is first shown to work unconfined (``off``), so
each refusal is the sandbox's doing (docs/sandbox.md, docs/security.md)."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandboxtools import PROBE, http_server, is_root, require_sandbox, user_home, worktree

from hosttools import (
    PY,
    HostProc,
    attached,
    events_until,
    kill_tree,
    pid_gone,
    start_host,
    wait_for,
)

__all__ = ["user_home", "worktree"]  # fixtures

HostFactory = Callable[..., HostProc]
ABSTRACT = f"agenthost-test-{os.getpid()}"
NAME = "pypi.org"
"""A name this machine's DNS resolves (its package registry)."""


def resolvable(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, 443))
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _confinable() -> None:
    require_sandbox()


@pytest.fixture(params=["exec", "fork"])
def start_by(request: pytest.FixtureRequest) -> str:
    """Hosts exec'd and hosts forked by the host factory alike (conftest.py)."""
    return str(request.param)


@pytest.fixture
def abstract_listener() -> Iterator[str]:
    """A listening socket in the abstract namespace (shared with the machine's
    network namespace), as some desktop services have."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind("\0" + ABSTRACT)
        sock.listen(8)
        yield "@" + ABSTRACT


@pytest.fixture
def daemon_like(home: Path) -> Iterator[Path]:
    """A listening socket where the daemon's is (``<home>/daemon.sock``)."""
    path = home / "daemon.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        sock.listen(8)
        yield path


def ask(host: HostProc, line: str) -> str:
    """Send one attempt to the probe; its answer (``ATTEMPT ok|refused DETAIL``)."""
    name = line.split()[0]
    with attached(host, timeout=30) as conn:
        assert conn.request("host.send", {"input": line})["success"]
        events = events_until(
            conn,
            lambda e: e["type"] == "output" and str(e.get("data", "")).startswith(name + " "),
        )
    answer: str = events[-1]["data"]
    return answer


def launch_probe(
    start: Callable[..., HostProc], profile: str, cwd: Path, user: Path, **env: str
) -> HostProc:
    """The probe as a ``lines`` agent in ``profile``, working in ``cwd``, ``$HOME``
    ``user`` (``start``: ``host_factory``, or ``start_host`` with its home given)."""
    return start(
        "probe",
        "--agent",
        "lines",
        "--sandbox",
        profile,
        "--cwd",
        str(cwd),
        command=[PY, "-u", "-c", PROBE],
        env={"HOME": str(user), **env},
    )


def start_probe(
    host_factory: HostFactory, home: Path, profile: str, user: Path, wt: Path, allowed: int
) -> HostProc:
    """The probe, with ``allowed`` (a port of 127.0.0.1) on the allowlist, and in its
    environment what must not reach a sandbox."""
    (home / "config.toml").write_text(f'[sandbox]\nallow_hosts = ["127.0.0.1:{allowed}"]\n')
    (home / "config.toml").chmod(0o600)
    leads = {"SSH_AUTH_SOCK": "/tmp/agent.sock", "AGENTHOST_HOME": str(home)}
    return launch_probe(host_factory, profile, wt, user, **leads)


PROFILES = ["off", "strict", "none", "net"]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_hostile_agent_is_refused_everything_that_governs_it(
    profile: str,
    host_factory: HostFactory,
    home: Path,
    user_home: Path,
    worktree: Path,
    abstract_listener: str,
    daemon_like: Path,
) -> None:
    confined = profile != "off"
    with http_server() as allowed, http_server() as other:
        host = start_probe(host_factory, home, profile, user_home, worktree, allowed)
        assert host.agent().get("sandbox") == (profile if confined else None)
        tokens = home / "web" / "tokens.json"  # where the gateway keeps its tokens
        tokens.parent.mkdir(mode=0o700)
        tokens.write_text('{"tokens": "planted for the test"}')
        attempts = {
            "ssh key": f"read {user_home}/.ssh/id_ed25519",
            "config.toml": f"read {home}/config.toml",
            "web tokens": f"read {tokens}",
            "the home": f"listdir {home}",
            "host socket": f"unix {host.socket_path}",
            "daemon socket": f"unix {daemon_like}",
            "/proc/*/root": f"proc-root {host.socket_path}",
            "/proc/PID/fd": f"proc-fd {host.pid}",
            "signal host": f"signal {host.pid}",
            "ptrace host": f"ptrace {host.pid}",
            "other server": f"tcp 127.0.0.1 {other}",
            "abstract socket": f"unix {abstract_listener}",
        }
        if is_root():  # only root reads /etc/shadow unconfined
            attempts["/etc/shadow"] = "read /etc/shadow"
        if resolvable(NAME):  # names resolve here (the machine's DNS answers)
            attempts["resolve a name"] = f"resolve {NAME}"
        answers = {name: ask(host, line) for name, line in attempts.items()}
        for name, answer in answers.items():
            worked = " ok " in answer
            if not confined:
                assert worked, f"{name} must work unconfined, or the test proves nothing: {answer}"
            elif profile == "net" and name in ("other server", "abstract socket", "resolve a name"):
                assert worked, answer  # net is the machine's network (docs/sandbox.md)
            else:
                assert not worked, f"{profile}: {name} was not refused: {answer}"

        # the network: strict reaches what is allowed, through the proxy, and nothing else
        through = ask(host, f"proxy 127.0.0.1:{allowed}")
        refused = ask(host, f"proxy 127.0.0.1:{other}")
        if profile == "strict":
            assert " ok HTTP/1.1 200" in through, through
            assert " refused " in refused and "403" in refused, refused
        else:
            assert " refused " in through and " refused " in refused

        # writes: the worktree's last, what is outside never reaches the user's files
        assert " ok " in ask(host, f"write {worktree}/made-by-agent")
        assert (worktree / "made-by-agent").read_text() == "planted by the agent\n"
        ask(host, f"write {user_home}/planted")
        assert (user_home / "planted").exists() is not confined

        # agenthost run inside finds no home, and says why
        if confined:
            found = ask(host, f"run {PY} -P -m agenthost list")
            assert "inside an agent's sandbox" in found and "exit 2" in found, found

        # nothing in its environment leads to the home (even unconfined: no AGENTHOST_HOME)
        env = ask(host, "env")
        assert "AGENTHOST_HOME" not in env
        if confined:
            assert "SSH_AUTH_SOCK" not in env and "AGENTHOST_SANDBOX" in env


@pytest.mark.parametrize("profile", ["strict", "none"])
def test_a_double_forked_child_ends_with_the_sandbox(
    profile: str, host_factory: HostFactory, home: Path, user_home: Path, worktree: Path
) -> None:
    with http_server() as allowed:
        host = start_probe(host_factory, home, profile, user_home, worktree, allowed)
        pidfile = worktree / "child.pid"
        assert " ok " in ask(host, f"setsid-child {pidfile}")
        # its pid is the sandbox's own: find the real one by what it runs
        sleepers = wait_for(
            lambda: [p for p in os.listdir("/proc") if _runs(p, b"sleep\x00600", worktree)],
            what="the setsid child runs",
        )
        with attached(host) as conn:
            assert conn.request("host.stop", {})["success"]
        host.wait_exit()
        for pid in sleepers:
            wait_for(lambda pid=pid: pid_gone(int(pid)), what=f"the setsid child {pid} ended")


def _runs(pid: str, cmdline: bytes, cwd: Path) -> bool:
    """Whether process ``pid`` runs ``cmdline`` in ``cwd``."""
    try:
        if os.readlink(f"/proc/{pid}/cwd") != str(cwd):
            return False
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(cmdline)
    except (OSError, ValueError):
        return False


def test_secrets_under_the_worktree_are_masked(user_home: Path) -> None:
    # the worktree is the user's whole home, which holds the agenthost home (its
    # default place is under $HOME) and the ssh key
    home = user_home / ".ah"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[sandbox]\n")
    (home / "config.toml").chmod(0o600)
    (user_home / "notes.txt").write_text("the user's own file\n")
    host = launch_probe(functools.partial(start_host, home), "none", user_home, user_home)
    try:
        assert " ok " in ask(host, f"read {user_home}/notes.txt")  # its worktree
        assert " refused " in ask(host, f"read {user_home}/.ssh/id_ed25519")
        assert " refused " in ask(host, f"listdir {home}")
        assert " refused " in ask(host, f"read {home}/config.toml")
        assert " refused " in ask(host, f"unix {host.socket_path}")
    finally:
        kill_tree(host.proc)


@pytest.mark.parametrize("profile", ["off", "none"])
def test_a_fork_bomb_stops_at_the_sandboxs_process_bound(
    profile: str, host_factory: HostFactory, home: Path, user_home: Path, worktree: Path
) -> None:
    from agenthost.sandbox.pids import describe

    if describe() is None:
        pytest.skip("no pids cgroup can be made here: the bound is the machine's pid_max")
    (home / "config.toml").write_text("[sandbox]\nmax_processes = 40\n")
    (home / "config.toml").chmod(0o600)
    host = launch_probe(host_factory, profile, worktree, user_home)
    answer = ask(host, "forkbomb 120")
    count = int(answer.split()[2])
    if profile == "off":
        assert count == 120, answer  # unconfined nothing stops it here
    else:
        # the group holds the bubblewrap processes, the probe, and its children
        assert 30 <= count < 40 and "stopped by" in answer, answer
        assert " ok " in ask(host, f"write {worktree}/after")  # and the agent keeps working


def test_an_agent_commits_in_its_linked_worktree(
    host_factory: HostFactory, home: Path, user_home: Path, tmp_path: Path
) -> None:
    # run --worktree gives an agent a linked worktree, whose objects and refs live in
    # the repository's .git, outside it: git inside the sandbox must still commit
    import subprocess

    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "0"], check=True)
    linked = tmp_path / "linked"
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", str(linked)], check=True)
    host = launch_probe(host_factory, "none", linked, user_home)
    answer = ask(host, f"run git -C {linked} commit -q --allow-empty -m by-the-agent")
    assert answer.startswith("run ok exit 0"), answer
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--all", "--format=%s"], capture_output=True, text=True
    )
    assert "by-the-agent" in log.stdout.split()
