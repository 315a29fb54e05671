"""A terminal agent (``--agent pty``) through the gateway's HTTP API: ``GET
.../screen``, ``POST .../input``, ``.../resize`` and ``.../signal``, against a real host
running tests/fixtures/tty_agent.py in its pseudo-terminal (which logs every byte it
reads). The scopes by their negatives (read cannot type, send cannot signal, control
cannot type), garbage bodies (400 before the host is asked: nothing reaches the agent),
and the screen's offset as the place the event stream resumes from, exactly once."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.web.tokens import TokenStore

from hosttools import PY, HostProc, wait_for
from webtools import Gateway, sse_events, take

TTY_AGENT = str(Path(__file__).resolve().parents[1] / "fixtures" / "tty_agent.py")


def start_tty(
    host_factory: Callable[..., HostProc], log: Path, agent_id: str = "t1", *args: str
) -> HostProc:
    """A host running the tty agent, which appends what it reads to ``log``."""
    return host_factory(
        agent_id,
        "--agent",
        "pty",
        *args,
        command=[PY, TTY_AGENT],
        env={"TTY_AGENT_LOG": str(log)},
    )


def typed(log: Path) -> bytes:
    return log.read_bytes() if log.exists() else b""


def screen_lines(gateway: Gateway, key: str = "t1") -> list[str]:
    got = gateway.client().get(f"/api/agents/{key}/screen")
    assert got.status_code == 200, got.text
    lines: list[str] = got.json()["lines"]
    return lines


def control_token(gateway: Gateway, name: str = "ops") -> str:
    """A token with the control scope (made in the store: the gateway re-reads it)."""
    return TokenStore(gateway.home).add(name, ["control"])


def test_the_screen_keys_sizes_and_signals_of_a_terminal_agent(
    gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    api = gateway.client()
    status = api.get("/api/agents/t1").json()
    assert status["agent"]["terminal"] == {"cols": 80, "rows": 24}
    wait_for(lambda: screen_lines(gateway)[:2] == ["tty agent ready", "size: 80x24"])
    screen = api.get("/api/agents/t1/screen").json()
    assert set(screen) >= {"offset", "cols", "rows", "cursor", "lines", "dump", "alternate"}
    assert (screen["cols"], screen["rows"], len(screen["lines"])) == (80, 24, 24)

    # keys: text as UTF-8, and any bytes in base64
    assert api.post("/api/agents/t1/input", json={"data": "hé"}).json()["ok"] is True
    raw = b"\x00\x1b[A\xff"
    sent = api.post("/api/agents/t1/input", json={"data_b64": base64.b64encode(raw).decode()})
    assert sent.status_code == 200, sent.text
    wait_for(lambda: typed(log) == "hé".encode() + raw)

    # a size: the terminal takes it (the latest client's), and the program is told
    resized = api.post("/api/agents/t1/resize", json={"cols": 100, "rows": 30})
    assert resized.json() == {"cols": 100, "rows": 30}
    wait_for(lambda: screen_lines(gateway)[1] == "size: 100x30")
    assert api.get("/api/agents/t1").json()["agent"]["terminal"] == {"cols": 100, "rows": 30}

    # a signal to the foreground process group: SIGTERM ends the program
    assert api.post("/api/agents/t1/signal", json={"signal": "SIGWINCH"}).status_code == 200
    assert api.post("/api/agents/t1/signal", json={"signal": "SIGTERM"}).status_code == 200
    wait_for(lambda: api.get("/api/agents/t1").json()["agent"]["state"] != "running")


def test_the_stream_after_a_screen_continues_it_exactly_once(
    gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    api = gateway.client()
    wait_for(lambda: screen_lines(gateway)[0] == "tty agent ready")
    screen = api.get("/api/agents/t1/screen").json()
    api.post("/api/agents/t1/input", json={"data": "x"})
    with api.stream("GET", f"/api/agents/t1/events?after={screen['offset']}") as stream:
        events = sse_events(stream)
        first = take(events, 1)[0]
        assert int(first.id or 0) == screen["offset"] + 1
        data = first.json()
        while data["type"] != "terminal" or "got: x" not in data.get("data", ""):
            data = next(events).json()
    # as of an older offset the journal keeps: the screen then
    assert api.get("/api/agents/t1/screen?offset=1").json()["offset"] == 1


def test_scopes_are_enforced_by_their_negatives(
    gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    reader = gateway.client(gateway.add_token("viewer", "read"))
    sender = gateway.client(gateway.add_token("typist", "send"))
    controller = gateway.client(control_token(gateway))
    wait_for(lambda: reader.get("/api/agents/t1/screen").status_code == 200)
    refused = [
        (reader, "input", {"data": "r"}),
        (reader, "resize", {"cols": 50, "rows": 10}),
        (reader, "signal", {"signal": "SIGKILL"}),
        (sender, "signal", {"signal": "SIGKILL"}),
        (controller, "input", {"data": "c"}),
        (controller, "resize", {"cols": 50, "rows": 10}),
    ]
    for client, what, body in refused:
        got = client.post(f"/api/agents/t1/{what}", json=body)
        assert got.status_code == 403, (what, got.text)
        assert got.json()["code"] == "forbidden"
    # another site's page, with the admin token: refused before anything
    evil = gateway.client(headers={"Origin": "https://evil.example"})
    assert evil.post("/api/agents/t1/input", json={"data": "e"}).status_code == 403
    assert gateway.client(None).post("/api/agents/t1/input", json={"data": "n"}).status_code == 401
    assert gateway.client(None).get("/api/agents/t1/screen").status_code == 401
    # what each scope may do, it does
    assert sender.post("/api/agents/t1/input", json={"data": "s"}).status_code == 200
    assert controller.post("/api/agents/t1/signal", json={"signal": "SIGWINCH"}).status_code == 200
    wait_for(lambda: typed(log) == b"s")
    assert api_state(gateway) == "running"


def api_state(gateway: Gateway) -> str:
    state: str = gateway.client().get("/api/agents/t1").json()["agent"]["state"]
    return state


GARBAGE: list[tuple[str, Any]] = [
    ("input", b"not json"),
    ("input", b""),
    ("input", b"[1, 2]"),
    ("input", b'"a string"'),
    ("input", {}),
    ("input", {"data": "a", "data_b64": "YQ=="}),
    ("input", {"data": 5}),
    ("input", {"data": ["a"]}),
    ("input", {"data": ""}),
    ("input", {"data_b64": ""}),
    ("input", {"data_b64": "not base64!"}),
    ("input", {"data_b64": "YQ"}),  # padding missing
    ("input", {"data_b64": "YQ==\n"}),
    ("input", {"data_b64": "é"}),
    ("input", {"data": "a", "extra": 1}),
    ("input", b'{"data": "\\ud800"}'),  # a lone surrogate is no text
    ("resize", {}),
    ("resize", {"cols": 80}),
    ("resize", {"cols": "80", "rows": "24"}),
    ("resize", {"cols": 1, "rows": 24}),
    ("resize", {"cols": 1001, "rows": 24}),
    ("resize", {"cols": 80, "rows": 0}),
    ("resize", {"cols": 80, "rows": 1001}),
    ("resize", {"cols": 80.5, "rows": 24}),
    ("resize", {"cols": True, "rows": 24}),
    ("resize", {"cols": -80, "rows": 24}),
    ("resize", {"cols": 10**30, "rows": 24}),
    ("resize", {"cols": 80, "rows": 24, "pixels": 1}),
    ("signal", {}),
    ("signal", {"signal": "SIGSEGV"}),
    ("signal", {"signal": "sigint"}),
    ("signal", {"signal": 2}),
    ("signal", {"signal": "SIGINT\x00"}),
    ("signal", {"signal": "SIGINT", "pid": 1}),
]


def test_garbage_bodies_are_400_and_reach_nothing(
    gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path
) -> None:
    log = tmp_path / "typed"
    start_tty(host_factory, log)
    api = gateway.client()
    wait_for(lambda: screen_lines(gateway)[0] == "tty agent ready")
    for what, body in GARBAGE:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        got = api.post(
            f"/api/agents/t1/{what}",
            content=content,
            headers={"Content-Type": "application/json"},
        )
        assert got.status_code == 400, (what, body, got.text)
        assert got.json()["code"] == "bad_request", (what, body)
    too_big = api.post("/api/agents/t1/input", json={"data": "x" * (300 * 1024)})
    assert too_big.status_code == 413
    for query in ("offset=-1", "offset=x", "offset=1e3", "offset=" + "9" * 40):
        assert api.get(f"/api/agents/t1/screen?{query}").status_code == 400, query
    for path in ("/api/agents/nope/screen", "/api/agents/..%2Fx/screen", "/api/agents/a@b/screen"):
        assert api.get(path).status_code == 404, path
    assert api.post("/api/agents/nope/input", json={"data": "x"}).status_code == 404
    assert api.get("/api/agents/t1/input").status_code == 405
    assert api.post("/api/agents/t1/screen").status_code == 405
    # the size and the program are as they were, and not one byte reached it
    assert api.get("/api/agents/t1").json()["agent"]["terminal"] == {"cols": 80, "rows": 24}
    assert api.post("/api/agents/t1/input", json={"data": "."}).status_code == 200
    wait_for(lambda: typed(log) == b".")


def test_a_conversation_agent_has_no_terminal(
    gateway: Gateway, host_factory: Callable[..., HostProc]
) -> None:
    host_factory("demo")
    api = gateway.client()
    assert "terminal" not in api.get("/api/agents/demo").json()["agent"]
    for method, path, body in [
        ("GET", "screen", None),
        ("POST", "input", {"data": "x"}),
        ("POST", "resize", {"cols": 80, "rows": 24}),
        ("POST", "signal", {"signal": "SIGINT"}),
    ]:
        got = api.request(method, f"/api/agents/demo/{path}", json=body)
        assert got.status_code == 400, (path, got.text)
        assert got.json()["code"] == "invalid_payload"
        assert "not a terminal agent" in got.json()["error"]


@pytest.mark.parametrize("fixed", ["60x20"])
def test_a_fixed_size_is_kept_whoever_resizes(
    gateway: Gateway, host_factory: Callable[..., HostProc], tmp_path: Path, fixed: str
) -> None:
    start_tty(host_factory, tmp_path / "typed", "t1", "--size", fixed)
    api = gateway.client()
    resized = api.post("/api/agents/t1/resize", json={"cols": 100, "rows": 30})
    assert resized.json() == {"cols": 60, "rows": 20}
    wait_for(lambda: screen_lines(gateway)[1:2] == ["size: 60x20"])
