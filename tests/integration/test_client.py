"""The Python client: verbs, streams, errors, timeouts, version checks, discovery."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvloop

from agenthost import (
    AgentNotRunning,
    AsyncClient,
    Client,
    HostNotFound,
    InvalidPayload,
    RequestTimeout,
    UnknownType,
    VersionUnsupported,
    discover_hosts,
    probe_host,
)
from agenthost.protocol import PROTOCOL_VERSION

from conftest import HostFactory
from hosttools import DEADLINE, lines_agent, wait_for

CAT = ["cat"]


def test_blocking_client_verbs(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", "--project", "p", command=CAT)
    with Client("a1", home=host.home) as client:
        ping = client.ping()
        assert ping.protocol_version == PROTOCOL_VERSION and ping.uptime.endswith("s")
        status = client.status()
        assert status.host.pid == host.pid and status.agent.project == "p"
        assert [a.id for a in client.list()] == ["a1"]
        sent = client.send("hello")
        sub = client.attach(0)
        assert sub.response.stream_offset >= sent.offset
        events = []
        for event in sub:
            events.append(event)
            if event.type == "output":
                break
        assert events[-1].data == "hello"
        assert [e.offset for e in events] == list(range(1, len(events) + 1))
        history = client.history()
        assert [e.content for e in history.entries] == ["hello"]
        assert history.entries[0].offset == sent.offset
        client.detach()
        stop = client.stop(timeout=5)
    assert stop.stopped and stop.signal == "SIGTERM"


def test_attach_iterator_ends_when_host_exits(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", "--linger", "0", command=CAT)
    with Client("a1", home=host.home) as client, Client("a1", home=host.home) as other:
        sub = client.attach(0)
        other.send("bye")
        other.aclient  # noqa: B018 - the second client stays connected meanwhile
        host.signal(15)
        offsets = [e.offset for e in sub]  # ends, does not hang
        assert offsets == list(range(1, len(offsets) + 1))
        assert client.last_offset == offsets[-1]
        assert not client.connected


def test_idempotent_send_applied_once(host_factory: HostFactory) -> None:
    code = "import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with Client("a1", home=host.home) as client:
        first = client.send("once", key="k-1")
        again = client.send("once", key="k-1")
        other = client.send("twice", key="k-2")
        assert again.offset == first.offset and again.duplicate and not first.duplicate
        assert other.offset > first.offset and not other.duplicate
        got = []
        for event in client.attach(0):
            if event.type == "output":
                got.append(event.data)
            if len(got) == 2:
                break
    assert got == ["got once", "got twice"]


def test_typed_errors_from_the_host(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=lines_agent("raise SystemExit(0)"))
    host.wait_state("done")
    with Client("a1", home=host.home) as client:
        with pytest.raises(AgentNotRunning):
            client.send("anyone?")
        with pytest.raises(UnknownType) as unknown:
            client.aclient and client._run(client.aclient.request("host.nope"))
        assert unknown.value.remote and unknown.value.code == "unknown_type"
        with pytest.raises(InvalidPayload):
            client._run(client.aclient.request("host.attach", {"offset": -1}))
        assert client.ping().version  # still usable


def test_host_not_found(home: Path) -> None:
    with pytest.raises(HostNotFound) as info:
        Client("ghost", home=home).connect()
    assert "ghost" in str(info.value) and info.value.hint
    with pytest.raises(HostNotFound):
        probe_host("ghost", home=home)


@pytest.fixture
def fake_host(home: Path) -> Iterator[Callable[[Callable[[bytes], bytes | None]], Path]]:
    """A fake host on a socket: answers each request line with ``reply(line)``."""
    servers: list[socket.socket] = []

    def start(reply: Callable[[bytes], bytes | None]) -> Path:
        path = home / "hosts" / "fake.sock"
        path.parent.mkdir(mode=0o700, exist_ok=True)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        servers.append(server)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn, conn.makefile("rb") as reader:
                    for line in reader:
                        out = reply(line)
                        if out is not None:
                            conn.sendall(out)

        threading.Thread(target=serve, daemon=True).start()
        return path

    yield start
    for server in servers:
        server.close()


def ping_reply(version: str, min_version: str = "1.0") -> Callable[[bytes], bytes]:
    def reply(line: bytes) -> bytes:
        request = json.loads(line)
        payload = {
            "version": "9.9.9",
            "protocol_version": version,
            "min_protocol_version": min_version,
            "uptime": "1s",
            "started_at": "2026-01-01T00:00:00Z",
        }
        return (
            json.dumps(
                {
                    "kind": "response",
                    "type": request["type"],
                    "id": request.get("id"),
                    "success": True,
                    "payload": payload,
                }
            ).encode()
            + b"\n"
        )

    return reply


# a host whose minimum is the minor after this client's version refuses this client
_MINOR = int(PROTOCOL_VERSION.split(".")[1])
_ABOVE = (f"1.{_MINOR + 2}", f"1.{_MINOR + 1}", False)


@pytest.mark.parametrize(
    ("version", "min_version", "ok"),
    [("1.0", "1.0", True), ("1.10", "1.0", True), ("2.0", "2.0", False), _ABOVE],
)
def test_version_check_on_connect(
    fake_host: Callable[[Callable[[bytes], bytes | None]], Path],
    version: str,
    min_version: str,
    ok: bool,
) -> None:
    path = fake_host(ping_reply(version, min_version))
    client = Client(socket_path=path)
    try:
        if ok:
            client.connect()
            assert client.ping().protocol_version == version
        else:
            with pytest.raises(VersionUnsupported):
                client.connect()
    finally:
        client.close()


def test_request_timeout_when_host_never_answers(
    fake_host: Callable[[Callable[[bytes], bytes | None]], Path],
) -> None:
    path = fake_host(lambda line: None)
    client = Client(socket_path=path, request_timeout=0.3)
    try:
        with pytest.raises(RequestTimeout) as info:
            client.connect()
        assert "did not answer" in str(info.value)
    finally:
        client.close()


def test_malformed_frame_from_host_is_a_protocol_error(
    fake_host: Callable[[Callable[[bytes], bytes | None]], Path],
) -> None:
    from agenthost import NotConnected, ProtocolError

    # (a frame of an unknown kind is skipped, as the protocol says: this one has none
    # of the fields of a response or an event)
    path = fake_host(lambda line: b'{"kind": "response", "surprise": true}\n')
    client = Client(socket_path=path, check_version=False)
    try:
        client.connect()
        with pytest.raises((ProtocolError, NotConnected)) as info:
            client.ping()
        assert "malformed" in str(info.value)
    finally:
        client.close()


def test_async_client_concurrent_requests_on_one_connection(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)

    async def main() -> list[str]:
        async with AsyncClient("a1", home=host.home) as client:
            results = await asyncio.gather(
                client.ping(), client.status(), client.history(), client.ping(), client.list()
            )
            return [type(r).__name__ for r in results]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        names = runner.run(main())
    assert names == ["PingResponse", "StatusResponse", "HistoryResponse", "PingResponse", "list"]


def test_discover_hosts_filters_and_reports_stale(host_factory: HostFactory) -> None:
    a = host_factory("a1", "--agent", "lines", "--project", "alpha", command=CAT)
    host_factory("b2", "--agent", "lines", "--project", "beta", command=CAT)
    dead = host_factory("c3", "--agent", "lines", command=CAT)
    dead.signal(9)
    dead.wait_exit()
    home = a.home
    (home / "hosts" / "not-a-socket.txt").write_text("ignored")
    found = discover_hosts(home)
    assert [h.agent_id for h in found] == ["a1", "b2"]
    assert all(h.status is not None for h in found)
    assert [h.agent_id for h in discover_hosts(home, project="beta")] == ["b2"]
    everything = discover_hosts(home, include_unreachable=True)
    stale = [h for h in everything if h.agent_id == "c3"]
    assert len(stale) == 1 and stale[0].status is None and stale[0].alive is False
    assert stale[0].error


def test_discover_in_missing_home_is_empty(home: Path) -> None:
    assert discover_hosts(home / "nowhere") == []


def test_client_inside_running_loop_is_refused(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)

    async def misuse() -> None:
        client = Client("a1", home=host.home)
        try:
            client.connect()
        finally:
            client._runner.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        with pytest.raises(RuntimeError, match="use AsyncClient"):
            runner.run(misuse())


def test_agent_inherits_exactly_its_three_stdio_descriptors(host_factory: HostFactory) -> None:
    code = "import os\nprint(sorted(os.listdir('/proc/self/fd'), key=int), flush=True)\ninput()"
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        line = conn.read_until(lambda f: f.get("type") == "output")["data"]
    fds = json.loads(line.replace("'", '"'))
    # 0, 1, 2 and the descriptor listdir itself had open
    assert len(fds) == 4 and fds[:3] == ["0", "1", "2"], fds


def test_no_descriptor_leak_across_sends_and_attaches(host_factory: HostFactory) -> None:
    import psutil

    host = host_factory("a1", "--agent", "lines", command=CAT)
    proc = psutil.Process(host.pid)
    with Client("a1", home=host.home) as c:
        c.ping()
    before = proc.num_fds()
    for i in range(50):
        with Client("a1", home=host.home) as c:
            c.send(f"m{i}")
            c.attach(0)
    wait_for(lambda: proc.num_fds() <= before, what="descriptors released")
    assert os.path.exists(host.socket_path)


# --- the Python API for people ------------------------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    """The README's Python example, exactly as printed."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    found = [b for b in blocks if "from agenthost import Client" in b]
    assert len(found) == 1, "the README has one Python example using Client"
    return str(found[0])


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_the_readme_snippet_runs_against_the_demo_agent_and_ends(
    host_factory: HostFactory, busy: bool
) -> None:
    host = host_factory("demo", "--agent", "demo")
    if busy:  # a turn still running (a brand-new demo host answers its first message)
        with host.client() as client:
            client.send("/sleep 3")
        host.wait_state("running")
    run = subprocess.run(
        [sys.executable, "-c", readme_snippet()],
        env={**os.environ, "AGENTHOST_HOME": str(host.home)},
        capture_output=True,
        text=True,
        timeout=DEADLINE,  # it follows forever without its stop condition
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == ("running" if busy else "idle")
    assert re.fullmatch(r"#\d+ chat_entry user: hello", lines[1])
    assert re.fullmatch(r"#\d+ chat_entry assistant: You said \"hello\"\. .*", lines[-1])


def test_async_attach_iterates_without_await_and_still_awaits(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)

    async def main() -> tuple[list[str | None], int, list[str | None]]:
        async with AsyncClient("a1", home=host.home) as client:
            await client.send("one")
            plain: list[str | None] = []
            async for event in client.attach(0):  # attaches on the first step
                if event.type == "output":
                    plain.append(event.data)
                    break
            await client.detach()
            sub = client.attach(client.last_offset)
            with pytest.raises(RuntimeError, match="not attached yet"):
                sub.response  # noqa: B018 - nothing was sent yet
            assert await sub is sub  # the old form: await, then the response
            head = sub.response.stream_offset
            await client.send("two")
            later: list[str | None] = []
            async for event in sub:
                if event.type == "output":
                    later.append(event.data)
                    break
            return plain, head, later

    plain, head, later = uvloop.run(asyncio.wait_for(main(), DEADLINE))
    assert plain == ["one"] and later == ["two"] and head >= 2


def test_every_public_client_method_says_what_it_takes_returns_and_raises() -> None:
    for cls in (AsyncClient, Client):
        for name, member in vars(cls).items():
            if name.startswith("_") and name not in ("__enter__", "__aenter__"):
                continue
            doc = inspect.getdoc(member.fget if isinstance(member, property) else member)
            assert doc, f"{cls.__name__}.{name} has no docstring"
            if callable(member) and name not in ("close", "__enter__", "__aenter__"):
                words = doc.lower()
                assert "return" in words or "raise" in words, f"{cls.__name__}.{name}: {doc}"
    assert "AgentNotRunning" in (Client.send.__doc__ or "")  # the blocking twin's too
