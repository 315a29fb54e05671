"""The bridge in front of a sandboxed agent (``python -P -m agenthost.sandbox.inner``),
for real: curl and Python as the agent's programs, the proxy on a thread of this
process with real upstreams on 127.0.0.1; outside a sandbox, and inside bubblewrap with
a network namespace of its own, where the proxy is the only way out.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from hosttools import wait_for
from proxytools import ProxyThread, free_port

PY = sys.executable
INNER = [PY, "-P", "-m", "agenthost.sandbox.inner"]
BWRAP = shutil.which("bwrap")
CURL = shutil.which("curl")
TIMEOUT = 60  # a hang guard, not a speed assertion

needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ah-", dir="/tmp") as path:
        os.chmod(path, 0o700)
        yield Path(path)


@pytest.fixture
def proxy(sock_dir: Path) -> Iterator[ProxyThread]:
    with ProxyThread(sock_dir / "proxy.sock") as running:
        yield running


def bridge(port: int, sock: Path | str, *command: str) -> list[str]:
    return [*INNER, "--listen", f"127.0.0.1:{port}", "--socket", str(sock), "--", *command]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--", "true"],
        ["--listen", "127.0.0.1:3128", "--", "true"],
        ["--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:3128", "--socket", "/x"],
        ["--listen", "127.0.0.1:3128", "--socket", "/x", "--"],
        ["--listen", "127.0.0.1:3128", "--socket", "/x", "true"],
        ["--listen", "127.0.0.1", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:0", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:65536", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:-1", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:３１２８", "--socket", "/x", "--", "true"],
        ["--listen", "localhost:3128", "--socket", "/x", "--", "true"],
        ["--listen", "999.0.0.1:3128", "--socket", "/x", "--", "true"],
        ["--listen", ":3128", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:3128", "--socket", "", "--", "true"],
        ["--listen", "127.0.0.1:3128", "--listen=127.0.0.1:1", "--socket", "/x", "--", "true"],
        ["--listen", "127.0.0.1:3128", "--socket", "--", "true"],
        ["--verbose", "--listen", "127.0.0.1:3128", "--socket", "/x", "--", "true"],
        ["--listen", "\x1b[2J" * 100, "--socket", "/x", "--", "true"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str]) -> None:
    proc = subprocess.run([*INNER, *args], capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 2, proc
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agenthost sandbox bridge: "), lines
    assert len(lines[0]) < 300 and proc.stdout == b""


def test_an_address_in_use_or_a_missing_command_fails_before_anything_runs(
    sock_dir: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            bridge(port, sock_dir / "p.sock", "touch", str(sock_dir / "ran")),
            capture_output=True,
            timeout=TIMEOUT,
        )
    assert proc.returncode == 125 and b"cannot listen" in proc.stderr
    assert not (sock_dir / "ran").exists()
    proc = subprocess.run(
        bridge(free_port(), sock_dir / "p.sock", "/nonexistent/agent"),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 127 and b"cannot run '/nonexistent/agent'" in proc.stderr


def test_the_command_keeps_its_pid_stdio_and_exit_status(sock_dir: Path) -> None:
    proc = subprocess.Popen(
        bridge(free_port(), sock_dir / "p.sock", "sh", "-c", "echo $$; cat; echo err >&2; exit 7"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(b"from stdin\n", timeout=TIMEOUT)
    assert proc.returncode == 7
    assert out.decode().splitlines() == [str(proc.pid), "from stdin"]
    assert err == b"err\n"
    # and nothing more: the listening socket is not left open in it
    fds = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    proc = subprocess.run(
        bridge(free_port(), sock_dir / "p.sock", PY, "-c", fds),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert proc.stdout == b"[0, 1, 2, 3]\n"  # 3: the directory being listed


@needs_curl
def test_curl_reaches_an_allowed_host_and_is_refused_another(proxy: ProxyThread) -> None:
    up = proxy.upstreams
    port = free_port()
    script = (
        # the bridge listens before the command starts: no wait, no retry
        f"curl -sS -x http://127.0.0.1:{port} http://127.0.0.1:{up.http_port}/; echo;"
        f"curl -sS -p -x http://127.0.0.1:{port} http://127.0.0.1:{up.http_port}/chunked; echo;"
        f"curl -sS -x http://127.0.0.1:{port} http://127.0.0.1:{up.early_port}/;"
        f"curl -sS -p -x http://127.0.0.1:{port} http://127.0.0.1:{up.early_port}/; echo $?"
    )
    proc = subprocess.run(
        bridge(port, proxy.path, "sh", "-c", script), capture_output=True, timeout=TIMEOUT
    )
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == "hello"  # plain HTTP, forwarded
    assert lines[1] == "first second third"  # through a CONNECT tunnel
    assert f"127.0.0.1:{up.early_port} is not on the sandbox's allow list" in lines[2]
    assert "sandbox.allow_hosts" in lines[2]
    assert lines[3] == "56"  # curl: the CONNECT was answered 403
    assert [r[:2] for r in proxy.refused] == [("127.0.0.1", up.early_port)] * 2


@needs_curl
def test_without_the_proxy_the_bridge_answers_502(sock_dir: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        bridge(port, sock_dir / "gone.sock", "curl", "-sS", "-x", f"127.0.0.1:{port}", "http://a/"),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert b"the sandbox's proxy cannot be reached" in proc.stdout


def _bridge_of(agent: int) -> psutil.Process:
    children = wait_for(lambda: psutil.Process(agent).children(), what="the bridge")
    assert len(children) == 1
    return children[0]


def _through(port: int, target: str) -> bytes:
    """A CONNECT through the bridge at ``port``: what the proxy answered first."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        return sock.recv(4096)


def test_the_bridge_survives_the_agents_signals_and_ends_with_the_agent(
    proxy: ProxyThread,
) -> None:
    port = free_port()
    agent = subprocess.Popen(
        bridge(port, proxy.path, PY, "-c", AGENT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert agent.stdout is not None and agent.stdin is not None
        assert agent.stdout.readline() == b"ready\n"
        child = _bridge_of(agent.pid)
        assert child.cmdline()[:4] == INNER
        # the terminal's and the host's signals to the agent's process group
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            os.killpg(agent.pid, sig)
            assert agent.stdout.readline() == f"got {sig}\n".encode()
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        echo = proxy.upstreams.echo_port
        assert _through(port, f"127.0.0.1:{echo}").startswith(b"HTTP/1.1 200 ")
        assert _through(port, "elsewhere.example:443").startswith(b"HTTP/1.1 403 ")
        # its stdio is not the agent's: the agent's stdout ends with the agent
        agent.kill()
        assert agent.stdout.read() == b""
        agent.wait(TIMEOUT)
        wait_for(lambda: _gone(child), what="the bridge to end with the agent")
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.communicate(timeout=TIMEOUT)  # and close its pipes


AGENT = """
import signal, sys
def note(sig, frame):
    print("got", sig, flush=True)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(sig, note)
print("ready", flush=True)
while True:
    signal.pause()
"""


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE or not process.is_running()
    except psutil.NoSuchProcess:
        return True


def test_a_bridge_whose_agent_exits_at_once_ends_too(sock_dir: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        bridge(port, sock_dir / "p.sock", "true"), capture_output=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0

    def port_free() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) != 0

    wait_for(port_free, what="the bridge to close its port")


@pytest.mark.skipif(BWRAP is None or CURL is None, reason="bubblewrap or curl is missing")
def test_inside_bubblewrap_the_proxy_is_the_only_way_out(proxy: ProxyThread) -> None:
    up = proxy.upstreams
    inside = "127.0.0.1:3128"
    (proxy.path.parent / "client.py").write_text(PYCLIENT)
    script = (
        f"curl -sS -x http://{inside} http://127.0.0.1:{up.http_port}/; echo;"
        f"curl -sS -p -x http://{inside} http://127.0.0.1:{up.http_port}/chunked; echo;"
        f"curl -sS -o /dev/null -w '%{{http_code}}\\n' -x http://{inside} "
        f"http://127.0.0.1:{up.early_port}/;"
        f"curl -sS -m 5 http://127.0.0.1:{up.http_port}/ 2>/dev/null; echo direct $?;"
        f"HTTP_PROXY=http://{inside} {PY} /run/agenthost/client.py {up.http_port} {up.early_port}"
    )
    command = [
        BWRAP or "bwrap",
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/run",
        "--bind", str(proxy.path.parent), "/run/agenthost",
        "--",
        *INNER,
        "--listen", inside,
        "--socket", f"/run/agenthost/{proxy.path.name}",
        "--",
        "sh", "-c", script,
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert lines[:4] == ["hello", "first second third", "403", "direct 7"], proc
    assert lines[4:] == ["python hello", "python refused 403"]
    assert [r[:2] for r in proxy.refused] == [("127.0.0.1", up.early_port)] * 2


PYCLIENT = """
import sys, urllib.error, urllib.request

print("python", urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/").read().decode())
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/")
except urllib.error.HTTPError as error:
    print("python refused", error.code)
"""


@needs_curl
def test_an_agent_started_with_stdin_and_stdout_closed_still_gets_its_bridge(
    sock_dir: Path,
) -> None:
    # with fd 0 closed the listening socket takes it: the bridge must not clobber it
    port = free_port()
    argv = " ".join(bridge(port, sock_dir / "gone.sock", "curl", "-sS", "-o", "/dev/stderr"))
    proc = subprocess.run(
        ["sh", "-c", f"{argv} -x 127.0.0.1:{port} http://a/ <&- >&-"],
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert b"the sandbox's proxy cannot be reached" in proc.stderr, proc
