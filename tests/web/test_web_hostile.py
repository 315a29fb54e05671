"""Hostile and broken requests on every endpoint of a real gateway: huge bodies, bad
JSON, wrong types, unknown and invalid agent ids (``..%2F`` included), unknown routes.
Each gets a JSON error with the documented status, and the gateway keeps serving."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from hosttools import DEADLINE
from webtools import Gateway, HostFactory

AGENT_POSTS = ["send", "interrupt", "respond", "stop"]
AGENT_GETS = ["", "/history", "/pending", "/events"]


def error(answer: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert answer.status_code == status, (answer.request.url, answer.status_code, answer.text)
    body: dict[str, Any] = answer.json()
    assert set(body) == {"error", "code"} and isinstance(body["error"], str), body
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def h1(host_factory: HostFactory) -> None:
    host_factory("h1")


@pytest.mark.usefixtures("h1")
def test_bodies_over_the_limit_are_413(gateway: Gateway) -> None:
    api = gateway.client()
    huge = b'{"input": "' + b"x" * (300 * 1024) + b'"}'
    paths = [f"/api/agents/h1/{p}" for p in AGENT_POSTS] + ["/api/agents", "/api/login"]
    for path in paths:
        error(api.post(path, content=huge), 413, "too_large")

    def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b"x" * 10_000

    error(api.post("/api/agents/h1/send", content=chunks()), 413, "too_large")
    head = "POST /api/agents/h1/send HTTP/1.1\r\nContent-Length: 99999999999\r\n"
    assert raw(gateway, head).startswith(b"HTTP/1.1 413 ")  # refused before any body
    assert api.get("/api/agents/h1").status_code == 200  # still serving


@pytest.mark.usefixtures("h1")
def test_bad_json_and_wrong_shapes_are_400(gateway: Gateway) -> None:
    api = gateway.client()
    garbage: list[bytes] = [
        b"",
        b"{",
        b"[]",
        b'"text"',
        b"null",
        b"\xff\xfe",
        b"{'a': 1}",
        b"1e999",
    ]
    for path in ["/api/agents/h1/send", "/api/agents/h1/respond", "/api/agents", "/api/login"]:
        for body in garbage:
            error(api.post(path, content=body), 400, "bad_request")
    bad_payloads: dict[str, list[dict[str, Any]]] = {
        "send": [{}, {"input": 5}, {"input": None}, {"input": ["a"]}, {"input": "x", "key": 1},
                 {"input": "x", "extra": True}, {"input": True}],
        "respond": [{"request_id": "r", "decision": "maybe"}, {"decision": "allow"},
                    {"request_id": 1, "decision": "allow"},
                    {"request_id": "r", "decision": "allow", "message": 3},
                    {"request_id": "r", "decision": "deny", "updated_input": "x"}],
        "stop": [{"force": "yes"}, {"timeout": -1}, {"timeout": 1e9}, {"timeout": True},
                 {"reason": 1}, {"signal": "KILL"}],
        "interrupt": [{"now": True}],
    }  # fmt: skip
    for action, payloads in bad_payloads.items():
        for payload in payloads:
            error(api.post(f"/api/agents/h1/{action}", json=payload), 400)
    for spawn in [{}, {"agent_id": 5}, {"agent_id": "ok", "command": "ls"},
                  {"agent_id": "ok", "cwd": "relative/dir"}, {"agent_id": "ok", "agent": "nope"},
                  {"agent_id": "ok", "env": {"A": 1}}, {"agent_id": "ok", "restart": "always"},
                  {"agent_id": "ok", "ring_size": 0}, {"agent_id": "ok", "bogus": 1}]:  # fmt: skip
        error(api.post("/api/agents", json=spawn), 400)
    for spawn_id in ["../x", "a/b", "", "-x", "x" * 65]:
        assert api.post("/api/agents", json={"agent_id": spawn_id}).status_code in (400, 404)


@pytest.mark.usefixtures("h1")
def test_bad_query_values_are_400(gateway: Gateway) -> None:
    api = gateway.client()
    for value in ["-1", "abc", "1.5", "9" * 30, " "]:
        error(api.get("/api/agents/h1/history", params={"limit": value}), 400)
        error(api.get("/api/agents/h1/events", params={"after": value}), 400)
        error(api.get("/api/agents/h1/events", params={"tail": value}), 400)
        if value.strip():  # a blank header is no header
            error(api.get("/api/agents/h1/events", headers={"Last-Event-ID": value}), 400)


def test_unknown_and_invalid_agents_are_404(gateway: Gateway) -> None:
    api = gateway.client()
    # ("..": a client would make /api/agents/../events /api/events: see the raw test)
    keys = ["nope", ".hidden", "-x", "a%20b", "x" * 65, "a%00b", "@", "a@",
            "a@unknown-machine", "%C3%A9"]  # fmt: skip
    for key in keys:
        for rest in AGENT_GETS:
            error(api.get(f"/api/agents/{key}{rest}"), 404, "not_found")
        for action in AGENT_POSTS:
            body = {"request_id": "r", "decision": "allow"} if action == "respond" else {}
            if action == "send":
                body = {"input": "x"}
            error(api.post(f"/api/agents/{key}/{action}", json=body), 404, "not_found")


def test_dot_dot_slash_ids_and_unknown_routes_are_404(gateway: Gateway) -> None:
    api = gateway.client()
    raw_paths = [
        "/api/agents/..%2F..%2Fetc%2Fpasswd",
        "/api/agents/..%2f",
        "/api/agents/%2E%2E%2Fweb%2Ftokens.json",
        "/api/agents/a%2Fb/history",
        "/api/agents/%2e%2e/events",
        "/api/agents/../history",
        "/api/nothing",
        "/api/agents/h1/unknown",
        "/static/..%2F..%2Fweb%2Ftokens.json",
        "/static/%2e%2e/app.py",
        "/static/nope.js",
        "/api",
    ]
    for path in raw_paths:
        answer = raw(gateway, f"GET {path} HTTP/1.1\r\n")
        assert answer.startswith(b"HTTP/1.1 404 "), (path, answer[:200])
    error(api.put("/api/agents"), 405, "method_not_allowed")
    error(api.get("/api/login"), 405)


def raw(gateway: Gateway, head: str) -> bytes:
    """Send a request line and headers exactly as written (no client normalises the
    path), with the Host and the admin token; the whole answer."""
    host, port = gateway.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=DEADLINE) as sock:
        request = (
            f"{head}Host: {host}:{port}\r\n"
            f"Authorization: Bearer {gateway.token}\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(request.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.mark.usefixtures("h1")
def test_an_unknown_permission_request_is_404_and_a_stopped_agent_409(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    api = gateway.client()
    answer = api.post("/api/agents/h1/respond", json={"request_id": "r9", "decision": "deny"})
    error(answer, 404, "unknown_request")
    stopped = api.post("/api/agents/h1/stop", json={"timeout": 5})
    assert stopped.status_code == 200 and stopped.json()["stopped"] is True
    host = host_factory("h2", "--linger", "0")
    api.post("/api/agents/h2/stop", json={"force": True})
    host.wait_exit()
    # its journal is there: the agent exists, and does not run
    error(api.post("/api/agents/h2/send", json={"input": "x"}), 409, "agent_not_running")
    error(api.get("/api/agents/h2"), 409, "agent_not_running")


def test_the_gateway_survives_a_storm_of_garbage(gateway: Gateway) -> None:
    host, port = gateway.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    for junk in [b"\x00" * 100, b"GET / HTTP/9.9\r\n\r\n", b"POST /api/login HTTP/1.1\r\n" +
                 b"Host: x\r\nContent-Length: -1\r\n\r\n", b"A" * 70000 + b"\r\n\r\n",
                 b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"]:  # fmt: skip
        with socket.create_connection((host, int(port)), timeout=DEADLINE) as sock:
            try:
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    assert gateway.client().get("/api/me").status_code == 200
