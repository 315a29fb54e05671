"""Homes another user can write to, and sockets another user serves.

Whoever can write to a home can replace its ``hosts/`` and plant a socket of their own
where clients look for a host (or the daemon). So every command refuses a home owned by
another user, a home created here is private from its first parent on (whatever the
umask), and a client checks who serves a socket (``SO_PEERCRED``) before it sends a
single byte: text meant for an agent never reaches another user.

Acting as another user needs root; those tests skip without it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.client import AsyncClient
from agenthost.daemon.client import DaemonClient
from agenthost.errors import Forbidden
from agenthost.wire.peer import check_server

from hosttools import PY

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another uid")

# A server run as uid NOBODY on a socket path: prints "ready", accepts one connection,
# then prints how many bytes its client sent before closing (or -1 on its deadline).
FOREIGN_SERVER = """
import os, socket, sys
path = sys.argv[1]
os.setgroups([]); os.setgid({uid}); os.setuid({uid})
assert os.getuid() == {uid}
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
os.chmod(path, 0o777)  # anybody may connect: the question is whether they talk
srv.listen(8)
print("ready", flush=True)
srv.settimeout(60)
conn, _ = srv.accept()
conn.settimeout(60)
got = b""
try:
    while chunk := conn.recv(65536):
        got += chunk
except TimeoutError:
    print(-1, flush=True)
else:
    print(len(got), flush=True)
"""


def cli(home: Path, *args: str, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTHOST_HOME": str(home), "AGENTHOST_DEMO_PACE": "0", "NO_COLOR": "1"}
    argv = [PY, "-m", "agenthost", *args]
    if umask is not None:
        argv = ["sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def foreign_home() -> Iterator[Path]:
    """A home (with ``hosts/``) created by uid NOBODY, writable by everybody: the
    situation of a shared or mistyped ``--home``. Under /tmp, because pytest's own
    temporary directories are private to root (NOBODY could not reach its socket)."""
    base = Path(tempfile.mkdtemp(prefix="ah-foreign-", dir="/tmp"))
    base.chmod(0o755)
    home = base / "home"
    (home / "hosts").mkdir(parents=True)
    for d in (home, home / "hosts"):
        d.chmod(0o777)
        os.chown(d, NOBODY, NOBODY)
    yield home
    shutil.rmtree(base, ignore_errors=True)


def start_foreign_server(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [PY, "-c", FOREIGN_SERVER.format(uid=NOBODY), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the socket listens (or the child died)
    assert line.strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def bytes_received(proc: subprocess.Popen[str]) -> int:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return int(out.split()[-1])


def test_nested_home_parents_are_private_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "a" / "b" / "home"
    result = cli(home, "serve", "--agent-id", "u0", "--detach", "--json", umask=0)
    try:
        assert result.returncode == 0, result.stderr
        for directory in (tmp_path / "a", tmp_path / "a" / "b", home, home / "hosts"):
            mode = stat.S_IMODE(directory.stat().st_mode)
            assert mode == 0o700, f"{directory} is {mode:o}"
    finally:
        cli(home, "stop", "u0")


def test_a_home_that_exists_keeps_its_parents_as_they_are(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o755)
    result = cli(parent / "home", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(parent.stat().st_mode) == 0o755


@ROOT_ONLY
@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detach"])
def test_serve_refuses_a_home_owned_by_another_user(foreign_home: Path, detach: bool) -> None:
    # hosts/ not there yet: serve would make it (ours, 0700), and the owner of the home
    # could rename it away later and put their own in its place
    (foreign_home / "hosts").rmdir()
    args = ["serve", "--agent-id", "x", *(["--detach"] if detach else []), "--linger", "0"]
    result = cli(foreign_home, *args, "--", "true")
    assert result.returncode != 0
    assert f"belongs to uid {NOBODY}, not to this user" in result.stderr, result.stderr
    # nothing of ours was put where the other user can reach it
    assert list(foreign_home.iterdir()) == []


@ROOT_ONLY
def test_a_client_sends_nothing_to_a_host_socket_served_by_another_user(
    foreign_home: Path,
) -> None:
    server = start_foreign_server(foreign_home / "hosts" / "evil.sock")

    async def talk() -> None:
        client = AsyncClient("evil", home=foreign_home, check_version=False)
        with pytest.raises(Forbidden, match=f"served by uid {NOBODY}"):
            await client.connect()
        assert not client.connected

    asyncio.run(talk())
    assert bytes_received(server) == 0


@ROOT_ONLY
def test_agenthost_send_delivers_nothing_to_another_users_socket(foreign_home: Path) -> None:
    server = start_foreign_server(foreign_home / "hosts" / "evil.sock")
    result = cli(foreign_home, "send", "evil", "my secret plan")
    assert result.returncode != 0
    assert f"served by uid {NOBODY}" in result.stderr and "refusing" in result.stderr
    assert bytes_received(server) == 0


@ROOT_ONLY
def test_the_daemon_client_refuses_a_daemon_socket_served_by_another_user(
    foreign_home: Path,
) -> None:
    server = start_foreign_server(foreign_home / "daemon.sock")

    async def talk() -> None:
        client = DaemonClient(foreign_home)
        with pytest.raises(Forbidden, match="daemon socket"):
            await client.connect()

    asyncio.run(talk())
    assert bytes_received(server) == 0


def test_own_socket_passes_the_check(tmp_path: Path) -> None:
    # the same check against a server of this very user lets the bytes through
    path = tmp_path / "own.sock"

    async def scenario() -> bytes:
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.set_result(await reader.readline())
            writer.close()

        server = await asyncio.start_unix_server(handle, path)
        async with server:
            reader, writer = await asyncio.open_unix_connection(path)
            check_server(writer.transport, path, "host")  # raises nothing
            writer.write(b"hello\n")
            await writer.drain()
            data = await asyncio.wait_for(got, 10)
            writer.close()
            return data

    assert asyncio.run(scenario()) == b"hello\n"
