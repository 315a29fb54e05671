"""Bad input from every side gets a clear answer and takes nothing down.

Socket frames (malformed, oversized, wrong shapes, pipelined, half-closed, random),
peers of another uid, and agents printing garbage.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
from typing import Any

import psutil
import pytest

from badframes import BAD_FRAMES
from conftest import HostFactory
from hosttools import PY, RawConn, lines_agent, wait_for

CAT = ["cat"]


def error_of(conn: RawConn, frame: bytes) -> dict[str, Any]:
    conn.send_raw(frame)
    resp = conn.response()
    assert resp["success"] is False and "payload" not in resp
    return resp


def test_bad_frames_get_errors_and_connection_stays_usable(host_factory: HostFactory) -> None:
    # every frame on one connection of one real host (what each frame gets is also
    # proven in memory, frame by frame: tests/unit/test_wire_connection.py)
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        for frame, code, echo_type in BAD_FRAMES:
            resp = error_of(conn, frame + b"\n")
            assert (resp["code"], resp["type"]) == (code, echo_type), (frame[:60], resp)
            assert isinstance(resp["error"], str) and resp["error"]
            assert conn.request("host.ping")["success"]
    assert host.alive()


def test_unknown_type_message_and_id_echo(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        resp = error_of(conn, b'{"type": "host.frobnicate", "id": 17}\n')
    assert resp["error"] == "unknown message type: host.frobnicate" and resp["id"] == 17


def test_unknown_fields_are_ignored_and_minor_versions_served(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        resp = conn.request(
            "host.attach", {"offset": 0, "future": [1, 2]}, protocol_version="1.99", extra=True
        )
        assert resp["success"], resp


def test_oversized_frame_answered_then_connection_closed(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        conn.send_raw(b'{"type": "host.send", "payload": {"input": "' + b"x" * (1 << 20) + b'"}}\n')
        resp = conn.frame()
        assert resp["code"] == "frame_too_large" and resp["success"] is False
        assert conn.closed_by_peer()
    # detected without waiting for a newline, too
    with host.raw() as conn:
        conn.send_raw(b"y" * ((1 << 20) + 10))
        assert conn.frame()["code"] == "frame_too_large"
    # a frame of exactly the limit is served, one byte more is not
    pad = (1 << 20) - len(b'{"type": "host.ping", "pad": ""}')
    exact = b'{"type": "host.ping", "pad": "' + b"p" * pad + b'"}'
    assert len(exact) == 1 << 20
    with host.raw() as conn:
        conn.send_raw(exact + b"\n")
        assert conn.response()["success"]
        conn.send_raw(exact.replace(b'"pad"', b'"pad2"') + b"\n")
        assert conn.frame()["code"] == "frame_too_large"
    with host.raw() as conn:
        assert conn.request("host.status")["success"]


def test_pipelined_requests_answered_in_order(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        frames = b"".join(
            json.dumps({"type": "host.ping", "id": i}).encode() + b"\n" for i in range(3000)
        )
        conn.send_raw(frames)
        ids = [conn.response()["id"] for _ in range(3000)]
    assert ids == list(range(3000))


def test_client_not_reading_responses_is_throttled_not_buffered(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", "--client-buffer", "16384", command=CAT)
    rss_before = psutil.Process(host.pid).memory_info().rss
    hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hog.connect(str(host.socket_path))
    hog.setblocking(False)
    status = b'{"type": "host.status"}\n' * 1000
    sent = 0
    blocked = False
    for _ in range(2000):  # at most ~70 MB of requests whose answers are never read
        try:
            sent += hog.send(status)
        except BlockingIOError:
            blocked = True  # the host stopped reading: backpressure
            break
    assert blocked
    with host.raw() as other:
        assert other.request("host.ping")["success"]
    rss_after = psutil.Process(host.pid).memory_info().rss
    assert rss_after - rss_before < 64 << 20
    hog.close()
    with host.raw() as other:
        assert other.request("host.ping")["success"]


def test_half_closed_client_still_gets_its_answer(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        conn.send("host.status")
        conn.sock.shutdown(socket.SHUT_WR)
        assert conn.response()["success"]


def test_connect_disconnect_cycles_leak_no_descriptors(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    proc = psutil.Process(host.pid)
    with host.raw() as conn:
        conn.request("host.ping")
    before = proc.num_fds()
    for i in range(1000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(host.socket_path))
        if i % 3 == 0:
            s.sendall(b'{"type": "host.ping"}\n')
        elif i % 3 == 1:
            s.sendall(b'{"type": "host.att')  # gone mid-frame
        s.close()
    with host.raw() as conn:
        assert conn.request("host.ping")["success"]
    wait_for(lambda: proc.num_fds() <= before, what="descriptors released")


def test_random_garbage_never_takes_the_host_down(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    rng = random.Random(1234)
    pieces = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"\\", b"\n", b"\xff", b"null"]
    pieces += [b'"type"', b'"host.attach"', b'"payload"', b"1e999", b"-0", b"\x00"]
    for _round in range(20):
        with host.raw() as conn:
            blob = b"".join(
                rng.choice(pieces) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 40))
                for _ in range(400)
            )
            conn.send_raw(blob + b"\n")
            conn.send("host.ping", id="sentinel")
            # every frame is answered (an error, or a success for a lucky valid one),
            # and the connection survives to answer the sentinel
            conn.read_until(lambda f: f.get("id") == "sentinel" and f.get("success") is True)
    assert host.alive()
    assert host.agent()["state"] == "running"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another uid")
def test_peer_of_another_uid_is_refused(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('EACCES'); sys.exit(0)\n"
        "try:\n"
        '    s.sendall(b\'{"type": "host.status"}\\n\')\n'
        "except BrokenPipeError:\n"
        "    pass  # refused and closed before we wrote; the answer is still readable\n"
        "print(s.makefile().readline().strip())\n"
    )

    def as_nobody() -> str:
        out = subprocess.run(
            [PY, "-c", probe, str(host.socket_path)], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    # By default the private directory keeps other users out entirely...
    os.chmod(host.home, 0o711)
    assert as_nobody() == "EACCES"
    # ...and should the permissions be loosened, the peer check still refuses them.
    os.chmod(host.socket_path.parent, 0o711)
    os.chmod(host.socket_path, 0o666)
    resp = json.loads(as_nobody())
    assert resp["success"] is False and resp["code"] == "forbidden"
    assert "payload" not in resp
    with host.raw() as conn:  # the owner still gets in
        assert conn.request("host.status")["success"]


def test_agent_printing_invalid_utf8_loses_nothing(host_factory: HostFactory) -> None:
    code = (
        "import sys\n"
        "sys.stdin.readline()\n"
        "sys.stdout.buffer.write(b'ok \\xff\\xfe caf\\xc3\\xa9 \\xe2\\x82\\n')\n"
        "sys.stdout.buffer.flush()\n"
        "sys.stdin.readline()\n"
    )
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "go"})
        out = conn.read_until(lambda f: f.get("type") == "output")
    assert out["data"] == "ok \\xff\\xfe café \\xe2\\x82" and out["escaped"] is True


def test_structured_agent_printing_garbage_is_kept_and_reported(
    host_factory: HostFactory,
) -> None:
    host = host_factory("a1", "--agent", "demo")
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.send("host.send", {"input": "/garbage"})
        events = []

        def final_answer(e: dict[str, Any]) -> bool:
            entry = e.get("chat_entry") or {}
            return str(entry.get("content", "")).startswith('You said "garbage survived"')

        # (the garbage includes a malformed "result" line, which ends a turn early)
        while not (events and final_answer(events[-1])):
            f = conn.frame()
            if f["kind"] == "event" and f["offset"] > 1:
                events.append(f)
    raw = [e["data"] for e in events if e["type"] == "output"]
    assert "this is not json" in raw  # every line kept as it was printed
    assert any(r.startswith("\\xff\\xfe") for r in raw)
    errors = [e["error"] for e in events if e["type"] == "error"]
    # text, truncated object, binary, 100k-deep nesting: each reported, none crashes
    assert sum("not JSON" in e for e in errors) == 4
    assert any("[[[[" in e for e in errors)
    assert host.alive() and host.agent()["pid"] > 0


def test_agent_never_reading_stdin_gets_busy_not_stuck(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=["sleep", "1000"])
    chunk = "z" * 900_000
    with host.raw() as conn:
        codes = []
        for _ in range(12):
            resp = conn.request("host.send", {"input": chunk})
            codes.append(resp.get("code"))
            if resp.get("code") == "busy":
                break
            # status is served promptly while the agent's stdin is full
            assert conn.request("host.status")["success"]
    assert codes[-1] == "busy" and codes[0] is None
    assert host.agent()["state"] == "running"


def test_send_to_agent_that_closed_stdin(host_factory: HostFactory) -> None:
    code = (
        "import os, sys\nos.close(0)\nprint('closed', flush=True)\nimport time\ntime.sleep(1000)\n"
    )
    host = host_factory("a1", "--agent", "lines", command=lines_agent(code))
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 0})
        conn.read_until(lambda f: f.get("data") == "closed")
        codes = set()
        for _ in range(50):  # the first writes may still be accepted by the pipe layer
            resp = conn.request("host.send", {"input": "hello"})
            codes.add(resp.get("code"))
            if resp.get("code") == "agent_not_running":
                break
        assert "agent_not_running" in codes
        assert conn.request("host.ping")["success"]


def test_client_frames_split_byte_by_byte(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        for byte in b'{"type": "host.ping", "id": "slow"}\r\n':
            conn.send_raw(bytes([byte]))
        resp = conn.response()
    assert resp["id"] == "slow" and resp["success"]


def test_blank_lines_are_ignored(host_factory: HostFactory) -> None:
    host = host_factory("a1", "--agent", "lines", command=CAT)
    with host.raw() as conn:
        conn.send_raw(b"\n\n\r\n")
        assert conn.request("host.ping")["success"]
