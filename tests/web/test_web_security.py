"""The gateway's security model against a real gateway process: credentials, scopes,
Origin and Host checks, the session cookie, the token store on disk, tokens kept out
of the log, and where it agrees to listen."""

from __future__ import annotations

import json
import os
import re
import ssl
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from hosttools import DEADLINE, PY
from webtools import Gateway, GatewayFactory, HostFactory

GETS = ["/api/me", "/api/agents", "/api/agents/s1", "/api/agents/s1/history",
        "/api/agents/s1/pending", "/api/agents/s1/events", "/api/events"]  # fmt: skip
POSTS = {
    "/api/agents/s1/send": ("send", {"input": "hello"}),
    "/api/agents/s1/interrupt": ("send", {}),
    "/api/agents/s1/respond": ("respond", {"request_id": "r1", "decision": "allow"}),
    "/api/agents/s1/stop": ("admin", {}),
    "/api/agents": ("admin", {"agent_id": "s2"}),
}


def test_no_or_a_bad_token_is_401_everywhere(gateway: Gateway, host_factory: HostFactory) -> None:
    host_factory("s1")
    for credentials in (None, "Bearer aht_not-a-token", "Bearer", "Basic YWRtaW46eA==", "x"):
        headers = {} if credentials is None else {"Authorization": credentials}
        api = gateway.client(None, headers=headers)
        for path in GETS:
            answer = api.get(path)
            assert answer.status_code == 401, (path, credentials, answer.text)
            assert answer.json()["code"] == "unauthorized"
        for path, (_, body) in POSTS.items():
            assert api.post(path, json=body).status_code == 401, (path, credentials)


def test_each_scope_allows_what_it_names_and_no_more(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("s1")
    tokens = {s: gateway.add_token(f"t-{s}", s) for s in ("read", "send", "respond")}
    for scope, token in tokens.items():
        api = gateway.client(token)
        assert api.get("/api/agents/s1").status_code == 200  # every scope reads
        for path, (needed, body) in POSTS.items():
            answer = api.post(path, json=body)
            if needed == scope:
                assert answer.status_code not in (401, 403), (scope, path, answer.text)
            else:
                assert answer.status_code == 403, (scope, path, answer.text)
                assert answer.json()["code"] == "forbidden"
    me = gateway.client(tokens["send"]).get("/api/me").json()
    assert me == {"name": "t-send", "scopes": ["read", "send"]}


@pytest.mark.parametrize(
    "origin", ["null", "http://evil.example", "https://127.0.0.1", "http://127.0.0.1:1", "x"]
)
def test_a_post_from_another_origin_is_403_with_bearer_or_cookie(
    gateway: Gateway, host_factory: HostFactory, origin: str
) -> None:
    host = host_factory("s1")
    bearer = gateway.client(headers={"Origin": origin})
    for path, (_, body) in POSTS.items():
        answer = bearer.post(path, json=body)
        assert answer.status_code == 403 and answer.json()["code"] == "bad_origin", path
    browser = logged_in(gateway)
    answer = browser.post("/api/agents/s1/send", json={"input": "x"}, headers={"Origin": origin})
    assert answer.status_code == 403
    assert browser.post("/api/login", json={"token": gateway.token}, headers={"Origin": origin}
                        ).status_code == 403  # fmt: skip
    assert host.agent()["state"] in ("starting", "idle")  # nothing was sent...
    entries = gateway.client().get("/api/agents/s1/history").json()["entries"]
    assert not [e for e in entries if e["role"] == "user"]  # ...nor recorded
    same = browser.post(
        "/api/agents/s1/send", json={"input": "x"}, headers={"Origin": gateway.origin}
    )
    assert same.status_code == 200, same.text


def logged_in(gateway: Gateway, token: str | None = None) -> httpx.Client:
    """A client with the session cookie of ``token`` (default: admin), no Bearer."""
    browser = gateway.client(None)
    answer = browser.post(
        "/api/login", json={"token": token or gateway.token}, headers={"Origin": gateway.origin}
    )
    assert answer.status_code == 204, answer.text
    return browser


def test_login_sets_a_strict_httponly_cookie_that_authenticates(gateway: Gateway) -> None:
    browser = gateway.client(None)
    answer = browser.post("/api/login", json={"token": gateway.token})
    assert answer.status_code == 204
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("agenthost_session=")
    flags = {f.strip().lower() for f in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    assert "secure" not in flags  # plain http on loopback: a Secure cookie would be dropped
    assert gateway.token is not None and gateway.token not in cookie
    assert browser.get("/api/me").json()["name"] == "admin"
    assert browser.post("/api/logout").status_code == 204
    assert browser.get("/api/me").status_code == 401


def test_a_bad_login_is_401_and_forged_cookies_are_refused(gateway: Gateway) -> None:
    browser = gateway.client(None)
    for body in ({"token": "aht_wrong"}, {"token": ""}):
        answer = browser.post("/api/login", json=body)
        assert answer.status_code == 401 and "set-cookie" not in answer.headers
    good = logged_in(gateway).cookies["agenthost_session"]
    name, rest = good.split(".", 2)[1], good.rsplit(".", 1)
    forged = [
        good.replace(f".{name}.", ".other."),
        rest[0] + "." + "A" * len(rest[1]),
        good[:-1],
        "v1.admin.x.1.y",
        "",
        "%00",
    ]
    for value in forged:
        api = gateway.client(None, cookies={"agenthost_session": value})
        assert api.get("/api/me").status_code == 401, value


def test_revoking_a_token_ends_its_requests_and_sessions_without_a_restart(
    gateway: Gateway,
) -> None:
    token = gateway.add_token("temp", "send")
    bearer = gateway.client(token)
    browser = logged_in(gateway, token)
    assert bearer.get("/api/me").status_code == 200
    assert browser.get("/api/me").status_code == 200
    gateway.cli("token", "revoke", "temp")
    assert bearer.get("/api/me").status_code == 401
    assert browser.get("/api/me").status_code == 401
    # a new token of the same name does not revive the old sessions
    again = gateway.add_token("temp", "send")
    assert browser.get("/api/me").status_code == 401
    assert gateway.client(again).get("/api/me").status_code == 200


def test_a_session_survives_a_restart_of_the_gateway(gateway_factory: GatewayFactory) -> None:
    first = gateway_factory()
    cookie = logged_in(first).cookies["agenthost_session"]
    first.stop()
    second = gateway_factory()
    assert second.token is None  # the store exists: no new admin token printed
    api = second.client(None, cookies={"agenthost_session": cookie})
    assert api.get("/api/me").json()["name"] == "admin"


def test_the_token_store_is_private_and_holds_no_token(gateway: Gateway) -> None:
    token = gateway.add_token("other", "read")
    web = gateway.home / "web"
    assert stat.S_IMODE(web.stat().st_mode) == 0o700
    for name in ("tokens.json", "secret"):
        assert stat.S_IMODE((web / name).stat().st_mode) == 0o600, name
    text = (web / "tokens.json").read_text()
    assert gateway.token is not None
    assert gateway.token not in text and token not in text
    assert {t["name"] for t in json.loads(text)["tokens"]} == {"admin", "other"}


def test_token_cli_add_list_revoke(gateway: Gateway) -> None:
    token = gateway.add_token("ci", "send", "respond")
    assert re.fullmatch(r"aht_[A-Za-z0-9_-]{43}", token)
    listed = json.loads(gateway.cli("token", "list", "--json").stdout)
    ci = next(t for t in listed if t["name"] == "ci")
    assert ci["scopes"] == ["send", "respond"]
    assert ci["effective_scopes"] == ["read", "send", "respond"]
    assert token not in gateway.cli("token", "list").stdout
    for bad in (["token", "add", "ci"], ["token", "add", "../x"], ["token", "revoke", "nope"],
                ["token", "add", "y", "--scope", "root"]):  # fmt: skip
        assert gateway.cli(*bad, check=False).returncode != 0, bad
    gateway.cli("token", "revoke", "ci")
    assert "ci" not in gateway.cli("token", "list").stdout


def test_a_token_store_readable_by_others_stops_the_gateway(home: Path) -> None:
    web = home / "web"
    web.mkdir(mode=0o700)
    (web / "tokens.json").write_text('{"version": 1, "tokens": []}')
    os.chmod(web / "tokens.json", 0o644)
    done = run_web(home, "--listen", "127.0.0.1:0")
    assert done.returncode != 0 and "readable by others" in done.stderr


def test_no_token_and_no_cookie_appear_in_the_log(
    gateway: Gateway, host_factory: HostFactory
) -> None:
    host_factory("s1")
    other = gateway.add_token("logged", "read")
    browser = logged_in(gateway)
    cookie = browser.cookies["agenthost_session"]
    browser.get("/api/agents/s1")
    gateway.client(other).get("/api/agents/s1/history", params={"limit": 1})
    gateway.client(None).post("/api/login", json={"token": "aht_rejected-secret-value"})
    gateway.client("aht_another-rejected-value").get("/api/me")
    gateway.client(None, headers={"Authorization": "Bearer aht_in-a-header"}).get("/api/x")
    gateway.client().get(f"/api/agents/{other}/status")  # pasted where an id goes
    log = gateway.log()
    assert "web.login" in log and "/api/agents/s1" in log  # the log is there
    assert gateway.token is not None
    for secret in (gateway.token, other, cookie, "aht_rejected-secret-value",
                   "aht_another-rejected-value", "aht_in-a-header"):  # fmt: skip
        assert secret not in log


def test_a_host_header_naming_another_site_is_refused(gateway: Gateway) -> None:
    api = gateway.client()
    port = gateway.url.rstrip("/").rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", ""):
        answer = api.get("/api/me", headers={"Host": host})
        assert answer.status_code in (400, 403), host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST"):
        assert api.get("/api/me", headers={"Host": host}).status_code == 200, host


def run_web(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agenthost web ARGS`` expected to end by itself (a refusal)."""
    return subprocess.run(
        [PY, "-m", "agenthost", "web", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def test_a_non_loopback_listen_without_tls_is_refused(home: Path) -> None:
    for listen in ("0.0.0.0:0", "[::]:0", "192.0.2.1:8765"):
        done = run_web(home, "--listen", listen)
        assert done.returncode == 2, done.stderr
        assert "not a loopback address" in done.stderr and "--tls-cert" in done.stderr
    assert not (home / "web").exists()  # refused before anything was created
    assert run_web(home, "--listen", "nonsense").returncode == 2
    assert run_web(home, "--tls-cert", __file__).returncode == 2  # a key is needed too
    for remote in ("", "user@", "host:port", "-oProxyCommand=x", "a b"):
        done = run_web(home, "--listen", "127.0.0.1:0", "--remote", remote)
        assert done.returncode == 2, (remote, done.stderr)
    assert not (home / "web").exists()


def test_insecure_listen_lets_it_listen_beyond_loopback(gateway_factory: GatewayFactory) -> None:
    gw = gateway_factory("--insecure-listen", listen="0.0.0.0:0")
    port = gw.url.rstrip("/").rsplit(":", 1)[1]
    api = gw.client(base_url=f"http://127.0.0.1:{port}/")
    assert api.get("/api/me").status_code == 200


def test_tls_serves_https_with_a_secure_cookie(
    gateway_factory: GatewayFactory, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    gw = gateway_factory("--tls-cert", str(cert), "--tls-key", str(key))
    assert gw.url.startswith("https://127.0.0.1:")
    trust = ssl.create_default_context(cafile=str(cert))
    api = httpx.Client(base_url=gw.url, verify=trust, timeout=DEADLINE)
    gw.clients.append(api)
    answer = api.post("/api/login", json={"token": gw.token}, headers={"Origin": gw.origin})
    assert answer.status_code == 204
    assert "secure" in {f.strip().lower() for f in answer.headers["set-cookie"].split(";")}
    plain = httpx.Client(base_url=gw.url.replace("https", "http"), timeout=DEADLINE)
    gw.clients.append(plain)
    with pytest.raises(httpx.HTTPError):
        plain.get("/api/me")


HSTS = "max-age=31536000"


def test_hsts_is_sent_when_browsers_reach_the_gateway_over_https_only(
    gateway_factory: GatewayFactory, certificate: tuple[Path, Path], host_factory: HostFactory
) -> None:
    cert, key = certificate
    tls = gateway_factory("--tls-cert", str(cert), "--tls-key", str(key))
    api = httpx.Client(
        base_url=tls.url, verify=ssl.create_default_context(cafile=str(cert)), timeout=DEADLINE
    )
    tls.clients.append(api)
    answers = [
        api.get("/"),  # the page
        api.get("/api/me", headers={"Authorization": f"Bearer {tls.token}"}),
        api.get("/api/me"),  # 401
        api.get("/api/nothing"),  # 404
        api.get("/api/me", headers={"Host": "evil.example"}),  # 403 bad_host
    ]
    for answer in answers:
        assert answer.headers.get("strict-transport-security") == HSTS, answer.request.url
    # behind a TLS proxy (--public-url https://...): sent on, for the proxy to pass on
    proxied = gateway_factory("--public-url", "https://agents.example")
    answer = proxied.client(headers={"Host": "agents.example"}).get("/api/me")
    assert answer.headers.get("strict-transport-security") == HSTS
    # plain http on loopback: never (a browser would ignore it there anyway)
    plain = gateway_factory()
    for answer in (plain.client().get("/api/me"), plain.client(None).get("/")):
        assert "strict-transport-security" not in answer.headers


def test_tls_allows_a_non_loopback_listen(
    gateway_factory: GatewayFactory, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    gw = gateway_factory("--tls-cert", str(cert), "--tls-key", str(key), listen="0.0.0.0:0")
    assert gw.url.startswith("https://0.0.0.0:")


def test_a_bad_certificate_is_a_clear_error(home: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    done = run_web(home, "--listen", "127.0.0.1:0", "--tls-cert", str(junk), "--tls-key", str(junk))
    assert done.returncode != 0 and "TLS" in done.stderr


def test_a_token_store_spoiled_while_running_lets_nobody_in(gateway: Gateway) -> None:
    store = gateway.home / "web" / "tokens.json"
    good = store.read_bytes()
    api = gateway.client()
    store.write_text("{ not json")
    for answer in (
        api.get("/api/me"),
        gateway.client(None).post("/api/login", json={"token": "x"}),
    ):
        assert answer.status_code == 500 and answer.json()["code"] == "token_store"
    assert "web.token_store_unusable" in gateway.log()
    store.write_bytes(good)
    assert api.get("/api/me").status_code == 200
    os.chmod(store, 0o644)  # readable by others (its content unchanged): not trusted either
    assert api.get("/api/me").status_code == 500
    os.chmod(store, 0o600)
    assert api.get("/api/me").status_code == 200


def test_behind_a_tls_proxy_its_public_origin_is_the_gateways_own(
    gateway_factory: GatewayFactory, host_factory: HostFactory
) -> None:
    host_factory("s1")
    gw = gateway_factory("--public-url", "https://agents.example")
    # what a TLS proxy in front passes on: the public Host and Origin, over plain http
    proxied = {"Host": "agents.example", "Origin": "https://agents.example"}
    browser = gw.client(None, headers=proxied)
    login = browser.post("/api/login", json={"token": gw.token})
    assert login.status_code == 204, login.text
    assert "secure" in {f.strip().lower() for f in login.headers["set-cookie"].split(";")}
    cookie = {"agenthost_session": login.cookies["agenthost_session"]}
    sent = gw.client(None, headers=proxied, cookies=cookie).post(
        "/api/agents/s1/send", json={"input": "through the proxy"}
    )
    assert sent.status_code == 200, sent.text
    other = gw.client(headers={"Host": "agents.example", "Origin": "https://evil.example"})
    assert other.post("/api/agents/s1/send", json={"input": "x"}).status_code == 403
    bad = run_web(gw.home, "--listen", "127.0.0.1:0", "--public-url", "agents.example/x")
    assert bad.returncode == 2
