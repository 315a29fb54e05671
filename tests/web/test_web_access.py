"""The gateway's decisions without a server (agenthost.web.access, .payloads, .tokens):
scopes, cookies, Host and Origin checks, bodies, error mapping, the token store."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import pytest

from agenthost.errors import (
    AgentNotRunning,
    Busy,
    ConfigError,
    HostNotFound,
    InternalError,
    NotConnected,
    RemoteError,
    RequestTimeout,
    UnknownRequest,
)
from agenthost.web import access
from agenthost.web.access import Session
from agenthost.web.agents import Agents
from agenthost.web.app import make_app
from agenthost.web.gateway import Gateway
from agenthost.web.payloads import (
    HttpError,
    fields,
    from_library,
    json_object,
    parse_key,
    query_int,
    sse_event,
    sse_named,
)
from agenthost.web.server import Options, loopback_or_tls, parse_listen, url
from agenthost.web.tokens import TokenStore, load_secret

SECRET = b"k" * 64


@pytest.mark.parametrize(
    ("granted", "effective"),
    [
        ([], {"read"}),
        (["read"], {"read"}),
        (["send"], {"read", "send"}),
        (["respond", "send"], {"read", "send", "respond"}),
        (["admin"], {"read", "send", "respond", "control", "admin"}),
        (["control"], {"read", "control"}),
        (["root", "READ", ""], {"read"}),
    ],
)
def test_scopes(granted: list[str], effective: set[str]) -> None:
    assert access.effective_scopes(granted) == effective
    for scope in access.SCOPES:
        assert access.allows(granted, scope) == (scope in effective)


def test_a_signed_session_reads_back_and_nothing_else_does() -> None:
    session = Session("admin", "abc123", 1_000_000)
    value = access.sign_session(SECRET, session)
    assert access.read_session(SECRET, value, 1_000_010) == session
    assert access.read_session(b"other" * 10, value, 1_000_010) is None
    assert access.read_session(SECRET, value, 1_000_000 + access.SESSION_SECONDS + 1) is None
    assert access.read_session(SECRET, value, 999_000) is None  # issued in the future
    body, mac = value.rsplit(".", 1)
    for forged in [
        value.replace("admin", "other"),
        body + "." + mac[::-1],
        body,
        "." + mac,
        "",
        "v1.a.b.c.d",
        "v2.admin.abc123.1000000." + mac,
        value + "x",
        "\x00" * 40,
    ]:
        assert access.read_session(SECRET, forged, 1_000_010) is None, forged


def test_redact() -> None:
    token = access.new_token()
    assert access.redact(f"/api/agents/{token}/x") == "/api/agents/aht_.../x"
    assert access.redact("/api/agents/a1") == "/api/agents/a1"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer   abc ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("", None),
        (None, None),
        ("abc", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert access.bearer_token(header) == token


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:8765", True),
        ("127.0.0.1", True),
        ("[::1]:8765", True),
        ("LOCALHOST:1", True),
        ("localhost.", True),
        ("10.1.2.3:80", True),  # an address typed by the user: no rebinding there
        ("gw.example:8765", True),  # listed
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.evil.example", False),
        ("", False),
        (None, False),
        ("[::1", False),
        ("host:port", False),
        ("host:99999", False),
        (":80", False),
        ("[::1]x", False),
    ],
)
def test_host_allowed(host: str | None, ok: bool) -> None:
    assert access.host_allowed(host, {"gw.example"}) is ok


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "ok"),
    [
        (None, "127.0.0.1:8765", "http", True),
        ("http://127.0.0.1:8765", "127.0.0.1:8765", "http", True),
        ("HTTP://127.0.0.1:8765", "127.0.0.1:8765", "http", True),
        ("http://localhost", "localhost:80", "http", True),
        ("https://gw.example", "gw.example", "https", True),
        ("null", "127.0.0.1:8765", "http", False),
        ("", "127.0.0.1:8765", "http", False),
        ("http://127.0.0.1:8766", "127.0.0.1:8765", "http", False),
        ("https://127.0.0.1:8765", "127.0.0.1:8765", "http", False),
        ("http://evil.example", "127.0.0.1:8765", "http", False),
        ("http://127.0.0.1:8765/path", "127.0.0.1:8765", "http", False),
        ("http://127.0.0.1:8765", "", "http", False),
        ("file://", "127.0.0.1:8765", "http", False),
    ],
)
def test_origin_allowed(origin: str | None, host: str, scheme: str, ok: bool) -> None:
    assert access.origin_allowed(origin, host, scheme) is ok


def test_a_proxys_public_origin_is_allowed_too() -> None:
    public = access.parse_origin("https://Agents.Example/")
    assert public == ("https", "agents.example", 443)
    also = [public]
    assert access.origin_allowed("https://agents.example", "127.0.0.1:8765", "http", also)
    assert access.origin_allowed("https://agents.example:443", "agents.example", "http", also)
    for other in ["http://agents.example", "https://agents.example:8443", "null",
                  "https://evil.example", "https://agents.example.evil"]:  # fmt: skip
        assert not access.origin_allowed(other, "127.0.0.1:8765", "http", also), other
    for bad in ["agents.example", "ftp://x", "https://", "https://a/b", "https://u@a",
                "https://a:0", ""]:  # fmt: skip
        assert access.parse_origin(bad) is None, bad


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
     ("example.com", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert access.is_loopback(host) is loopback


def test_json_bodies_and_fields() -> None:
    assert json_object(b'{"a": 1}') == {"a": 1}
    assert json_object(b" ", empty_ok=True) == {}
    for bad in [b"", b"[1]", b"nul", b"\xff", b'"x"', b"{"]:
        with pytest.raises(HttpError) as caught:
            json_object(bad)
        assert caught.value.status == 400
    assert fields({"a": "x", "b": None}, {"a": str}, {"b": int}) == {"a": "x"}
    assert fields({"t": 1.5}, {}, {"t": (int, float)}) == {"t": 1.5}
    for obj in [{}, {"a": 1}, {"a": True}, {"a": "x", "c": 1}, {"a": "x", "b": True}]:
        with pytest.raises(HttpError):
            fields(obj, {"a": str}, {"b": int})
    assert fields({"f": True}, {}, {"f": bool}) == {"f": True}


def test_query_int() -> None:
    assert query_int(None, "n") is None and query_int("", "n") is None
    assert query_int("12", "n") == 12 and query_int(" 3 ", "n") == 3
    for bad in ["-1", "1.0", "x", "1e3", "9" * 19, "٣"]:
        with pytest.raises(HttpError):
            query_int(bad, "n")


def test_agent_keys() -> None:
    machines = frozenset({"me@box:2222"})
    assert str(parse_key("a1", machines)) == "a1"
    remote = parse_key("a1@me@box:2222", machines)
    assert (remote.agent_id, remote.machine) == ("a1", "me@box:2222")
    assert str(remote) == "a1@me@box:2222"
    for bad in ["", "..", "../x", "a/b", ".x", "a@other", "@me@box:2222", "x" * 65, "a\x00"]:
        with pytest.raises(HttpError) as caught:
            parse_key(bad, machines)
        assert caught.value.status == 404


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (HostNotFound("x"), 409, "agent_not_running"),
        (AgentNotRunning("x"), 409, "agent_not_running"),
        (Busy("x"), 409, "busy"),
        (UnknownRequest("x"), 404, "unknown_request"),
        (ConfigError("x"), 400, "invalid_payload"),
        (RequestTimeout("x"), 504, "host_timeout"),
        (RemoteError("x"), 502, "host_gone"),
        (NotConnected("x"), 502, "host_gone"),
        (InternalError("x"), 500, "internal"),
    ],
)
def test_library_errors_as_http(error: Exception, status: int, code: str) -> None:
    assert isinstance(error, Exception)
    mapped = from_library(error)  # type: ignore[arg-type]
    assert (mapped.status, mapped.code, mapped.body()) == (
        status,
        code,
        {"error": "x", "code": code},
    )


def test_sse_frames() -> None:
    assert sse_event(7, b'{"offset":7}') == b'id: 7\ndata: {"offset":7}\n\n'
    named = sse_named("truncated", {"a": "line\nbreak", "b": "é"})
    assert named.count(b"\n") == 3  # the JSON escapes newlines: one data line
    assert named.startswith(b"event: truncated\ndata: {") and "é".encode() in named


def test_the_token_store(home: Path) -> None:
    store = TokenStore(home)
    assert not store.exists() and store.records() == {}
    token = store.add("ci", ["send", "send"])
    assert token.startswith("aht_") and store.verify(token) is not None
    record = store.verify(token)
    assert record is not None and record.scopes == ("send",)
    assert store.verify(token + "x") is None and store.verify("") is None
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.dir.stat().st_mode) == 0o700
    other = TokenStore(home)  # another process: sees changes without a restart
    assert other.verify(token) is not None
    assert store.session_record("ci", record.token_id) is not None
    assert store.session_record("ci", "other-id") is None
    assert store.revoke("ci") and not store.revoke("ci")
    assert other.verify(token) is None
    for name, scopes in [("a b", ["read"]), ("", ["read"]), ("x", ["root"]), ("é", [])]:
        with pytest.raises(ConfigError):
            store.add(name, scopes)
    store.add("dup", [])
    with pytest.raises(ConfigError):
        store.add("dup", [])


@pytest.mark.parametrize(
    "content",
    ["", "[]", "{", '{"tokens": 5}', '{"tokens": [{"name": "x"}]}',
     '{"tokens": [{"name": "../x", "id": "i", "sha256": "h", "scopes": []}]}'],
)  # fmt: skip
def test_a_broken_token_store_is_an_error_not_an_open_door(home: Path, content: str) -> None:
    store = TokenStore(home)
    store.dir.mkdir(mode=0o700)
    store.path.write_text(content)
    os.chmod(store.path, 0o600)
    with pytest.raises(ConfigError):
        store.verify("anything")


def test_the_session_secret_is_made_once_and_private(home: Path) -> None:
    secret = load_secret(home)
    assert len(secret) >= 32 and load_secret(home) == secret
    path = home / "web" / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("short")  # not a secret we made: a new one
    assert load_secret(home) not in (secret, b"short")
    assert json.dumps(secret.decode())  # printable


def test_listen_addresses_and_the_loopback_rule() -> None:
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("localhost:80") == ("localhost", 80)
    for bad in ["", "8765", ":8765", "host:", "host:port", "host:70000", "[::1]"]:
        with pytest.raises(ConfigError):
            parse_listen(bad)
    home = Path("/nonexistent")
    assert loopback_or_tls(Options(home, "127.0.0.1", 1)) is None
    assert loopback_or_tls(Options(home, "0.0.0.0", 1, tls_cert=home)) is None
    refusal = loopback_or_tls(Options(home, "0.0.0.0", 1))
    assert refusal is not None and "--insecure-listen" in refusal
    assert url(Options(home, "::1", 1), 8765) == "http://[::1]:8765/"
    assert url(Options(home, "0.0.0.0", 1, tls_cert=home), 443) == "https://0.0.0.0:443/"


def test_the_failure_limit() -> None:
    limit = access.FailureLimit(limit=3, window=10.0, clients=2)
    for t in (0.0, 1.0, 2.0):
        assert not limit.blocked("10.0.0.1", t)
        limit.failed("10.0.0.1", t)
    assert limit.blocked("10.0.0.1", 2.5) and limit.blocked("10.0.0.1", 9.9)
    assert not limit.blocked("10.0.0.1", 10.0)  # the oldest failure is a window old
    assert not limit.blocked("10.0.0.2", 2.5)
    for who in ("127.0.0.1", "::1", None):  # never counted
        for _ in range(5):
            limit.failed(who, 3.0)
        assert not limit.blocked(who, 3.0)
    for who in ("a", "b", "c"):  # at most 2 remembered: "a" is forgotten
        for _ in range(3):
            limit.failed(who, 20.0)
    assert not limit.blocked("a", 20.0)
    assert limit.blocked("b", 20.0) and limit.blocked("c", 20.0)


@pytest.mark.asyncio
async def test_a_guesser_is_refused_for_a_while_and_nobody_else(home: Path) -> None:
    store = TokenStore(home)
    token = store.add("admin", ["admin"])
    gw = Gateway(agents=Agents(home), store=store, secret=load_secret(home))
    app = make_app(gw)

    def client(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")

    async with client("198.51.100.7") as guesser, client("198.51.100.8") as other:
        for i in range(gw.failures.limit):
            bad = {"Authorization": f"Bearer aht_guess{i}"}
            assert (await guesser.get("/api/me", headers=bad)).status_code == 401
        good = {"Authorization": f"Bearer {token}"}
        refused = await guesser.get("/api/me", headers=good)
        assert refused.status_code == 429 and refused.json()["code"] == "too_many_failures"
        login = await guesser.post("/api/login", json={"token": token})
        assert login.status_code == 429
        assert (await other.get("/api/me", headers=good)).status_code == 200
