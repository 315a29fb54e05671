"""Signed approval links: what is accepted, and every way a link is refused."""

from __future__ import annotations

import base64
import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.attention.keys import link_key, link_key_path
from agenthost.attention.links import (
    MAX_TOKEN,
    Decision,
    Link,
    new_link,
    sign,
    url,
    verify,
)
from agenthost.errors import LinkRefused
from agenthost.secretfile import load_secret

KEY = b"k" * 64
NOW = 1_800_000_000.0


def link(decision: Decision = "allow") -> Link:
    made = new_link("builder", "toolu_1", "2027-01-15T08:00:00Z", "allow", now=NOW, ttl=600)
    return replace(made, decision=decision)


def refused(token: str, *, key: bytes = KEY, now: float = NOW) -> str:
    with pytest.raises(LinkRefused) as caught:
        verify(token, key, now=now)
    return caught.value.why


def test_a_signed_link_verifies_to_what_it_binds() -> None:
    made = link()
    assert verify(sign(made, KEY), KEY, now=NOW) == made
    assert made.expires == int(NOW + 600) and len(made.nonce) == 24


def test_every_link_is_new_and_urls_join_cleanly() -> None:
    a = new_link("a", "r", "c", "deny", now=NOW, ttl=1)
    b = new_link("a", "r", "c", "deny", now=NOW, ttl=1)
    assert a.nonce != b.nonce and sign(a, KEY) != sign(b, KEY)
    assert url("https://box:8765/", "T") == "https://box:8765/l/T"
    assert url("https://box:8765", "T") == "https://box:8765/l/T"


def test_expiry_is_inclusive_of_its_second_and_refused_after() -> None:
    token = sign(link(), KEY)
    assert verify(token, KEY, now=NOW + 600).decision == "allow"
    assert refused(token, now=NOW + 601) == "expired"


def test_another_key_or_an_edited_part_is_forged() -> None:
    token = sign(link(), KEY)
    assert refused(token, key=b"x" * 64) == "forged"
    body, mac = token.split(".")
    # the decision flipped inside a re-encoded body, the signature kept
    fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    fields["d"] = "deny"
    flipped = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    assert refused(f"{flipped}.{mac}") == "forged"
    # another link's signature on this body
    other = sign(link("deny"), KEY).split(".")[1]
    assert refused(f"{body}.{other}") == "forged"


@pytest.mark.parametrize(
    "token",
    ["", ".", "a", "a.b.c", "é.é", "x" * (MAX_TOKEN + 1), "a b.c", "..", "%2e%2e.%2f"],
)
def test_garbage_is_malformed_or_forged_never_accepted(token: str) -> None:
    assert refused(token) in ("malformed", "forged")


def _signed_body(fields: object) -> str:
    """A token whose body is ``fields`` and whose signature is right (as if a future
    version or a bug had made it): the checks after the signature still hold."""
    import hashlib
    import hmac

    body = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    mac = hmac.new(KEY, b"agenthost-link-1." + body.encode(), hashlib.sha256).digest()
    return f"{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


GOOD = {"v": 1, "a": "a", "r": "r", "c": "c", "d": "allow", "e": int(NOW) + 5, "n": "n"}


@pytest.mark.parametrize(
    "fields",
    [
        [1, 2],
        {**GOOD, "v": 2},
        {**GOOD, "d": "maybe"},
        {**GOOD, "e": "tomorrow"},
        {**GOOD, "e": True},
        {**GOOD, "a": ""},
        {**GOOD, "r": None},
        {**GOOD, "a": "x" * 501},
        {k: v for k, v in GOOD.items() if k != "n"},
    ],
)
def test_a_signed_but_unreadable_body_is_malformed(fields: object) -> None:
    assert refused(_signed_body(fields)) == "malformed"


def test_the_signed_good_body_is_accepted() -> None:
    assert verify(_signed_body(GOOD), KEY, now=NOW).agent_id == "a"


@given(st.text(max_size=300))
def test_no_random_text_is_ever_a_valid_link(token: str) -> None:
    with pytest.raises(LinkRefused):
        verify(token, KEY, now=NOW)


def test_the_home_key_is_made_once_private_and_then_reused(tmp_path: Path) -> None:
    key = link_key(tmp_path)
    path = link_key_path(tmp_path)
    assert len(key) >= 32 and link_key(tmp_path) == key
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_short_key_file_is_replaced(tmp_path: Path) -> None:
    path = link_key_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"short\n")
    path.chmod(0o600)  # ours and private: a damaged key, not a planted one
    key = link_key(tmp_path)
    assert key != b"short" and path.read_bytes().strip() == key


def test_processes_racing_to_create_the_secret_all_get_the_same(tmp_path: Path) -> None:
    path = tmp_path / "d" / "secret"
    got: list[bytes] = []
    start = threading.Barrier(8)

    def take() -> None:
        start.wait()
        got.append(load_secret(path))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and path.read_bytes().strip() == got[0]
    assert not [p for p in os.listdir(path.parent) if p != "secret"]  # no temporaries


def test_a_token_has_one_spelling() -> None:
    token = sign(link(), KEY)
    body, mac = token.split(".")
    for variant in (f"{body}.{mac}=", f"{body}=.{mac}", f"{body}.{mac[:5]}!{mac[5:]}"):
        assert refused(variant) == "malformed"
    # a signature's last character carries two bits base64 leaves unused: a spelling
    # that sets them decodes to the same bytes, and is refused all the same
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(mac[-1])
    for spare in (1, 2, 3):
        other = f"{body}.{mac[:-1]}{alphabet[last ^ spare]}"
        assert base64.urlsafe_b64decode(other.split(".")[1] + "=") == base64.urlsafe_b64decode(
            mac + "="
        )
        assert refused(other) == "malformed"
