"""The host performs an ACP agent's client calls: real files, real processes.

ClientCalls is driven directly (no agent); each call's outcome arrives through the
``done`` callback, awaited as a future.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio
from acp import schema as acp_schema
from pydantic import BaseModel

from agenthost.agents.base import CallFailed, ClientCall
from agenthost.host import clientcalls
from agenthost.host.clientcalls import ClientCalls
from agenthost.host.confine import MAX_READ_BYTES

from conftest import HostFactory
from hosttools import PY, HostProc, pid_gone, wait_for, wait_until

DEADLINE = 30.0


class Calls:
    """A ClientCalls and the outcomes of the calls made through it."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.calls = ClientCalls(str(root), self._done, env)
        self.outcomes: dict[str, asyncio.Future[tuple[Any, CallFailed | None]]] = {}
        self.reported: list[str] = []
        self._next = 0

    def _done(self, call_id: str, result: Any, failure: CallFailed | None) -> None:
        assert (result is None) != (failure is None)
        self.reported.append(call_id)
        self.outcomes[call_id].set_result((result, failure))

    def start(self, method: str, params: Any) -> str:
        self._next += 1
        call_id = f"c{self._next}"
        self.outcomes[call_id] = asyncio.get_running_loop().create_future()
        self.calls.start(ClientCall(call_id, method, params))
        return call_id

    async def outcome(self, call_id: str) -> tuple[Any, CallFailed | None]:
        return await asyncio.wait_for(self.outcomes[call_id], DEADLINE)

    async def ok(self, method: str, **params: Any) -> dict[str, Any]:
        result, failure = await self.outcome(self.start(method, params))
        assert failure is None, failure
        assert isinstance(result, dict)
        return result

    async def fail(self, method: str, params: Any) -> CallFailed:
        result, failure = await self.outcome(self.start(method, params))
        assert result is None and failure is not None
        return failure

    async def run(self, command: str, *args: str, **params: Any) -> str:
        """Create a terminal; its id."""
        if args:
            params["args"] = list(args)
        created = await self.ok("terminal/create", command=command, **params)
        terminal_id = created["terminalId"]
        assert isinstance(terminal_id, str)
        return terminal_id

    def pid(self, terminal_id: str) -> int:
        return self.calls.terminals[terminal_id].process.pid


@pytest_asyncio.fixture
async def calls(tmp_path: Path) -> AsyncIterator[Calls]:
    root = tmp_path / "wt"
    root.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AGENT_ONLY": "from-the-agent"}
    made = Calls(root, env)
    yield made
    await made.calls.aclose()


# --- files --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_write_then_read_back(calls: Calls) -> None:
    path = calls.root / "new" / "dir" / "notes.txt"
    text = "first\nsecond ü\nthird\n"
    assert await calls.ok("fs/write_text_file", sessionId="s", path=str(path), content=text) == {}
    assert path.read_text() == text  # the missing parent directories were created
    read = await calls.ok("fs/read_text_file", sessionId="s", path=str(path))
    assert read == {"content": text}
    part = await calls.ok("fs/read_text_file", path=str(path), line=2, limit=1)
    assert part == {"content": "second ü\n"}
    assert [p.name for p in path.parent.iterdir()] == ["notes.txt"]  # no temp file left


@pytest.mark.asyncio
async def test_a_write_is_atomic_and_keeps_the_mode(calls: Calls) -> None:
    path = calls.root / "script.sh"
    path.write_text("old")
    path.chmod(0o751)
    before = path.stat().st_ino
    await calls.ok("fs/write_text_file", path=str(path), content="new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.stat().st_ino != before  # replaced by a rename, not rewritten in place
    # a new file gets the usual mode (0666 less the umask), not mkstemp's 0600
    umask = os.umask(0o022)
    os.umask(umask)
    fresh = calls.root / "fresh.txt"
    await calls.ok("fs/write_text_file", path=str(fresh), content="")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in calls.root.iterdir()) == ["fresh.txt", "script.sh"]


@pytest.mark.asyncio
async def test_a_write_through_an_inner_symlink_replaces_its_target(calls: Calls) -> None:
    target = calls.root / "real.txt"
    target.write_text("old")
    link = calls.root / "link.txt"
    link.symlink_to(target)
    await calls.ok("fs/write_text_file", path=str(link), content="new")
    assert link.is_symlink() and target.read_text() == "new"


@pytest.mark.asyncio
async def test_reads_of_what_is_not_a_readable_file(calls: Calls) -> None:
    missing = await calls.fail("fs/read_text_file", {"path": str(calls.root / "nope.txt")})
    assert missing.not_found and "nope.txt" in missing.message
    under_a_file = calls.root / "f"
    under_a_file.write_text("x")
    assert (await calls.fail("fs/read_text_file", {"path": str(under_a_file / "x")})).not_found
    directory = await calls.fail("fs/read_text_file", {"path": str(calls.root)})
    assert "directory" in directory.message and not directory.not_found
    fifo = calls.root / "pipe"
    os.mkfifo(fifo)  # opening it for reading would block a thread until a writer came
    assert (
        "not a regular file" in (await calls.fail("fs/read_text_file", {"path": str(fifo)})).message
    )
    loop = calls.root / "loop"
    loop.symlink_to(loop)
    assert (await calls.fail("fs/read_text_file", {"path": str(loop)})).message
    written = await calls.fail("fs/write_text_file", {"path": str(fifo), "content": "x"})
    assert "not a regular file" in written.message
    root = await calls.fail("fs/write_text_file", {"path": str(calls.root), "content": "x"})
    assert not root.not_found and calls.root.is_dir()


@pytest.mark.asyncio
async def test_invalid_utf8_is_read_with_replacements(calls: Calls) -> None:
    path = calls.root / "bin"
    path.write_bytes(b"ok\xff\xfe\x00end")
    read = await calls.ok("fs/read_text_file", path=str(path))
    assert read == {"content": "ok\ufffd\ufffd\x00end"}


@pytest.mark.asyncio
async def test_a_file_too_big_is_refused_but_the_limit_itself_is_read(calls: Calls) -> None:
    big = calls.root / "big.log"
    big.write_bytes(b"x" * (MAX_READ_BYTES + 1))
    failure = await calls.fail("fs/read_text_file", {"path": str(big)})
    assert "too big" in failure.message and str(MAX_READ_BYTES) in failure.message
    assert not failure.not_found and not failure.bad_params
    edge = calls.root / "edge.log"
    edge.write_bytes(b"y" * MAX_READ_BYTES)
    assert len((await calls.ok("fs/read_text_file", path=str(edge)))["content"]) == MAX_READ_BYTES


@pytest.mark.asyncio
async def test_paths_outside_the_working_directory_are_refused(
    calls: Calls, tmp_path: Path
) -> None:
    sibling = tmp_path / "wt2"  # a common prefix with "wt"
    sibling.mkdir()
    secret = sibling / "secret"
    secret.write_text("s")
    (calls.root / "escape").symlink_to(sibling)
    for method, extra in (("fs/read_text_file", {}), ("fs/write_text_file", {"content": "x"})):
        for path in (
            secret,
            calls.root / ".." / "wt2" / "secret",
            calls.root / "escape" / "secret",
        ):
            failure = await calls.fail(method, {"path": str(path), **extra})
            assert "outside the agent's working directory" in failure.message
        relative = await calls.fail(method, {"path": "notes.txt", **extra})
        assert relative.bad_params
    made = await calls.fail(
        "fs/write_text_file", {"path": str(calls.root / "escape" / "d" / "f"), "content": "x"}
    )
    assert "outside" in made.message
    assert secret.read_text() == "s" and not (sibling / "d").exists()  # nothing created


@pytest.mark.asyncio
async def test_garbage_calls_are_answered(calls: Calls) -> None:
    garbage: list[tuple[str, dict[str, Any]]] = [
        ("fs/read_text_file", {}),
        ("fs/read_text_file", {"path": 7}),
        ("fs/read_text_file", {"path": str(calls.root / "x"), "line": -1}),
        ("fs/read_text_file", {"path": str(calls.root / "x"), "limit": "all"}),
        ("fs/write_text_file", {"path": str(calls.root / "x")}),
        ("fs/write_text_file", {"path": str(calls.root / "x"), "content": 5}),
        ("fs/write_text_file", {"path": str(calls.root / "x"), "content": "\ud800"}),
        ("terminal/create", {}),
        ("terminal/create", {"command": ""}),
        ("terminal/create", {"command": "ls\0"}),
        ("terminal/create", {"command": "ls", "args": "-l"}),
        ("terminal/create", {"command": "ls", "env": {"A": "1"}}),
        ("terminal/create", {"command": "ls", "cwd": "relative"}),
        ("terminal/create", {"command": "ls", "outputByteLimit": -5}),
    ]
    for method, params in garbage:
        failure = await calls.fail(method, params)
        assert failure.bad_params, (method, params, failure)
    assert not (calls.root / "x").exists()
    not_params = await calls.fail("fs/read_text_file", ["not", "an", "object"])
    assert not_params.bad_params
    unknown = await calls.fail("fs/delete_everything", {"path": "/"})
    assert "not supported" in unknown.message
    methods = ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")
    ids: list[dict[str, Any]] = [{}, {"terminalId": 1}, {"terminalId": "t"}, {"terminalId": None}]
    for terminal in ids:
        for method in methods:
            assert (await calls.fail(method, terminal)).not_found


# --- terminals ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_command_runs_with_merged_output_and_its_exit_code(calls: Calls) -> None:
    term = await calls.run("/bin/sh", "-c", "echo out; echo err >&2; echo out2; exit 3")
    assert await calls.ok("terminal/wait_for_exit", terminalId=term) == {
        "exitCode": 3,
        "signal": None,
    }
    output = await calls.ok("terminal/output", terminalId=term)
    assert output == {
        "output": "out\nerr\nout2\n",  # stderr joined stdout in order: one pipe
        "truncated": False,
        "exitStatus": {"exitCode": 3, "signal": None},
    }


@pytest.mark.asyncio
async def test_a_death_by_signal_has_a_signal_name_and_no_code(calls: Calls) -> None:
    term = await calls.run("/bin/sh", "-c", "kill -TERM $$")
    status = await calls.ok("terminal/wait_for_exit", terminalId=term)
    assert status == {"exitCode": None, "signal": "SIGTERM"}


@pytest.mark.asyncio
async def test_environment_cwd_stdin_and_no_shell_with_args(calls: Calls) -> None:
    sub = calls.root / "sub"
    sub.mkdir()
    term = await calls.run(
        "/bin/sh",
        "-c",
        'pwd; echo "$AGENT_ONLY $GIVEN"; readlink /proc/self/fd/0; echo "$1"',
        "sh",
        "$HOME;rm -rf x",
        cwd=str(sub),
        env=[{"name": "GIVEN", "value": "by call"}],
    )
    await calls.ok("terminal/wait_for_exit", terminalId=term)
    out = (await calls.ok("terminal/output", terminalId=term))["output"]
    assert out.splitlines() == [
        str(sub),  # tmp_path is a real path already
        "from-the-agent by call",
        "/dev/null",
        "$HOME;rm -rf x",  # an arg is an arg: no shell saw it
    ]
    default = await calls.run("pwd")  # a program found on PATH; cwd: the working directory
    await calls.ok("terminal/wait_for_exit", terminalId=default)
    out = (await calls.ok("terminal/output", terminalId=default))["output"]
    assert out == f"{calls.root}\n"


@pytest.mark.asyncio
async def test_a_command_line_without_args_runs_in_a_shell(calls: Calls) -> None:
    term = await calls.run("echo abc | tr abc xyz && echo $AGENT_ONLY")
    assert (await calls.ok("terminal/wait_for_exit", terminalId=term))["exitCode"] == 0
    out = (await calls.ok("terminal/output", terminalId=term))["output"]
    assert out == "xyz\nfrom-the-agent\n"


@pytest.mark.asyncio
async def test_commands_that_cannot_start(calls: Calls, tmp_path: Path) -> None:
    missing = await calls.fail("terminal/create", {"command": "no-such-program-here"})
    assert "command not found: no-such-program-here" in missing.message
    script = calls.root / "script"
    script.write_text("#!/bin/sh\necho hi\n")  # not executable
    denied = await calls.fail("terminal/create", {"command": str(script)})
    assert "permission denied" in denied.message
    outside = await calls.fail("terminal/create", {"command": "pwd", "cwd": str(tmp_path)})
    assert "outside the agent's working directory" in outside.message
    gone = await calls.fail("terminal/create", {"command": "pwd", "cwd": str(calls.root / "nope")})
    assert gone.not_found
    assert calls.calls.terminals == {}


@pytest.mark.asyncio
async def test_output_while_running_and_the_output_limit(calls: Calls) -> None:
    code = "printf 'a%.0s' $(seq 1 3000); printf 'END€'; read _unused"
    term = await calls.run("/bin/sh", "-c", code, outputByteLimit=100)
    # the command blocks on stdin, which is /dev/null: read returns at once, it ends
    status = await calls.ok("terminal/wait_for_exit", terminalId=term)
    assert status["exitCode"] is not None
    out = await calls.ok("terminal/output", terminalId=term)
    assert out["truncated"] is True
    assert out["output"].endswith("aEND€") and len(out["output"].encode()) <= 100


@pytest.mark.asyncio
async def test_output_of_a_running_command(calls: Calls) -> None:
    term = await calls.run("/bin/sh", "-c", "echo started; exec sleep 1000")
    result: dict[str, Any] = {}

    async def started() -> bool:
        result.update(await calls.ok("terminal/output", terminalId=term))
        return bool(result["output"])

    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not await started():
        assert asyncio.get_running_loop().time() < deadline, "no output"
    assert result == {"output": "started\n", "truncated": False}  # no exitStatus yet
    await calls.ok("terminal/kill", terminalId=term)
    assert await calls.ok("terminal/wait_for_exit", terminalId=term) == {
        "exitCode": None,
        "signal": "SIGKILL",
    }
    # killed, not released: still readable, and killing again is harmless
    after = await calls.ok("terminal/output", terminalId=term)
    assert after["output"] == "started\n" and after["exitStatus"]["signal"] == "SIGKILL"
    assert await calls.ok("terminal/kill", terminalId=term) == {}


@pytest.mark.asyncio
async def test_release_kills_a_running_command_and_forgets_it(calls: Calls) -> None:
    term = await calls.run("sleep", "1000")
    pid = calls.pid(term)
    waiting = calls.start("terminal/wait_for_exit", {"terminalId": term})
    assert await calls.ok("terminal/release", terminalId=term) == {}
    assert pid_gone(pid)
    result, _ = await calls.outcome(waiting)  # a wait in progress sees the end
    assert result == {"exitCode": None, "signal": "SIGKILL"}
    assert (await calls.fail("terminal/output", {"terminalId": term})).not_found
    assert (await calls.fail("terminal/release", {"terminalId": term})).not_found


@pytest.mark.asyncio
async def test_too_many_terminals(calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clientcalls, "MAX_TERMINALS", 3)
    first = await calls.run("true")
    await calls.ok("terminal/wait_for_exit", terminalId=first)
    others = [await calls.run("sleep", "1000") for _ in range(2)]
    # an exited terminal counts until it is released
    failure = await calls.fail("terminal/create", {"command": "true"})
    assert "too many terminals" in failure.message and "release" in failure.message
    await calls.ok("terminal/release", terminalId=first)
    fourth = await calls.run("true")
    assert fourth not in (first, *others) and len(calls.calls.terminals) == 3


@pytest.mark.asyncio
async def test_close_kills_every_terminal_group_and_cancels_calls(calls: Calls) -> None:
    term = await calls.run("/bin/sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait")
    leader = psutil.Process(calls.pid(term))

    async def ready() -> bool:
        return bool((await calls.ok("terminal/output", terminalId=term))["output"])

    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not await ready():
        assert asyncio.get_running_loop().time() < deadline
    children = leader.children(recursive=True)
    assert len(children) == 2
    pids = [leader.pid, *(c.pid for c in children)]
    waiting = calls.start("terminal/wait_for_exit", {"terminalId": term})
    await calls.calls.aclose()
    await wait_until(lambda: all(pid_gone(p) for p in pids), "the terminal's group to be gone")
    assert waiting not in calls.reported  # cancelled: no answer to an agent that is gone
    assert calls.calls.pending == 0 and calls.calls.terminals == {}
    late = await calls.fail("fs/read_text_file", {"path": str(calls.root / "x")})
    assert "closing" in late.message
    await calls.calls.aclose()  # again: nothing left to do


@pytest.mark.asyncio
async def test_a_failing_done_callback_does_not_stop_other_calls(tmp_path: Path) -> None:
    answers: list[str] = []

    def done(call_id: str, _result: Any, _failure: CallFailed | None) -> None:
        answers.append(call_id)
        if call_id == "bad":
            raise RuntimeError("callback bug")

    calls = ClientCalls(str(tmp_path), done, {})
    calls.start(ClientCall("bad", "no/such", {}))
    calls.start(ClientCall("good", "no/such", {}))
    await wait_until(lambda: len(answers) == 2, "both answers")
    await calls.aclose()


def sdk_params(model: BaseModel) -> dict[str, Any]:
    """A request's params as the official SDK puts them on the wire."""
    params: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return params


def sdk_roundtrip(model: type[BaseModel], result: dict[str, Any]) -> None:
    """``result`` is what the SDK's ``model`` reads, field for field."""
    parsed = model.model_validate(result)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == result


@pytest.mark.asyncio
async def test_requests_and_answers_in_the_sdks_shapes(calls: Calls) -> None:
    path = str(calls.root / "sdk.txt")
    write = acp_schema.WriteTextFileRequest(session_id="s", path=path, content="a\nb\n")
    result, _ = await calls.outcome(calls.start("fs/write_text_file", sdk_params(write)))
    sdk_roundtrip(acp_schema.WriteTextFileResponse, result)
    read = acp_schema.ReadTextFileRequest(session_id="s", path=path, line=2, limit=1)
    result, _ = await calls.outcome(calls.start("fs/read_text_file", sdk_params(read)))
    sdk_roundtrip(acp_schema.ReadTextFileResponse, result)
    assert result == {"content": "b\n"}
    create = acp_schema.CreateTerminalRequest(
        session_id="s",
        command="/bin/sh",
        args=["-c", 'echo "$X"; exit 2'],
        env=[acp_schema.EnvVariable(name="X", value="from the SDK")],
        cwd=str(calls.root),
        output_byte_limit=1000,
    )
    result, _ = await calls.outcome(calls.start("terminal/create", sdk_params(create)))
    sdk_roundtrip(acp_schema.CreateTerminalResponse, result)
    ref = {"sessionId": "s", "terminalId": result["terminalId"]}
    result, _ = await calls.outcome(calls.start("terminal/wait_for_exit", ref))
    sdk_roundtrip(acp_schema.WaitForTerminalExitResponse, result)
    result, _ = await calls.outcome(calls.start("terminal/output", ref))
    sdk_roundtrip(acp_schema.TerminalOutputResponse, result)
    output = acp_schema.TerminalOutputResponse.model_validate(result)
    assert output.output == "from the SDK\n" and output.exit_status is not None
    assert output.exit_status.exit_code == 2 and output.exit_status.signal is None
    for method, model in (
        ("terminal/kill", acp_schema.KillTerminalResponse),
        ("terminal/release", acp_schema.ReleaseTerminalResponse),
    ):
        result, _ = await calls.outcome(calls.start(method, ref))
        sdk_roundtrip(model, result)


# --- through a real host and the scripted ACP agent -------------------------------------------

ACP_AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "acp_agent.py"


def assistant_texts(host: HostProc) -> list[str]:
    with host.client() as client:
        entries = client.history().entries
    return [e.content or "" for e in entries if e.role == "assistant"]


def said(host: HostProc, needle: str) -> str:
    """The assistant entry containing ``needle``, once there is one."""
    return wait_for(
        lambda: next((t for t in assistant_texts(host) if needle in t), ""),
        what=f"an assistant entry with {needle!r}",
    )


def test_an_acp_agent_reads_writes_and_runs_through_its_host(
    home: Path, host_factory: HostFactory
) -> None:
    worktree = home / "wt"
    worktree.mkdir()
    (worktree / "hello.txt").write_text("hello from the worktree\n")
    outside = home / "secret.txt"
    outside.write_text("not for the agent")
    host = host_factory(
        "acp1", "--agent", "acp", "--cwd", str(worktree), command=[PY, str(ACP_AGENT)]
    )
    host.wait_state("idle")

    def turn(text: str, needle: str) -> str:
        with host.client() as client:
            client.send(text)
        return said(host, needle)

    assert "hello from the worktree" in turn(f"/read {worktree}/hello.txt", "read: ")
    refused = turn(f"/read {outside}", "read failed")
    assert "outside the agent's working directory" in refused
    assert "not for the agent" not in "".join(assistant_texts(host))
    turn(f"/write {worktree}/out/new.txt written by the agent", "wrote ")
    assert (worktree / "out" / "new.txt").read_text() == "written by the agent"
    ran = turn("/run echo run-ok; echo run-err >&2; pwd; exit 4", "exit 4")
    assert f"run-ok\nrun-err\n{worktree}" in ran  # merged output, run in the worktree


def test_the_agents_terminals_end_with_the_agent(home: Path, host_factory: HostFactory) -> None:
    worktree = home / "wt"
    worktree.mkdir()
    host = host_factory(
        "acp2", "--agent", "acp", "--cwd", str(worktree), command=[PY, str(ACP_AGENT)]
    )
    host.wait_state("idle")
    pid_file = worktree / "t.pid"
    with host.client() as client:
        # the agent waits for this terminal's exit: it still runs when the agent dies
        client.send("/run echo $$ > t.pid.new && mv t.pid.new t.pid; exec sleep 1000")
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), what="the pid"))
    wait_for(lambda: psutil.Process(pid).name() == "sleep", what="the shell to exec sleep")
    os.kill(host.agent()["pid"], signal.SIGKILL)
    host.wait_state("error")
    wait_for(lambda: pid_gone(pid), what="the terminal's process to be gone")
    assert host.alive()  # the host killed it, not the watchdog of a host that exited
