"""agenthost.sandbox.allowlist: which hosts a sandboxed agent may reach.

Tables of entries (valid ones and their canonical form, refused ones and why), of
requests against one allow list (look-alikes, spellings of the same name, addresses
of allowed names, garbage), and of authorities as a request names them; then random
text, which must never raise out of ``allows`` nor be allowed by accident.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.errors import AgentHostError, ConfigError, InvalidAllowEntry, SandboxError
from agenthost.sandbox.allowlist import AllowList, canonical_host, split_authority

VALID = [
    # (entry, canonical form)
    ("api.anthropic.com", "api.anthropic.com"),
    ("API.Anthropic.COM", "api.anthropic.com"),
    ("api.anthropic.com.", "api.anthropic.com"),
    ("  pypi.org  ", "pypi.org"),
    ("pypi.org\n", "pypi.org"),  # whitespace around an entry is trimmed
    ("localhost:8080", "localhost:8080"),
    ("localhost:*", "localhost:*"),
    ("*.npmjs.org", "*.npmjs.org"),
    ("*.NPMJS.org.:443", "*.npmjs.org:443"),
    ("*.co.uk", "*.co.uk"),  # two labels: accepted (no public suffix list)
    ("127.0.0.1:3000", "127.0.0.1:3000"),
    ("10.0.0.7", "10.0.0.7"),
    ("[::1]:8080", "[::1]:8080"),
    ("[::1]", "[::1]"),
    ("::1", "[::1]"),
    ("[0:0:0:0:0:0:0:1]:*", "[::1]:*"),
    ("[::ffff:127.0.0.1]:80", "[::ffff:7f00:1]:80"),
    ("bücher.de", "xn--bcher-kva.de"),
    ("ＢÜＣＨＥＲ.de", "xn--bcher-kva.de"),  # fullwidth letters, UTS 46 mapped
    ("xn--bcher-kva.de", "xn--bcher-kva.de"),
    ("_acme.example.com", "_acme.example.com"),
    ("a" * 63 + ".com", "a" * 63 + ".com"),
    (".".join(["a" * 61] * 4), ".".join(["a" * 61] * 4)),  # 247 characters
    ("host:00443", "host:443"),
]

INVALID = [
    # (entry, a word of the reason)
    ("", "empty"),
    ("   ", "empty"),
    ("*", "'net'"),
    ("*:443", "'net'"),
    ("*.com", "top-level"),
    ("*.localhost", "top-level"),
    ("*.", "no host"),
    ("*.*.example.com", "not a label"),
    ("api.*.example.com", "wildcard"),
    ("*example.com", "wildcard"),
    ("ex*ample.com", "wildcard"),
    ("*.10.0.0.1", "addresses"),
    ("https://api.anthropic.com", "URL"),
    ("api.anthropic.com/v1", "path"),
    ("allowed.com@evil.com", "user name"),
    ("user:pass@allowed.com", "user name"),
    ("allowed.com:0", "not a port"),
    ("allowed.com:65536", "not a port"),
    ("allowed.com:-1", "not a port"),
    ("allowed.com:+80", "not a port"),
    ("allowed.com:80x", "not a port"),
    ("allowed.com:", "not a port"),
    ("allowed.com:443:443", "IPv6"),
    ("allowed.com:１２３", "not a port"),  # fullwidth digits
    ("[::1", "unclosed"),
    ("[127.0.0.1]:80", "brackets"),
    ("[::1]x", "after the address"),
    ("[::1]:abc", "not a port"),
    ("[fe80::1%eth0]:80", "zone"),
    ("fe80::1%eth0", "zone"),
    ("1:2:3", "IPv6"),
    ("127.1", "number"),
    ("2130706433", "number"),
    ("0x7f000001", "number"),
    ("0x7f.0.0.1", "number"),
    ("127.0.0.1.", "number"),  # not an address with the dot, not a name either
    ("-allowed.com", "not a label"),
    ("allowed-.com", "not a label"),
    ("allowed..com", "empty label"),
    (".allowed.com", "empty label"),
    ("allowed com", "not a label"),
    ("allowed.com\x00", "not a label"),
    ("allo\nwed.com", "not a label"),
    ("allowed%2ecom", "not a label"),
    ("a" * 64 + ".com", "longer than 63"),
    (".".join(["a" * 63] * 4), "longer than 253"),
    ("a" * 5000, "longer than 1024"),
    ("xn--.com", "not a label"),
    ("☃\u200d.com", "internationalised"),
    ("\u202eallowed.com", "internationalised"),  # a bidi control
]


@pytest.mark.parametrize(("entry", "canonical"), VALID)
def test_valid_entries_have_a_canonical_form(entry: str, canonical: str) -> None:
    assert AllowList.parse([entry]).entries == (canonical,)


@pytest.mark.parametrize(("entry", "why"), INVALID)
def test_invalid_entries_are_refused_with_the_reason(entry: str, why: str) -> None:
    with pytest.raises(InvalidAllowEntry) as caught:
        AllowList.parse(["pypi.org", entry])
    assert why in str(caught.value), str(caught.value)
    assert "sandbox.allow_hosts" in str(caught.value) and caught.value.hint
    assert len(str(caught.value)) < 300  # a huge entry is not echoed whole
    error = caught.value
    assert isinstance(error, SandboxError) and isinstance(error, ConfigError)
    assert isinstance(error, AgentHostError)


ALLOW = AllowList.parse(
    [
        "allowed.com",
        "api.allowed.com:8443",
        "*.pkg.dev",
        "*.wild.org:*",
        "any.net:*",
        "127.0.0.1:3000",
        "[::1]:3001",
        "bücher.de",
        "allowed.com:8080",  # adds a port to the first entry
    ]
)

REQUESTS = [
    # (host as the request names it, port, allowed)
    ("allowed.com", 443, True),
    ("allowed.com", 80, True),
    ("allowed.com", 8080, True),
    ("allowed.com", 22, False),
    ("allowed.com", 0, False),
    ("allowed.com", 65536, False),
    ("allowed.com", -443, False),
    ("ALLOWED.COM", 443, True),
    ("allowed.com.", 443, True),
    ("allowed.com..", 443, False),
    ("ａｌｌｏｗｅｄ.com", 443, True),  # the same name to a resolver
    ("allowed.com.evil.com", 443, False),
    ("evilallowed.com", 443, False),
    ("evil-allowed.com", 443, False),
    ("allowed.co", 443, False),
    ("allowed.com@evil.com", 443, False),
    ("evil.com@allowed.com", 443, False),
    ("evil.com#allowed.com", 443, False),
    ("evil.com/allowed.com", 443, False),
    ("evil.com\x00allowed.com", 443, False),
    ("allowed.com\x00.evil.com", 443, False),
    ("allowed.com ", 443, False),
    ("allowed.com:443", 443, False),  # a host, not an authority
    ("аllowed.com", 443, False),  # Cyrillic a
    ("allowed.cοm", 443, False),  # Greek omicron
    ("xn--llowed-2ve.com", 443, False),
    ("sub.allowed.com", 443, False),  # no wildcard for allowed.com
    ("api.allowed.com", 8443, True),
    ("api.allowed.com", 443, False),
    ("pkg.dev", 443, False),  # the bare domain of a wildcard
    ("x.pkg.dev", 443, True),
    ("a.b.c.pkg.dev", 80, True),
    ("x.pkg.dev", 8080, False),
    ("x.pkg.dev.evil.com", 443, False),
    ("xpkg.dev", 443, False),
    ("x.wild.org", 9999, True),
    ("wild.org", 443, False),
    ("any.net", 1, True),
    ("any.net", 65535, True),
    ("127.0.0.1", 3000, True),
    ("127.0.0.1", 3001, False),
    ("127.1", 3000, False),
    ("2130706433", 3000, False),
    ("0x7f000001", 3000, False),
    ("0177.0.0.1", 3000, False),
    ("127.000.000.001", 3000, False),
    ("::ffff:127.0.0.1", 3000, False),  # a mapped spelling is another literal
    ("localhost", 3000, False),  # the name of an allowed address
    ("::1", 3001, True),
    ("0:0::1", 3001, True),
    ("[::1]", 3001, False),  # brackets belong to the authority, not the host
    ("::1%lo", 3001, False),
    ("xn--bcher-kva.de", 443, True),
    ("BÜCHER.de", 443, True),
    ("", 443, False),
    (".", 443, False),
    ("*", 443, False),
    ("*.pkg.dev", 443, False),
    ("a" * 300 + ".pkg.dev", 443, False),
    ("a." * 200 + "pkg.dev", 443, False),
    ("x" * 100_000, 443, False),
]


@pytest.mark.parametrize(("host", "port", "allowed"), REQUESTS)
def test_requests_against_an_allow_list(host: str, port: int, allowed: bool) -> None:
    assert ALLOW.allows(host, port) is allowed


def test_an_empty_allow_list_allows_nothing() -> None:
    empty = AllowList.parse([])
    assert empty.entries == ()
    assert not empty.allows("localhost", 80) and not empty.allows("127.0.0.1", 80)


@pytest.mark.parametrize(
    ("host", "canonical"),
    [
        ("Example.COM.", "example.com"),
        ("0:0::1", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("127.1", None),
        ("a@b.com", None),
        ("[::1]", None),
        ("", None),
    ],
)
def test_canonical_host(host: str, canonical: str | None) -> None:
    assert canonical_host(host) == canonical


@pytest.mark.parametrize(
    ("authority", "default", "split"),
    [
        ("example.com:443", None, ("example.com", 443)),
        ("example.com", None, None),
        ("example.com", 80, ("example.com", 80)),
        ("example.com:", 80, None),
        ("[::1]:8080", None, ("::1", 8080)),
        ("[::1]", 80, ("::1", 80)),
        ("[::1]", None, None),
        ("[::1]x", 80, None),
        ("[::1", 80, None),
        ("[example.com]:80", None, None),
        ("::1:80", None, None),
        ("example.com:0", None, None),
        ("example.com:99999", None, None),
        ("example.com:443 ", None, None),
        ("example.com:4 43", None, None),
        ("example.com:+443", None, None),
        ("a@b.com:443", None, ("a@b.com", 443)),  # the host check refuses it
        ("", 80, ("", 80)),
    ],
)
def test_split_authority(
    authority: str, default: int | None, split: tuple[str, int] | None
) -> None:
    assert split_authority(authority, default) == split


@given(st.text(max_size=80), st.integers(min_value=-5, max_value=70000))
def test_random_hosts_never_raise_and_are_allowed_only_by_name(host: str, port: int) -> None:
    allowed = ALLOW.allows(host, port)
    if allowed:
        name = canonical_host(host)
        assert name is not None and ALLOW.allows(name, port)


@given(st.lists(st.text(max_size=40), max_size=4))
def test_random_entries_parse_or_raise_our_error(entries: list[str]) -> None:
    try:
        allow = AllowList.parse(entries)
    except InvalidAllowEntry:
        return
    # whatever was accepted reads back the same
    assert AllowList.parse(allow.entries).entries == allow.entries
