"""The CLI's fast path (agenthost/cli/fast.py) against the click path: the same command
lines, run as a user runs them (the installed ``agenthost`` program), with and without
``AGENTHOST_NO_FAST=1``, print the same stdout and stderr and exit with the same status.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenthost._version import __version__
from agenthost.protocol import PROTOCOL_VERSION

from conftest import HostFactory
from daemontools import DaemonWorld
from hosttools import HostProc, events_until, is_state, wait_for

_SCRIPT = Path(sys.executable).with_name("agenthost")
AGENTHOST = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agenthost"]

Run = tuple[int, str, str]


def run(home: Path, *args: str, fast: bool = True, stdin: str | None = None) -> Run:
    env = {**os.environ, "AGENTHOST_HOME": str(home), "NO_COLOR": "1"}
    env.pop("AGENTHOST_NO_FAST", None)
    if not fast:
        env["AGENTHOST_NO_FAST"] = "1"
    done = subprocess.run(
        [*AGENTHOST, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60
    )
    return done.returncode, done.stdout, done.stderr


# what legitimately differs between two runs a moment apart
_MOVING = [
    (re.compile(r"\bup [0-9hms]+"), "up <t>"),
    (re.compile(r'"uptime": "[^"]*"'), '"uptime": "<t>"'),
    (re.compile(r'"uptime_seconds": [0-9.e-]+'), '"uptime_seconds": <t>'),
    (re.compile(r"^(uptime: +)\S+$", re.M), r"\1<t>"),
    (re.compile(r"\boffset \d+"), "offset <n>"),
    (re.compile(r'"offset": \d+'), '"offset": <n>'),
]


def normal(result: Run) -> Run:
    code, out, err = result
    for pattern, repl in _MOVING:
        out, err = pattern.sub(repl, out), pattern.sub(repl, err)
    return code, out, err


def same(home: Path, *args: str, stdin: str | None = None) -> Run:
    """Run the command line both ways; assert they agree; return the fast one's."""
    fast = normal(run(home, *args, stdin=stdin))
    slow = normal(run(home, *args, fast=False, stdin=stdin))
    assert fast == slow, args
    return fast


@pytest.fixture
def demo(host_factory: HostFactory) -> HostProc:
    host = host_factory("d1", "--agent", "demo", "--project", "site", "--task", "T-1")
    host.wait_state("idle")
    return host


CASES = [
    ("status", "d1"),
    ("status", "d1", "--json"),
    ("status", "--json", "d1", "--json"),
    ("ping", "d1"),
    ("ping", "d1", "--json"),
    ("pending", "d1"),
    ("pending", "d1", "--json"),
    ("send", "d1", "hello", "there"),
    ("send", "d1", "hi", "--json", "--key", "k1"),
    ("respond", "d1", "r-none", "allow"),
    ("respond", "d1", "r-none", "deny", "--message", "no", "--json"),
    # errors the fast path gives to click, and usage errors
    ("status", "nope"),
    ("status", "nope", "--json"),
    ("ping", "../bad"),
    ("status", "d1", "--bogus"),
    ("status", "d1", "--home"),
    ("status", "d1", "--home", ""),
    ("status", "d1", "extra"),
    ("send", "d1"),
    ("send", "d1", "-x"),
    ("respond", "d1", "r1", "maybe"),
    ("respond", "d1", "r1", "deny", "--session"),
    ("status", "--help"),
    ("ping", "-h"),
    ("status", "d1", "--", "x"),
]


def test_every_case_prints_and_exits_the_same_both_ways(demo: HostProc) -> None:
    with demo.raw() as conn:  # (then both ways' sends with this key are duplicates)
        assert conn.request("host.send", {"input": "hi", "key": "k1"})["success"]
    codes = {case: same(demo.home, *case)[0] for case in CASES}
    # the cases do reach what they name: a few of them, pinned
    assert codes[("status", "d1")] == 0 and codes[("send", "d1", "hello", "there")] == 0
    assert codes[("status", "nope")] == 3 and codes[("ping", "../bad")] == 2
    assert codes[("respond", "d1", "r-none", "allow")] == 9 and codes[("send", "d1")] == 2


def test_send_from_stdin_and_with_another_home(demo: HostProc, tmp_path: Path) -> None:
    code, out, _ = same(demo.home, "send", "d1", "-", stdin="line one\nline two\n")
    assert code == 0 and out.startswith("sent to d1 at offset")
    # --home wins over the environment's home (which has no host)
    elsewhere = tmp_path / "empty-home"
    elsewhere.mkdir()
    code, out, _ = same(elsewhere, "status", "d1", "--home", str(demo.home))
    assert code == 0 and "agent:" in out and "T-1" in out
    assert same(demo.home, "status", "d1", "--home", str(tmp_path / "no-such-home"))[0] == 3
    (tmp_path / "file").write_text("")
    assert same(demo.home, "status", "d1", "--home", str(tmp_path / "file"))[0] == 2


def test_pending_and_respond_to_a_waiting_request(demo: HostProc) -> None:
    def ask() -> str:
        with demo.raw() as conn:
            conn.request("host.attach", {"offset": 1 << 40})
            conn.send("host.send", {"input": "/ask"})
            events = events_until(conn, is_state("waiting"))
        (asked,) = [e for e in events if e["type"] == "permission_request"]
        rid: str = asked["request"]["request_id"]
        return rid

    rid = ask()
    code, out, _ = same(demo.home, "pending", "d1")
    assert code == 0 and rid in out and "touch demo-was-here" in out
    code, out, _ = same(demo.home, "pending", "d1", "--json")
    assert [r["request_id"] for r in json.loads(out)] == [rid]
    # an answer is given once: each way answers a request of its own
    fast = run(demo.home, "respond", "d1", rid, "allow")
    assert fast == (0, f"allowed {rid} for d1\n", "")
    demo.wait_state("idle")
    other = ask()
    slow = run(demo.home, "respond", "d1", other, "allow", fast=False)
    assert slow == (0, fast[1].replace(rid, other), "")
    demo.wait_state("idle")
    denied = [run(demo.home, "respond", "d1", ask(), "deny", "--json", fast=f) for f in (1, 0)]
    assert denied[0][0] == denied[1][0] == 0
    assert {**json.loads(denied[0][1]), "request_id": ""} == {
        **json.loads(denied[1][1]),
        "request_id": "",
    }
    demo.wait_state("idle")
    last = ask()
    fast = run(demo.home, "respond", "d1", last, "allow", "--session")
    assert fast == (0, f"allowed {last} for d1 (and the same for the rest of the session)\n", "")


def test_output_to_a_closed_pipe(demo: HostProc) -> None:
    def closed(fast: bool) -> tuple[int, bytes]:
        read, write = os.pipe()
        os.close(read)  # (before the child starts: its write fails, every time)
        env = {**os.environ, "AGENTHOST_HOME": str(demo.home)}
        env.pop("AGENTHOST_NO_FAST", None)
        if not fast:
            env["AGENTHOST_NO_FAST"] = "1"
        try:
            done = subprocess.run(
                [*AGENTHOST, "status", "d1"], stdout=write, stderr=subprocess.PIPE, env=env
            )
        finally:
            os.close(write)
        return done.returncode, done.stderr

    assert closed(True) == closed(False) == (1, b"")


def test_a_host_that_has_ended(host_factory: HostFactory) -> None:
    host = host_factory("d2", "--agent", "demo")
    host.wait_state("idle")
    assert run(host.home, "stop", "d2", "--force")[0] == 0
    wait_for(lambda: not host.alive(), what="the host exited")
    for case in [("status", "d2"), ("send", "d2", "hi"), ("ping", "d2", "--json")]:
        code, _, err = same(host.home, *case)
        assert code == 3 or "no host" in err


@contextlib.contextmanager
def fake_host(path: Path, answer: Callable[[dict[str, object]], bytes]) -> Iterator[list[str]]:
    """A Unix socket server at ``path`` that answers each request line with
    ``answer(request)`` (or its garbage when the line is not JSON); yield the types of
    the requests it got."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    seen: list[str] = []

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            buf = b""
            while data := conn.recv(65536):
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        request = json.loads(line)
                    except ValueError:
                        request = {}
                    seen.append(str(request.get("type")))
                    conn.sendall(answer(request))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield seen
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()


def _ping_then(garbage: bytes) -> Callable[[dict[str, object]], bytes]:
    def answer(request: dict[str, object]) -> bytes:
        if request.get("type") != "host.ping":
            return garbage
        payload = {
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "min_protocol_version": "1.0",
            "uptime": "1s",
            "started_at": "2026-01-01T00:00:00Z",
        }
        body = {"kind": "response", "type": "host.ping", "id": request.get("id")}
        return json.dumps({**body, "success": True, "payload": payload}).encode() + b"\n"

    return answer


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\xffnonsense\n", b"[1, 2]\n", b'{"kind": "response", "success": true, "id": 7}\n'],
)
def test_a_host_that_speaks_nonsense(home: Path, garbage: bytes) -> None:
    (home / "hosts").mkdir(mode=0o700)
    with fake_host(home / "hosts" / "g1.sock", lambda _: garbage):
        for case in [("status", "g1"), ("send", "g1", "hi"), ("pending", "g1", "--json")]:
            code, _, err = same(home, *case)
            assert code == 5 and "Traceback" not in err
    with fake_host(home / "hosts" / "g2.sock", _ping_then(garbage)) as seen:
        # a status is read-only: asked again the click way, which says it in its words
        code, _, err = same(home, "status", "g2")
        assert code == 5 and "Traceback" not in err
        # a send that reached the host is never sent again: the fast path reports it
        seen.clear()
        fast = run(home, "send", "g2", "hi")
        assert fast[0] == 5 and fast[2].startswith("agenthost: error: ")
        assert "Traceback" not in fast[2] and seen.count("host.send") == 1


def test_an_answer_of_another_shape_is_a_protocol_error(home: Path) -> None:
    (home / "hosts").mkdir(mode=0o700)

    def answer(request: dict[str, object]) -> bytes:
        if request.get("type") == "host.ping":
            return _ping_then(b"")(request)
        body = {"kind": "response", "id": request.get("id"), "success": True}
        return json.dumps({**body, "payload": {"request_id": 5}}).encode() + b"\n"

    with fake_host(home / "hosts" / "g4.sock", answer) as seen:
        code, out, err = run(home, "respond", "g4", "r1", "allow")
        assert code == 5 and not out and err.startswith("agenthost: error: malformed")
        assert "Traceback" not in err and seen.count("host.respond") == 1
        # the click path says the same in its words, with the same status
        assert same(home, "status", "g4")[0] == 5


def test_a_frame_over_the_client_limit_is_a_protocol_error(home: Path) -> None:
    (home / "hosts").mkdir(mode=0o700)
    huge = b"x" * ((64 << 20) + 2)
    with fake_host(home / "hosts" / "g3.sock", _ping_then(huge)) as seen:
        code, out, err = run(home, "send", "g3", "hi", "--json")
    assert code == 5 and json.loads(out)["reason"] == "protocol" and not err
    assert seen.count("host.send") == 1


HEAVY = {"click", "pydantic", "asyncio", "structlog", "agenthost.models"}


def loaded(home: Path, *args: str, fast: bool) -> set[str]:
    """The modules ``agenthost ARGS`` imports."""
    env = {**os.environ, "AGENTHOST_HOME": str(home)}
    env.pop("AGENTHOST_NO_FAST", None)
    if not fast:
        env["AGENTHOST_NO_FAST"] = "1"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agenthost", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}


def test_the_fast_path_ran(demo: HostProc) -> None:
    """Not vacuous: the fast runs above loaded neither click nor pydantic."""
    for case in [("status", "d1"), ("ping", "d1"), ("pending", "d1"), ("send", "d1", "x")]:
        assert not loaded(demo.home, *case, fast=True) & (HEAVY | {"typing"}), case
    assert not loaded(demo.home, "list", fast=True) & HEAVY
    assert loaded(demo.home, "status", "d1", fast=False) >= {"click", "pydantic", "asyncio"}


# `agenthost list` (agenthost/cli/fastlist.py): a table's UPTIME cell moves between two
# runs, and the columns' widths with it
_UPTIME_CELL = re.compile(r"(?<=\s)(\d+h)?(\d+m)?\d+(\.\d+)?s(?=\s)")


def same_list(home: Path, *args: str) -> Run:
    """``agenthost list ARGS`` both ways (the table's uptime and spacing aside)."""

    def flat(result: Run) -> Run:
        code, out, err = result
        out = "\n".join(_UPTIME_CELL.sub("<t>", " ".join(ln.split())) for ln in out.split("\n"))
        return code, out, err

    fast, slow = flat(run(home, "list", *args)), flat(run(home, "list", *args, fast=False))
    assert fast == slow, args
    return fast


LIST_CASES = [
    (),
    ("--json",),
    ("--project", "site"),
    ("--project", "site", "--json"),
    ("--project", "none"),
    ("--timeout", "0.5", "--json"),
    # usage errors and what the fast path leaves to click
    ("--timeout", "0.01"),
    ("--timeout", "x"),
    ("--timeout",),
    ("extra",),
    ("--json", "--json", "--bogus"),
    ("--help",),
]


def test_list_prints_and_exits_the_same_both_ways(
    host_factory: HostFactory, home: Path, tmp_path: Path
) -> None:
    none = {args: same_list(home, *args) for args in LIST_CASES}
    assert none[()] == (0, "", "no agents\n") and none[("--json",)] == (0, "[]\n", "")
    hosts = [
        host_factory(agent_id, "--agent", "demo", "--project", project, "--task", "T")
        for agent_id, project in [("c1", "site"), ("a2", ""), ("b3", "site")]
    ]
    for host in hosts:
        host.wait_state("idle")
    three = {args: same_list(home, *args) for args in LIST_CASES}
    assert [ln.split()[0] for ln in three[()][1].splitlines()] == ["AGENT", "a2", "b3", "c1"]
    assert [i["agent_id"] for i in json.loads(three[("--project", "site", "--json")][1])] == [
        "b3",
        "c1",
    ]
    assert three[("--timeout", "0.01")][0] == 2 and three[("extra",)][0] == 2
    # --home wins over the environment's home
    other = tmp_path / "h"
    assert same_list(home, "--home", str(other)) == (0, "", "no agents\n")


def test_list_with_a_dead_socket_and_garbage_from_a_fake_host(
    host_factory: HostFactory, home: Path
) -> None:
    host_factory("d1", "--agent", "demo").wait_state("idle")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(home / "hosts" / "x1.sock"))
    dead.close()  # (a socket file nobody listens on, and no lock: a dead host's)
    code, out, _ = same_list(home)
    assert code == 0 and "x1 stale" in out and "d1 idle" in out
    for garbage in [b"\x00\xffnonsense\n", b"[1, 2]\n", b'{"kind":"response","success":true}\n']:
        with fake_host(home / "hosts" / "g1.sock", _ping_then(garbage)):
            code, out, err = same_list(home, "--json")
            assert code == 0 and "Traceback" not in err
            items = {i["agent_id"]: i for i in json.loads(out)}
            assert not items["g1"]["reachable"] and items["d1"]["reachable"]
        (home / "hosts" / "g1.sock").unlink()


def test_list_with_a_host_that_never_answers(home: Path) -> None:
    (home / "hosts").mkdir(mode=0o700)
    with fake_host(home / "hosts" / "s1.sock", lambda _: b""), lock_held(home, "s1"):
        code, out, err = same_list(home, "--timeout", "0.3")
    assert code == 0 and out.split("\n")[1].startswith("s1 unreachable") and not err


@contextlib.contextmanager
def lock_held(home: Path, agent_id: str) -> Iterator[None]:
    """The host's lock held (by this process), as a live host holds it."""
    import fcntl

    with open(home / "hosts" / f"{agent_id}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def test_list_with_a_daemon_and_with_its_registry_only(
    world: DaemonWorld, host_factory: HostFactory
) -> None:
    daemon = world.start_daemon()
    world.spawn("w1", ["sh", "-c", "echo hi; exec sleep 600"], project="site")
    host_factory("d1", "--agent", "demo").wait_state("idle")
    # (the daemon answers a spawn once the host serves)
    for args in [(), ("--json",), ("--project", "site")]:
        code, out, _ = same_list(world.home, *args)
        assert code == 0 and "w1" in out and ("d1" in out) == (args != ("--project", "site"))
    assert not loaded(world.home, "list", fast=True) & HEAVY  # (the daemon asked, fast)
    daemon.signal(signal.SIGTERM)
    daemon.wait_exit()
    code, out, err = same_list(world.home)
    assert code == 0 and "w1" in out and err.startswith("(no daemon answers")
