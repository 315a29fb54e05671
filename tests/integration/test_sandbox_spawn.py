"""How an agent comes to be sandboxed, or refused: ``serve`` and ``run`` with
``--sandbox``, config.toml's default and overrides, and everything that must refuse a
start before anything runs (a bad name, a profile not built here, a refused
config.toml). Real processes: the CLI, hosts, the daemon."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandboxtools import require_sandbox

from agenthost.cli.common import Exit
from agenthost.protocol import AgentState

from daemontools import DaemonWorld, daemon_world
from hosttools import PY, cli, kill_tree, start_host, wait_for, wait_until


@pytest.fixture(autouse=True)
def _confinable() -> None:
    require_sandbox()


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


def write_config(home: Path, text: str, mode: int = 0o600) -> None:
    path = home / "config.toml"
    path.write_text(text)
    path.chmod(mode)


def sandbox_of(home: Path, agent: str) -> str | None:
    status = json.loads(cli(home, "status", agent, "--json").stdout)
    found: str | None = status["agent"].get("sandbox")
    return found


@pytest.mark.parametrize(
    ("option", "code", "said"),
    [
        ("strictt", Exit.USAGE, "unknown sandbox profile 'strictt'"),
        ("", Exit.USAGE, "unknown sandbox profile"),
        ("container:debian", Exit.CANNOT_START, "containers are not supported"),
        ("\x1b]0;x\x07none", Exit.USAGE, "unknown sandbox profile"),
    ],
)
def test_serve_refuses_a_sandbox_it_cannot_give_before_anything_starts(
    home: Path, option: str, code: int, said: str
) -> None:
    done = cli(home, "serve", "--agent-id", "s1", "--sandbox", option, "--detach")
    assert done.returncode == code, done.stderr
    assert said in done.stderr and "\x1b" not in done.stderr
    assert not (home / "hosts" / "s1.sock").exists()


def test_the_configured_default_applies_and_off_overrides_it(home: Path) -> None:
    write_config(
        home,
        '[sandbox]\ndefault = "none"\n[[sandbox.override]]\nproject = "web*"\nprofile = "net"\n',
    )
    hosts = [
        start_host(home, "plain"),
        start_host(home, "web", "--project", "website"),
        start_host(home, "free", "--sandbox", "off"),
        start_host(home, "strict", "--sandbox", "strict"),
    ]
    try:
        assert sandbox_of(home, "plain") == "none"
        assert sandbox_of(home, "web") == "net"  # the override for its project
        assert sandbox_of(home, "free") is None  # off: unconfined whatever the default
        assert sandbox_of(home, "strict") == "strict"  # the option wins
        status = cli(home, "status", "plain").stdout
        assert "sandbox:      none" in status
        assert "sandbox:      off (unconfined)" in cli(home, "status", "free").stdout
        table = cli(home, "list").stdout
        assert "demo [none]" in table and "demo [net]" in table
    finally:
        for host in hosts:
            kill_tree(host.proc)


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ('[sandbox]\ndefault = "strict"\n', 0o666),  # another user could have written it
        ('[sandbox]\ndefault = "docker"\n', 0o600),  # not a profile
        ('[sandbox]\nallow_hosts = ["*"]\n', 0o600),  # everything is not an allowlist
        ("[sandbox\n", 0o600),  # not TOML
    ],
)
def test_a_config_that_cannot_be_trusted_or_read_refuses_the_start(
    home: Path, text: str, mode: int
) -> None:
    write_config(home, text, mode)
    done = cli(home, "serve", "--agent-id", "s1", "--detach")
    assert done.returncode == Exit.USAGE, done.stderr
    assert "config.toml" in done.stderr
    assert not (home / "hosts" / "s1.sock").exists()


def test_a_broken_config_that_names_no_sandbox_starts_hosts_as_before(home: Path) -> None:
    # (the host then asks a person for everything: tests/integration/test_policy_host.py)
    write_config(home, "[notify]\ndelai = 5\n")
    plain = start_host(home, "plain")
    # an explicit profile is known whatever the file: it applies, with nothing more allowed
    write_config(home, '[sandbox]\ndefault = "strict"\nallow_hosts = "x"\n', 0o666)
    boxed = start_host(home, "boxed", "--sandbox", "none")
    try:
        assert sandbox_of(home, "plain") is None
        assert sandbox_of(home, "boxed") == "none"
    finally:
        kill_tree(plain.proc)
        kill_tree(boxed.proc)


def test_run_through_the_daemon_sandboxes_and_refuses_alike(world: DaemonWorld) -> None:
    status, out = world.cli_bg(
        "run", "--agent-id", "r1", "--sandbox", "none", "--json", "--", "--pace", "0"
    )
    assert status == 0, out
    wait_for(lambda: sandbox_of(world.home, "r1") == "none", what="r1 sandboxed")
    spec = json.loads(world.cli("list", "--json").stdout)[0]["daemon"]["spec"]
    assert spec["sandbox"] == "none"  # kept for its restarts

    status, out = world.cli_bg("run", "--agent-id", "r2", "--sandbox", "container:x")
    assert status == Exit.CANNOT_START, out
    assert "containers are not supported" in out
    # the daemon itself refuses a spec it cannot confine (a client that did not check)
    response = world.call(
        "daemon.spawn", {"agent_id": "r3", "command": [], "sandbox": "container:x"}
    )
    assert not response["success"] and response["code"] == "cannot_start", response
    assert world.cli("stop", "r1").returncode == 0


@pytest.mark.asyncio
async def test_the_host_itself_never_runs_its_agent_unconfined(home: Path) -> None:
    # a host asked for a sandbox it cannot make (no CLI checked first: a library user,
    # a machine that changed since) fails the agent's start, and says why
    from agenthost.host.host import Host, HostConfig

    host = Host(
        HostConfig("h1", home, agent="lines", command=("cat",), journal=None, sandbox="container:x")
    )
    served = asyncio.create_task(host.run())
    try:
        await wait_until(lambda: host.exit is not None, what="the failed start")
        assert not host.process.running and host.process.pid == 0  # nothing ever ran
        assert host.stream.state is AgentState.ERROR
        assert "containers are not supported" in host.stream.info["start_error"]
    finally:
        host.on_stop_signal(signal.SIGTERM)
        await asyncio.wait_for(served, 30)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--profile", "bogus"], "unknown sandbox profile 'bogus'"),
        (["--profile", "off"], "no sandbox to show"),
        (["--agent", "nope"], "unknown agent kind 'nope'"),
        (["--profile", "strict\x1b[2J"], "unknown sandbox profile"),
        (["--cwd", "/nonexistent/dir"], "does not exist"),
    ],
)
def test_sandbox_show_refuses_garbage(home: Path, args: list[str], said: str) -> None:
    done = cli(home, "sandbox", "show", *args)
    assert done.returncode == Exit.USAGE and said in done.stderr, done.stderr


def test_sandbox_show_and_check_describe_what_a_sandbox_holds(home: Path, tmp_path: Path) -> None:
    write_config(home, '[sandbox]\nallow_hosts = ["registry.npmjs.org"]\n')
    shown = json.loads(
        cli(home, "sandbox", "show", "--agent", "codex", "--cwd", str(tmp_path), "--json").stdout
    )
    kinds = {m["path"]: m["kind"] for m in shown["mounts"]}
    assert kinds[str(tmp_path)] == "rw" and kinds["/tmp"] == "tmpfs"
    assert str(home) not in kinds  # never the home
    assert shown["allow_hosts"] == ["api.openai.com", "chatgpt.com", "registry.npmjs.org"]
    check = [PY, "-m", "agenthost", "sandbox", "check", "--json"]  # (no home: the machine's)
    checked = json.loads(subprocess.run(check, capture_output=True, text=True).stdout)
    assert checked["ok"] is True and checked["reason"] is None
    assert {c["name"] for c in checked["checks"]} >= {"bubblewrap", "user namespaces", "seccomp"}
