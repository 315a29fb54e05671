"""Agents on another machine, through a real OpenSSH server (sshtools.sshd): the
Python clients with ``remote=``, the CLI's ``--remote``, and what failures look like.
The remote is this machine, reached over ssh on 127.0.0.1 with generated keys."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

import agenthost.wire.ssh as ssh_module
from agenthost.client import AsyncClient, Client
from agenthost.daemon.client import DaemonClient
from agenthost.errors import DaemonNotRunning, HostNotFound, RemoteError
from agenthost.follow import Gap
from agenthost.inventory import gather_remote
from agenthost.protocol import StreamEvent

from conftest import HostFactory
from hosttools import DEADLINE, pid_gone, wait_for, wait_until
from sshtools import Sshd, bridges

CLI = [sys.executable, "-m", "agenthost"]


@pytest.fixture
def remote_env(sshd: Sshd, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """$AGENTHOST_SSH and $AGENTHOST_REMOTE_COMMAND set for this test's home; returned
    as the environment of CLI subprocesses."""
    values = sshd.env(home)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **values}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def ssh_children() -> list[psutil.Process]:
    """The ssh processes this test process started (one per remote connection)."""
    return [p for p in psutil.Process().children() if p.name() == "ssh"]


def test_status_send_attach_with_replay(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    host_factory("r1")
    with Client("r1", remote=sshd.remote) as client:
        assert client.remote is not None and str(client.remote) == sshd.remote
        assert client.status().agent.id == "r1"
        sent = client.send("hello there")
        events = []
        for event in client.attach(0):  # from the oldest: the replay, then live
            events.append(event)
            if event.type == "result":
                break
    offsets = [e.offset for e in events]
    assert offsets == list(range(1, len(offsets) + 1))
    assert sent.offset in offsets
    texts = [e.chat_entry.content for e in events if e.chat_entry is not None]
    assert "hello there" in texts


def test_cli_verbs_with_remote(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory, home: Path
) -> None:
    host = host_factory("r2")
    status = cli(remote_env, "status", "r2", "--remote", sshd.remote, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["agent"]["id"] == "r2"
    sent = cli(remote_env, "send", "r2", "--remote", sshd.remote, "/ask")
    assert sent.returncode == 0, sent.stderr

    def pending() -> list[dict[str, object]]:
        out = cli(remote_env, "pending", "r2", "--remote", sshd.remote, "--json")
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout))

    request = wait_for(pending, what="the demo's permission request")[0]
    answer = cli(
        remote_env, "respond", "r2", str(request["request_id"]), "allow", "--remote", sshd.remote
    )
    assert answer.returncode == 0, answer.stderr
    assert "allowed" in answer.stdout
    waited = cli(
        remote_env, "wait", "r2", "--state", "idle", "--remote", sshd.remote, "--timeout", "30"
    )
    assert waited.returncode == 0, waited.stderr
    history = cli(remote_env, "history", "r2", "--remote", sshd.remote, "--json")
    roles = [e["role"] for e in json.loads(history.stdout)["entries"]]
    assert "tool" in roles
    stopped = cli(remote_env, "stop", "r2", "--remote", sshd.remote, "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] is True
    wait_for(lambda: host.proc.poll() is not None, what="the host's exit")
    wait_for(lambda: not bridges(home), what="no bridge left on the remote")


def test_list_merges_machines(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    host_factory("r3")
    user = psutil.Process().username()
    other = f"{user}@{sshd.remote}"  # the same sshd under a second name
    out = cli(remote_env, "list", "--remote", sshd.remote, "--remote", other, "--json")
    assert out.returncode == 0, out.stderr
    items = json.loads(out.stdout)
    assert sorted((i["machine"], i["agent_id"]) for i in items) == [
        (sshd.remote, "r3"),
        (other, "r3"),
    ]
    table = cli(remote_env, "list", "--remote", sshd.remote, "--remote", other)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:2] == ["MACHINE", "AGENT"]
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == [sshd.remote, other]


@pytest.mark.asyncio
async def test_gather_remote(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    host_factory("r4")
    items = await gather_remote(sshd.remote, project="nope")
    assert items == []
    items = await gather_remote(sshd.remote)
    assert [(i["agent_id"], i["machine"], i["reachable"]) for i in items] == [
        ("r4", sshd.remote, True)
    ]


@pytest.mark.asyncio
async def test_follow_resumes_after_the_ssh_link_is_killed(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory, home: Path
) -> None:
    host_factory("r5")
    offsets: list[int] = []
    killed: list[int] = []
    async with AsyncClient("r5", remote=sshd.remote) as client:
        await client.send("/flood 3000")
        follow = client.follow()
        async for item in follow:
            assert not isinstance(item, Gap), item
            assert isinstance(item, StreamEvent)
            offsets.append(item.offset)
            if len(offsets) == 200 and not killed:
                old_bridges = bridges(home)
                link = ssh_children()
                assert len(link) == 1 and len(old_bridges) == 1
                killed.append(old_bridges[0].pid)
                os.kill(link[0].pid, signal.SIGKILL)  # the link dies mid-stream
            if item.type == "result":
                break
        assert follow.attaches >= 2
        # the killed link's bridge went away on the remote (its stdin ended)
        await wait_until(lambda: pid_gone(killed[0]), what="the old bridge's exit")
        await follow.aclose()
    assert offsets == list(range(1, len(offsets) + 1))  # contiguous, none repeated
    assert len(offsets) > 3000
    await wait_until(lambda: not bridges(home), what="no bridge left on the remote")


@pytest.mark.asyncio
async def test_killed_link_while_attached_idle_leaves_no_bridge(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory, home: Path
) -> None:
    host_factory("r6")
    async with AsyncClient("r6", remote=sshd.remote) as client:
        await client.attach(0)
        await client.recv_event(timeout=30)
        await wait_until(lambda: len(bridges(home)) == 1, what="the remote bridge")
        bridge = bridges(home)[0]
        os.kill(ssh_children()[0].pid, signal.SIGKILL)
        await wait_until(lambda: pid_gone(bridge.pid), what="the bridge's exit")


@pytest.mark.asyncio
async def test_closing_an_attached_client_ends_its_ssh_and_the_remote_bridge(
    sshd: Sshd,
    remote_env: dict[str, str],
    host_factory: HostFactory,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ssh passes the client's close on as a mere EOF, after which the remote bridge
    # relays the attached stream on: the close must end the link itself, not wait for
    # the fallback kill of an ssh that would never exit
    monkeypatch.setattr(ssh_module, "EXIT_WAIT", 3600.0)
    host_factory("rb")
    client = AsyncClient("rb", remote=sshd.remote)
    await client.attach(0)
    await client.recv_event(timeout=30)
    await wait_until(lambda: len(bridges(home)) == 1, what="the remote bridge")
    bridge = bridges(home)[0]
    link = ssh_children()
    assert len(link) == 1
    await asyncio.wait_for(client.close(), DEADLINE)
    assert not link[0].is_running() or link[0].status() == psutil.STATUS_ZOMBIE
    await wait_until(lambda: pid_gone(bridge.pid), what="the remote bridge's exit")


def test_requests_piped_through_ssh_are_answered(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    # the scripted case, word for word: printf ... | ssh HOST agenthost bridge ID
    host_factory("rc", "--agent", "lines", command=["cat"])
    ssh = f"{remote_env['AGENTHOST_SSH']} -o BatchMode=yes -p {sshd.port} 127.0.0.1"
    agenthost = remote_env["AGENTHOST_REMOTE_COMMAND"]
    script = " ".join([r"""printf '%s\n%s\n' "$PING" "$STATUS" |""", ssh, agenthost, "bridge rc"])
    out = subprocess.run(
        ["sh", "-c", script],
        env={
            **remote_env,
            "PING": '{"type": "host.ping", "id": "p"}',
            "STATUS": '{"type": "host.status", "id": "s"}',
        },
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(a["id"], a["type"], a["success"]) for a in answers] == [
        ("p", "host.ping", True),
        ("s", "host.status", True),
    ]
    assert answers[1]["payload"]["agent"]["id"] == "rc"


def test_unknown_agent_names_the_machine(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    host_factory("r7")
    with pytest.raises(HostNotFound) as caught, Client("r8", remote=sshd.remote):
        pass
    assert "'r8'" in caught.value.message and sshd.remote in caught.value.message
    assert caught.value.hint is not None and "r7" in caught.value.hint  # did you mean
    out = cli(remote_env, "status", "r8", "--remote", sshd.remote)
    assert out.returncode == 3
    assert f"no host answers for agent 'r8' on {sshd.remote}" in out.stderr


@pytest.mark.asyncio
async def test_remote_daemon_not_running(sshd: Sshd, remote_env: dict[str, str]) -> None:
    with pytest.raises(DaemonNotRunning) as caught:
        async with DaemonClient(remote=sshd.remote) as daemon:
            await daemon.ping()
    assert sshd.remote in caught.value.message


def test_missing_agenthost_on_the_remote(sshd: Sshd, home: Path, host_factory: HostFactory) -> None:
    env = {**os.environ, **sshd.env(home, command="/nonexistent")}
    out = cli(env, "status", "a1", "--remote", sshd.remote)
    assert out.returncode == 11, out.stderr
    assert f"agenthost is not installed on {sshd.remote}" in out.stderr
    assert "AGENTHOST_REMOTE_COMMAND" in out.stderr
    listed = cli(env, "list", "--remote", sshd.remote, "--json")
    assert listed.returncode == 11
    assert json.loads(listed.stdout)["reason"] == "remote"


def test_wrong_key_is_a_remote_error(
    sshd: Sshd, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTHOST_SSH", sshd.ssh(sshd.dir / "wrong_key"))
    monkeypatch.setenv("AGENTHOST_REMOTE_COMMAND", sshd.env(home)["AGENTHOST_REMOTE_COMMAND"])
    with pytest.raises(RemoteError) as caught, Client("a1", remote=sshd.remote):
        pass
    assert caught.value.message.startswith(f"ssh to {sshd.remote} failed: ")
    assert "Permission denied" in caught.value.message


def test_attach_ping_interrupt_acp_with_remote(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory
) -> None:
    host_factory("r9")
    with Client("r9", remote=sshd.remote) as client:
        client.send("one two")
    replay = cli(remote_env, "attach", "r9", "--remote", sshd.remote, "--no-follow", "--json")
    assert replay.returncode == 0, replay.stderr
    events = [json.loads(line) for line in replay.stdout.splitlines()]
    offsets = [e["offset"] for e in events]
    assert offsets == list(range(1, len(offsets) + 1)) and len(offsets) > 3
    ping = cli(remote_env, "ping", "r9", "--remote", sshd.remote, "--json")
    assert ping.returncode == 0 and json.loads(ping.stdout)["protocol_version"]
    idle = cli(remote_env, "interrupt", "r9", "--remote", sshd.remote, "--json")
    assert idle.returncode == 0 and json.loads(idle.stdout)["sent"] is False
    request = b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}\n'
    acp = subprocess.run(
        [*CLI, "acp", "r9", "--remote", sshd.remote],
        input=request,
        env=remote_env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert acp.returncode == 0, acp.stderr
    answer = json.loads(acp.stdout.splitlines()[0])
    assert answer["result"]["sessions"][0]["sessionId"] == "r9"


def test_cli_attach_survives_a_killed_link(
    sshd: Sshd, remote_env: dict[str, str], host_factory: HostFactory, home: Path
) -> None:
    import select
    import time

    host_factory("ra")
    proc = subprocess.Popen(
        [*CLI, "attach", "ra", "--remote", sshd.remote, "--json"],
        env=remote_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout, proc.stderr
    events: list[dict[str, object]] = []
    buffered = b""

    def read_until(done: Callable[[], bool]) -> None:
        nonlocal buffered
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, f"attach printed {events}"
            ready, _, _ = select.select([out], [], [], 0.5)
            if ready:
                data = os.read(out.fileno(), 65536)
                assert data, err.read().decode()
                buffered += data
                *lines, buffered = buffered.split(b"\n")
                events.extend(json.loads(line) for line in lines if line)

    try:
        read_until(lambda: len(events) >= 1)
        link = [p for p in psutil.Process(proc.pid).children() if p.name() == "ssh"]
        assert len(link) == 1
        link[0].kill()  # the link dies; attach connects again
        with Client("ra", remote=sshd.remote) as client:
            client.send("after the cut")
        read_until(lambda: any(e.get("type") == "result" for e in events))
        offsets = [e["offset"] for e in events]
        assert offsets == list(range(1, len(offsets) + 1))
        with Client("ra", remote=sshd.remote) as client:
            client.stop()
        assert proc.wait(timeout=60) == 0
        assert b"Traceback" not in err.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        err.close()
    wait_for(lambda: not bridges(home), what="no bridge left on the remote")
