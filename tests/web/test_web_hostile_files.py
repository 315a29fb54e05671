"""A running gateway whose token store stops being ours lets nobody in (every request
that needs a token or a session gets 500 ``token_store``, logged) until it is fixed.

The gateway re-reads ``<home>/web/tokens.json`` when it changes, so the check runs on
each change: a symbolic link put in its place, or the file given to another user (a
``chown`` changes neither its size, its mtime nor its inode: its ctime does). A
gateway that starts on such a store, secret or link key does not start at all
(tests/integration/test_hostile_files.py)."""

from __future__ import annotations

import json
import os

import pytest

from agenthost.web.access import hash_token, new_token

from webtools import Gateway

NOBODY = 65534


def refuses_everybody(gateway: Gateway, *tokens: str) -> None:
    for token in tokens:
        answer = gateway.client(token).get("/api/me")
        assert answer.status_code == 500 and answer.json()["code"] == "token_store", answer.text


def test_a_store_swapped_for_a_link_lets_nobody_in(gateway: Gateway) -> None:
    store = gateway.home / "web" / "tokens.json"
    assert gateway.client().get("/api/me").status_code == 200
    # someone's own store, with a token they know, linked in place of ours
    theirs = new_token()
    data = json.loads(store.read_text())
    data["tokens"].append(
        {"name": "evil", "id": "e1", "sha256": hash_token(theirs), "scopes": ["admin"]}
    )
    elsewhere = gateway.home / "elsewhere.json"
    elsewhere.write_text(json.dumps(data))
    elsewhere.chmod(0o600)
    link = gateway.home / "web" / "link"
    link.symlink_to(elsewhere)
    kept = store.read_bytes()
    os.replace(link, store)
    refuses_everybody(gateway, theirs, "admin")
    log = gateway.log()
    assert "web.token_store_unusable" in log and "tokens.json is a symbolic link" in log
    store.unlink()
    store.write_bytes(kept)
    store.chmod(0o600)
    assert gateway.client().get("/api/me").status_code == 200


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")
def test_a_store_given_to_another_user_lets_nobody_in(gateway: Gateway) -> None:
    store = gateway.home / "web" / "tokens.json"
    assert gateway.client().get("/api/me").status_code == 200
    os.chown(store, NOBODY, NOBODY)
    refuses_everybody(gateway, "admin")
    assert f"tokens.json is owned by uid {NOBODY}" in gateway.log()
    os.chown(store, os.geteuid(), os.getegid())
    assert gateway.client().get("/api/me").status_code == 200
