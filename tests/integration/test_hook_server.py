"""The hook socket (agenthost/host/hooks.py) with the real hook command
(``python -P -m agenthost.terminal.hook``) as its client: real processes, a real Unix
socket, and the negatives (wrong token, garbage, oversized frames, a host gone)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agenthost.errors import ConfigError
from agenthost.host.hooks import MAX_FRAME, HookServer

TOKEN = "t0k3n-for-this-run"
PERMISSION = {"tool_name": "Bash", "tool_input": {"command": "touch x"}}


class Calls:
    """The on_hook handler of the tests: records calls, answers what a test scripts."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.cancelled: list[str] = []
        self.answers: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self.changed = asyncio.Condition()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def __call__(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        self.seen.append((kind, payload))
        await self._notify()
        if kind == "Boom":
            raise RuntimeError("the handler broke")
        if kind != "PermissionRequest":
            return None
        key = payload.get("key", "k")
        future = self.answers.setdefault(key, asyncio.get_running_loop().create_future())
        await self._notify()
        try:
            return await future
        except asyncio.CancelledError:
            self.cancelled.append(key)
            await self._notify()
            raise


@pytest.fixture
def private(tmp_path: Path) -> Path:
    directory = tmp_path / "host"
    directory.mkdir(mode=0o700)
    return directory


@pytest_asyncio.fixture
async def served(private: Path) -> AsyncIterator[tuple[HookServer, Calls]]:
    calls = Calls()
    async with HookServer(private / "hooks.sock", TOKEN, calls) as server:
        yield server, calls


async def hook(
    server: HookServer,
    kind: str,
    payload: Any,
    *,
    token: str = TOKEN,
    argv_payload: bool = False,
) -> asyncio.subprocess.Process:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AGENTHOST_HOOK_SOCKET": str(server.path),
        "AGENTHOST_HOOK_TOKEN": token,
        "PYTHONPATH": str(Path(__file__).parent.parent.parent),
    }
    text = payload if isinstance(payload, str) else json.dumps(payload)
    args = [kind, text] if argv_payload else [kind]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",
        "-m",
        "agenthost.terminal.hook",
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    if not argv_payload:
        proc.stdin.write(text.encode())
    proc.stdin.close()
    return proc


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def until(calls: Calls, predicate: Any) -> None:
    """Wait (30 s at most) until ``predicate()`` holds; Calls notifies every change."""
    async with asyncio.timeout(30), calls.changed:
        await calls.changed.wait_for(predicate)


@pytest.mark.asyncio
async def test_a_report_and_a_decision(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    assert await finished(await hook(server, "Stop", {"session_id": "s"})) == (0, "", "")
    assert calls.seen == [("Stop", {"session_id": "s"})]
    assert stat.S_IMODE(server.path.stat().st_mode) == 0o600

    proc = await hook(server, "PermissionRequest", PERMISSION)
    await until(calls, lambda: "k" in calls.answers)
    decision = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {}}}
    calls.answers["k"].set_result(decision)
    code, out, _ = await finished(proc)
    assert code == 0 and json.loads(out) == decision


@pytest.mark.asyncio
async def test_codex_notify_payload_in_argv(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    payload = {"type": "agent-turn-complete", "thread-id": "t"}
    assert (await finished(await hook(server, "notify", payload, argv_payload=True)))[0] == 0
    assert calls.seen == [("notify", payload)]


@pytest.mark.asyncio
async def test_many_concurrent_hooks(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    procs = [
        await hook(server, "PermissionRequest", {**PERMISSION, "key": str(i)}) for i in range(20)
    ]
    await until(calls, lambda: len(calls.answers) == 20)
    assert server.calls_in_flight == 20
    for i in reversed(range(20)):
        calls.answers[str(i)].set_result({"n": i})
    for i, proc in enumerate(procs):
        assert json.loads((await finished(proc))[1]) == {"n": i}


@pytest.mark.asyncio
async def test_a_hook_killed_while_waiting_cancels_its_handler(
    served: tuple[HookServer, Calls],
) -> None:
    server, calls = served
    proc = await hook(server, "PermissionRequest", PERMISSION)
    await until(calls, lambda: "k" in calls.answers)
    proc.terminate()  # what Claude Code does when the person answers No in the TUI
    await finished(proc)
    await until(calls, lambda: calls.cancelled == ["k"])


@pytest.mark.asyncio
async def test_no_answer_falls_back_silently(private: Path) -> None:
    calls = Calls()
    server = HookServer(private / "hooks.sock", TOKEN, calls)
    await server.start()
    proc = await hook(server, "PermissionRequest", PERMISSION)
    await until(calls, lambda: "k" in calls.answers)
    await server.close()  # the host goes: the hook prints nothing, exits 0
    code, out, err = await finished(proc)
    assert (code, out) == (0, "")
    assert "agenthost hook:" in err
    assert not server.path.exists()
    # no host at all: the same
    code, out, _ = await finished(await hook(server, "PermissionRequest", PERMISSION))
    assert (code, out) == (0, "")


@pytest.mark.asyncio
async def test_wrong_token_gets_no_answer(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    code, out, err = await finished(await hook(server, "PermissionRequest", PERMISSION, token="x"))
    assert (code, out) == (0, "")
    assert "without an answer" in err
    raw = await raw_exchange(server, b'{"kind":"Stop","payload":{}}\n')
    assert raw == b""
    raw = await raw_exchange(server, b'{"token":5,"kind":"Stop","payload":{}}\n')
    assert raw == b""
    assert calls.seen == []


async def raw_exchange(server: HookServer, data: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(server.path))
    writer.write(data)
    if not data.endswith(b"\n") or len(data) <= MAX_FRAME:
        writer.write_eof()
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("data", "answered"),
    [
        (b"not json\n", True),
        (b"\xff\xfe\n", True),
        (b"\n", True),
        (b"[1,2]\n", False),  # JSON without a token: refused, no answer
        (b'{"token":null}\n', False),
        (f'{{"token":"{TOKEN}","kind":5,"payload":{{}}}}\n'.encode(), True),
        (f'{{"token":"{TOKEN}","kind":"Stop","payload":[]}}\n'.encode(), True),
        (f'{{"token":"{TOKEN}","kind":"Stop"}}\n'.encode(), True),
    ],
)
async def test_garbage(served: tuple[HookServer, Calls], data: bytes, answered: bool) -> None:
    server, calls = served
    raw = await raw_exchange(server, data)
    if answered:
        assert "error" in json.loads(raw)
    else:
        assert raw == b""
    assert calls.seen == []


@pytest.mark.asyncio
async def test_oversized_frame(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    raw = await raw_exchange(server, b"x" * (MAX_FRAME + 10))
    assert b"frame over" in raw
    # a handler that fails: an error line, and the server goes on
    line = json.dumps({"token": TOKEN, "kind": "Boom", "payload": {}}).encode() + b"\n"
    assert "could not handle" in json.loads(await raw_exchange(server, line))["error"]
    assert (await finished(await hook(server, "Stop", {})))[0] == 0
    assert [kind for kind, _ in calls.seen] == ["Boom", "Stop"]


@pytest.mark.asyncio
async def test_hook_command_garbage_in(served: tuple[HookServer, Calls]) -> None:
    server, calls = served
    for payload in ("not json", "", "\ufffd", "[" * 100_000):
        code, out, _ = await finished(await hook(server, "Stop", payload))
        assert (code, out) == (0, "")
    assert calls.seen == []


@pytest.mark.asyncio
async def test_the_directory_must_be_private(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    with pytest.raises(ConfigError):
        await HookServer(open_dir / "hooks.sock", TOKEN, Calls()).start()
    with pytest.raises(ConfigError):
        await HookServer(tmp_path / "missing" / "hooks.sock", TOKEN, Calls()).start()
    with pytest.raises(ConfigError):
        HookServer(tmp_path / "x.sock", "", Calls())
