"""An agent whose program is not installed (issue 28, item 2), through the real command
line, a real daemon and real hosts: `serve` (in the foreground and --detach) and `run`
refuse it before anything starts, with exit 13 and a sentence saying what is missing and
how to install it; a running daemon checks with its own PATH; the daemon does not
restart an agent whose program is gone, and records why; a host that could not spawn
its agent all the same makes the spawn fail, not succeed.

The real agent CLIs of the end-to-end tests live under ~/.cache/agenthost-e2e, never
on PATH: these tests run with PATH=/usr/bin:/bin, where none of them is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.cli.common import Exit

from daemontools import DaemonWorld, daemon_world
from hosttools import PY, wait_for

BARE_PATH = "/usr/bin:/bin"
MISSING = {
    "claude": (
        ["--agent", "claude"],
        [
            "Claude Code is not installed: no `claude` on your PATH (/usr/bin:/bin)",
            "install it with `npm install -g @anthropic-ai/claude-code`",
            "or set AGENTHOST_CLAUDE_BIN to the program's path",
        ],
    ),
    "codex": (
        ["--agent", "codex"],
        [
            "Codex is not installed: no `codex` on your PATH (/usr/bin:/bin)",
            "install it with `npm install -g @openai/codex`",
            "or set AGENTHOST_CODEX_BIN",
        ],
    ),
    "acp": (
        ["--agent", "acp", "--", "gemini", "--acp"],
        [
            "the agent's program `gemini` is not on your PATH (/usr/bin:/bin)",
            "install it with `npm install -g @google/gemini-cli`",
        ],
    ),
    "lines": (
        ["--agent", "lines", "--", "nosuchprog"],
        [
            "the agent's program `nosuchprog` is not on your PATH (/usr/bin:/bin)",
            "install it, or give its full path after --",
        ],
    ),
}
VERBS = {
    "serve": ["serve", "--agent-id", "m1"],
    "serve --detach": ["serve", "--agent-id", "m1", "--detach"],
    "run": ["run", "--agent-id", "m1"],
}


def agenthost(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTHOST_")}
    full.update(AGENTHOST_HOME=str(home), NO_COLOR="1", PATH=BARE_PATH, **env)
    return subprocess.run(
        [PY, "-m", "agenthost", *args], capture_output=True, text=True, env=full, timeout=60
    )


@pytest.fixture(autouse=True)
def _none_installed() -> None:
    for program in ("claude", "codex", "gemini", "nosuchprog"):
        if shutil.which(program, path=BARE_PATH):
            pytest.skip(f"{program} is installed in {BARE_PATH}")


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("kind", MISSING)
def test_serve_and_run_refuse_an_agent_that_is_not_installed(
    home: Path, kind: str, verb: str
) -> None:
    # it printed "host for m1 started ..." and exited 0; the reason was in `status` only
    args, says = MISSING[kind]
    done = agenthost(home, *VERBS[verb], *args)
    assert done.returncode == Exit.CANNOT_START, done
    for words in says:
        assert words in done.stderr, done
    assert "started" not in done.stdout + done.stderr
    # before anything started: no host, no daemon, no log
    assert list(home.iterdir()) == []


def test_the_json_error_and_a_variable_that_names_no_program(home: Path) -> None:
    done = agenthost(
        home, "run", "--agent-id", "m1", "--agent", "claude", "--json",
        AGENTHOST_CLAUDE_BIN="/opt/nothing/claude",
    )  # fmt: skip
    assert done.returncode == Exit.CANNOT_START, done
    body = json.loads(done.stdout)
    assert (body["ok"], body["reason"], body["exit_code"]) == (False, "cannot_start", 13)
    assert body["error"].startswith(
        "Claude Code is not where AGENTHOST_CLAUDE_BIN says: /opt/nothing/claude does not exist"
    )
    notexec = home / "claude"
    notexec.write_text("#!/bin/sh\n")  # not executable
    done = agenthost(
        home, "serve", "--agent-id", "m1", "--agent", "claude",
        AGENTHOST_CLAUDE_BIN=str(notexec),
    )  # fmt: skip
    assert done.returncode == Exit.CANNOT_START, done
    assert f"Claude Code cannot be run: {notexec} (AGENTHOST_CLAUDE_BIN names it)" in done.stderr


def test_an_installed_program_found_through_env_path_starts(home: Path) -> None:
    # the agent's own --env PATH is the one searched, as exec will
    tools = home / "tools"
    tools.mkdir()
    agent = tools / "myagent"
    agent.write_text("#!/bin/sh\nexec cat\n")
    agent.chmod(0o755)
    env_path = f"PATH={tools}:{BARE_PATH}"
    done = agenthost(
        home, "serve", "--agent-id", "m1", "--detach", "--agent", "lines", "--env", env_path,
        "--", "myagent",
    )  # fmt: skip
    assert done.returncode == 0, done
    assert agenthost(home, "stop", "m1").returncode == 0


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    with daemon_world(home) as started:
        yield started


def test_a_running_daemon_checks_with_its_own_path(world: DaemonWorld, home: Path) -> None:
    # the daemon's environment is its hosts': a `claude` on the caller's PATH alone
    # would start a host whose agent never runs
    world.env["PATH"] = BARE_PATH
    world.start_daemon()
    mine = home / "mybin"
    mine.mkdir()
    (mine / "claude").write_text("#!/bin/sh\nexit 0\n")
    (mine / "claude").chmod(0o755)
    world.env["PATH"] = f"{mine}:{BARE_PATH}"
    world.env.pop("AGENTHOST_CLAUDE_BIN", None)
    done = world.cli("run", "--agent-id", "c1", "--agent", "claude")
    assert done.returncode == Exit.CANNOT_START, done
    assert "no `claude` on the daemon's PATH (/usr/bin:/bin)" in done.stderr, done
    assert "npm install -g @anthropic-ai/claude-code" in done.stderr
    assert "c1" not in world.agents() and not world.host_pids()  # nothing started


def test_the_daemon_does_not_restart_an_agent_whose_program_is_gone(
    world: DaemonWorld, home: Path
) -> None:
    world.start_daemon()
    agent = home / "vanishing-agent"
    agent.write_text('#!/bin/sh\nrm -f "$0"\nexit 3\n')  # fails, and is gone
    agent.chmod(0o755)
    done = world.cli(
        "run", "--agent-id", "v1", "--agent", "lines", "--restart", "on-failure",
        "--backoff", "0", "--", str(agent),
    )  # fmt: skip
    assert done.returncode == 0, done
    wait_for(lambda: world.agents()["v1"]["status"] == "failed", what="the agent failed")
    record = world.agents()["v1"]
    assert f"the agent's program `{agent}` does not exist" in record["last_error"]
    log = world.daemons[-1].log()
    assert log.count("restart.cannot_start") == 1 and "agent.restarted" not in log
    assert not world.host_pids()
    # what the daemon knows shows where people look: `list` and `status`
    listed = world.cli("list")
    assert "failed" in listed.stdout, listed
    status = world.cli("status", "v1")
    assert status.returncode == Exit.NO_HOST, status
    assert f"hint: the daemon gave up on 'v1': the agent's program `{agent}`" in status.stderr


def test_a_host_that_could_not_spawn_its_agent_fails_the_spawn(world: DaemonWorld) -> None:
    # Past every check (the program is there), exec itself refuses the agent: an
    # environment string over the kernel's 128 KiB. The host serves its agent's
    # failure; the spawn used to answer success, `run` to print "started".
    world.start_daemon()  # (with the host factory: the host is forked, not exec'd)
    spec = {"agent_id": "e1", "agent": "lines", "command": ["cat"], "env": {"BIG": "x" * 140_000}}
    answer = world.call("daemon.spawn", spec)
    assert (answer["success"], answer["code"]) == (False, "cannot_start"), answer
    assert "the host for 'e1' could not start its agent: cannot start cat" in answer["error"]
    assert "Argument list too long" in answer["error"]
    record = world.agents()["e1"]
    assert record["status"] == "failed" and record["last_error"] == answer["error"]
    wait_for(lambda: not world.host_pids(), what="the host stopped")
