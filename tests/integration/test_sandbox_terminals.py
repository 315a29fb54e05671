"""An ACP agent's terminals (``terminal/create``) run in a sandbox like its own: a
sandboxed agent cannot escape by asking its client, the host, to run a command. Real
ClientCalls, real bubblewrap; each refusal is first shown to work unconfined."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from sandboxtools import SECRET_KEY, require_sandbox, user_home, worktree

from agenthost.agents.base import CallFailed, ClientCall
from agenthost.host.clientcalls import ClientCalls
from agenthost.sandbox.profiles import Profile, Settings
from agenthost.sandbox.runner import Sandbox

__all__ = ["user_home", "worktree"]  # fixtures


async def run(calls: ClientCalls, command: str) -> str:
    """The output of ``command`` run as a terminal of ``calls``."""
    outcomes: dict[str, asyncio.Future[Any]] = {}

    def done(call_id: str, result: Any, failure: CallFailed | None) -> None:
        outcomes[call_id].set_result(failure or result)

    async def call(call_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        outcomes[call_id] = asyncio.get_running_loop().create_future()
        calls.start(ClientCall(call_id, method, params))
        result = await asyncio.wait_for(outcomes[call_id], 30)
        assert isinstance(result, dict), result
        return result

    calls.done = done
    terminal = (await call("create", "terminal/create", {"command": command}))["terminalId"]
    await call("wait", "terminal/wait_for_exit", {"terminalId": terminal})
    output: str = (await call("output", "terminal/output", {"terminalId": terminal}))["output"]
    return output


@pytest.mark.asyncio
@pytest.mark.parametrize("confined", [False, True])
async def test_a_terminal_of_a_sandboxed_agent_is_in_its_sandbox(
    confined: bool, user_home: Path, worktree: Path, tmp_path: Path
) -> None:
    require_sandbox()
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("")
    sandbox = None
    if confined:
        sandbox = Sandbox(
            Profile("none"),
            kind="acp",
            worktree=worktree,
            home=home,
            run_dir=home / "run",
            settings=Settings(),
            api_hosts=(),
        )
        await sandbox.start(f"agenthost-test-{os.getpid()}")
    env = {"PATH": os.environ["PATH"], "HOME": str(user_home)}
    calls = ClientCalls(str(worktree), lambda *_: None, env, sandbox)
    try:
        out = await run(
            calls,
            f"cat {user_home}/.ssh/id_ed25519; ls {home}; kill -0 {os.getpid()} && echo "
            f"may-signal-the-host; echo made > {worktree}/by-terminal",
        )
    finally:
        await calls.aclose()
        if sandbox is not None:
            await sandbox.aclose()
    assert (worktree / "by-terminal").read_text() == "made\n"  # its worktree, as ever
    if not confined:  # what the test shows is refused below works unconfined
        assert SECRET_KEY.strip() in out and "config.toml" in out and "may-signal" in out
    else:
        assert SECRET_KEY.strip() not in out and "No such file" in out
        assert "config.toml" not in out and "may-signal-the-host" not in out
