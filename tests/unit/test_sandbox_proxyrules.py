"""agenthost.sandbox.proxyrules: what the proxy does with each request head, without
sockets. A table of targets and Host headers (look-alikes, user names, other schemes,
spellings of one host) and what each becomes; the headers passed on either way; the
text of a refusal.
"""

from __future__ import annotations

import h11
import pytest

from agenthost.sandbox.allowlist import AllowList
from agenthost.sandbox.proxyrules import (
    CONFIG_KEY,
    Forward,
    Refuse,
    Tunnel,
    decide,
    downstream_response,
    entry_for,
    error_response,
)

ALLOW = AllowList.parse(["allowed.com", "localhost:8080", "[::1]:8443", "10.0.0.1:*"])


def request(
    method: str, target: str, *headers: tuple[str, str], version: str = "1.1"
) -> h11.Request:
    if version == "1.1" and not any(name.lower() == "host" for name, _ in headers):
        headers = (("Host", "placeholder"), *headers) if method == "CONNECT" else headers
    return h11.Request(method=method, target=target, headers=list(headers), http_version=version)


CONNECTS = [
    # (target, decision)
    ("allowed.com:443", Tunnel("allowed.com", 443)),
    ("ALLOWED.com.:443", Tunnel("allowed.com", 443)),
    ("allowed.com:80", Tunnel("allowed.com", 80)),
    ("localhost:8080", Tunnel("localhost", 8080)),
    ("[::1]:8443", Tunnel("::1", 8443)),
    ("[0::1]:8443", Tunnel("::1", 8443)),
    ("10.0.0.1:22", Tunnel("10.0.0.1", 22)),
    ("allowed.com:22", 403),
    ("evil.com:443", 403),
    ("allowed.com.evil.com:443", 403),
    ("127.0.0.1:8080", 403),  # localhost's address: not listed
    ("[::ffff:10.0.0.1]:22", 403),
    ("allowed.com@evil.com:443", 400),
    ("evil.com@allowed.com:443", 400),
    ("allowed.com", 400),
    ("allowed.com:", 400),
    ("allowed.com:0", 400),
    ("allowed.com:65536", 400),
    ("::1:8443", 400),
    ("[::1]8443", 400),
    ("127.1:8080", 400),
    ("allowed%2ecom:443", 400),
    ("http://allowed.com:443", 400),
]


@pytest.mark.parametrize(("target", "expected"), CONNECTS)
def test_connect_targets(target: str, expected: Tunnel | int) -> None:
    decision = decide(request("CONNECT", target), ALLOW)
    if isinstance(expected, Tunnel):
        assert decision == expected
    else:
        assert isinstance(decision, Refuse) and decision.status == expected, decision


FORWARDS = [
    # (target, Host header or None, decision: (host, port, origin-form) or a status)
    ("http://allowed.com/x?y=1", "allowed.com", ("allowed.com", 80, b"/x?y=1")),
    ("http://allowed.com", "allowed.com", ("allowed.com", 80, b"/")),
    ("http://allowed.com?q", "allowed.com", ("allowed.com", 80, b"/?q")),
    ("HTTP://ALLOWED.COM/", "Allowed.Com.", ("allowed.com", 80, b"/")),
    ("http://allowed.com:80/", "allowed.com", ("allowed.com", 80, b"/")),
    ("http://allowed.com/", "allowed.com:80", ("allowed.com", 80, b"/")),
    ("http://localhost:8080/a", "localhost:8080", ("localhost", 8080, b"/a")),
    ("http://[::1]:8443/", "[::1]:8443", ("::1", 8443, b"/")),
    ("http://allowed.com/", None, ("allowed.com", 80, b"/")),  # HTTP/1.0, no Host
    ("http://allowed.com/", "evil.com", 400),
    ("http://allowed.com/", "allowed.com:8080", 400),
    ("http://allowed.com/", "allowed.com.evil.com", 400),
    ("http://allowed.com/", "allowed.com@evil.com", 400),
    ("http://allowed.com/", "", 400),
    ("http://evil.com/", "allowed.com", 403),  # the target decides, not the Host
    ("http://localhost/", "localhost", 403),  # port 80 not listed for it
    ("http://allowed.com@evil.com/", "evil.com", 400),
    ("http://evil.com@allowed.com/", "allowed.com", 400),
    ("http://allowed.com:80@evil.com/", "evil.com", 400),
    ("http://allowed.com\\@evil.com/", "allowed.com", 400),
    ("http://allowed.com#@evil.com/", "allowed.com", 400),
    ("http://%61llowed.com/", "allowed.com", 400),
    ("http://allowed.com:http/", "allowed.com", 400),
    ("https://allowed.com/", "allowed.com", 400),
    ("ws://allowed.com/", "allowed.com", 400),
    ("file:///etc/passwd", "allowed.com", 400),
    ("/path", "allowed.com", 400),
    ("//allowed.com/", "allowed.com", 400),
    ("*", "allowed.com", 400),
    ("http:/allowed.com/", "allowed.com", 400),
    ("http://", "allowed.com", 400),
    ("http:///path", "allowed.com", 400),
]


@pytest.mark.parametrize(("target", "host", "expected"), FORWARDS)
def test_plain_http_targets(
    target: str, host: str | None, expected: tuple[str, int, bytes] | int
) -> None:
    if host is None:
        req = request("GET", target, version="1.0")
    else:
        req = request("GET", target, ("Host", host))
    decision = decide(req, ALLOW)
    if isinstance(expected, tuple):
        assert isinstance(decision, Forward), decision
        assert (decision.host, decision.port, decision.request.target) == expected
    else:
        assert isinstance(decision, Refuse) and decision.status == expected, decision


def test_the_request_passed_on_has_no_hop_headers_and_one_framing() -> None:
    decision = decide(
        request(
            "POST",
            "http://localhost:8080/up",
            ("Host", "localhost:8080"),
            ("Proxy-Authorization", "Basic c2VjcmV0"),
            ("Proxy-Connection", "keep-alive"),
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "hop"),
            ("Keep-Alive", "timeout=5"),
            ("TE", "trailers"),
            ("Upgrade", "websocket"),
            ("Expect", "100-continue"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "10"),
            ("X-End", "kept"),
        ),
        ALLOW,
    )
    assert isinstance(decision, Forward) and decision.expects_continue
    headers = list(decision.request.headers)
    assert headers == [
        (b"host", b"localhost:8080"),
        (b"x-end", b"kept"),
        (b"transfer-encoding", b"chunked"),
        (b"connection", b"close"),
    ]
    assert decision.request.http_version == b"1.1"


def test_the_response_passed_back_has_no_hop_headers() -> None:
    response = h11.Response(
        status_code=200,
        headers=[
            ("Content-Length", "5"),
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "hop"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Authenticate", "Basic"),
            ("Set-Cookie", "a=b"),
        ],
        reason=b"Fine",
    )
    back = downstream_response(response)
    assert list(back.headers) == [
        (b"content-length", b"5"),
        (b"set-cookie", b"a=b"),
        (b"connection", b"close"),
    ]
    assert back.status_code == 200 and back.reason == b"Fine"


def test_a_refusal_names_the_host_and_how_to_allow_it() -> None:
    decision = decide(request("CONNECT", "pypi.org:443", ("Host", "pypi.org:443")), ALLOW)
    assert isinstance(decision, Refuse) and decision.status == 403
    text = decision.body()
    assert "pypi.org:443" in text and "'pypi.org'" in text and CONFIG_KEY in text
    raw = decision.response()
    assert raw.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    head, body = raw.split(b"\r\n\r\n")
    assert f"Content-Length: {len(body)}".encode() in head and b"Connection: close" in head
    assert entry_for("::1", 443) == "[::1]" and entry_for("::1", 22) == "[::1]:22"
    assert entry_for("a.com", 8080) == "a.com:8080"


def test_an_error_response_is_complete_whatever_its_text() -> None:
    raw = error_response(599, "\u202e odd text \x00\n")
    head, body = raw.split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 599 Error")
    assert f"Content-Length: {len(body)}".encode() in head
