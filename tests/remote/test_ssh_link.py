"""The ssh transport's own behaviour with stand-ins for ssh (no sshd needed): an ssh
that will not start, that fails with garbage on stderr, that lingers after its
connection was closed (it is killed, and reaped)."""

from __future__ import annotations

import shlex

import psutil
import pytest

import agenthost.wire.ssh as ssh_module
from agenthost.client import AsyncClient
from agenthost.errors import NotConnected, RemoteError, RequestTimeout
from agenthost.inventory import gather_remote


def fake_ssh(script: str) -> str:
    """An $AGENTHOST_SSH that runs ``script`` and ignores ssh's arguments."""
    return shlex.join(["sh", "-c", script, "fake-ssh"])


def children() -> list[psutil.Process]:
    """The stand-ins for ssh still around (as children of this process, zombies too)."""
    return [p for p in psutil.Process().children() if p.name() in ("sh", "sleep")]


@pytest.mark.asyncio
async def test_ssh_that_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTHOST_SSH", "/nonexistent/ssh")
    with pytest.raises(RemoteError, match="cannot run '/nonexistent/ssh' to reach box"):
        async with AsyncClient("a1", remote="box"):
            pass
    with pytest.raises(RemoteError, match="cannot run"):
        await gather_remote("box")


@pytest.mark.asyncio
async def test_ssh_failing_with_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    script = r"printf '\377\376\033[31mno route\000 to box\n' >&2; exit 255"
    monkeypatch.setenv("AGENTHOST_SSH", fake_ssh(script))
    with pytest.raises(RemoteError) as caught:
        async with AsyncClient("a1", remote="box"):
            pass
    assert caught.value.message.startswith("ssh to box failed: ")
    assert "no route to box" in caught.value.message
    assert "\x1b" not in caught.value.message
    with pytest.raises(RemoteError, match="ssh to box failed"):
        await gather_remote("box")
    assert children() == []


@pytest.mark.asyncio
async def test_a_lingering_ssh_is_killed_on_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssh_module, "EXIT_WAIT", 0.2)
    monkeypatch.setenv("AGENTHOST_SSH", fake_ssh("exec sleep 600"))  # deaf to EOF
    client = AsyncClient("a1", remote="box", request_timeout=0.3)
    with pytest.raises(RequestTimeout):
        await client.connect()  # the handshake's ping: nobody answers
    assert children() == []  # the failed connect closed the link, and killed ssh
    with pytest.raises(RemoteError, match="did not answer"):
        await gather_remote("box", timeout=0.3)
    assert children() == []


@pytest.mark.asyncio
async def test_a_remote_that_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTHOST_SSH", fake_ssh("exit 0"))
    with pytest.raises(NotConnected) as caught:
        async with AsyncClient("a1", remote="me@box:22"):
            pass
    assert "agent 'a1' on me@box:22 ended" in caught.value.message
    assert not isinstance(caught.value, RemoteError)
    with pytest.raises(RemoteError, match="with JSON"):
        await gather_remote("box")  # an empty answer is not a list of agents
