"""The webhook decisions (agenthost.automation.webhooks): signatures as GitHub computes
them, forged and garbage deliveries, event filters and the template language."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from agenthost.automation.webhooks import (
    FIELD_LIMIT,
    MAX_BODY,
    MESSAGE_LIMIT,
    parse_event,
    parse_template,
    render,
    signature,
    verify,
    wanted,
)
from agenthost.errors import ConfigError, HookRefused

SECRET = b"s3cret-of-the-hook-0123456789abcdef"


def github_headers(body: bytes, secret: bytes = SECRET, **extra: str) -> dict[str, str]:
    """What GitHub sends: the HMAC-SHA256 hex digest of the raw body, "sha256=" first
    (computed here independently of the module)."""
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return {
        "x-hub-signature-256": "sha256=" + digest,
        "x-github-event": "pull_request",
        "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        **extra,
    }


def refused(headers: dict[str, str], body: bytes) -> HookRefused:
    with pytest.raises(HookRefused) as info:
        verify(headers, body, SECRET)
    return info.value


def test_githubs_published_test_vector() -> None:
    # docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation"
    assert signature(b"It's a Secret to Everybody", b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def test_a_github_delivery_is_read() -> None:
    body = json.dumps({"action": "opened", "pull_request": {"title": "Fix"}}).encode()
    delivery = verify(github_headers(body), body, SECRET)
    assert delivery.scheme == "github"
    assert delivery.key == "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert (delivery.event, delivery.action) == ("pull_request", "opened")
    assert delivery.payload["pull_request"]["title"] == "Fix"
    assert not delivery.is_ping


def test_the_generic_scheme_without_an_id_is_keyed_by_the_body() -> None:
    body = b'{"ref": "main"}'
    headers = {"x-agenthost-signature-256": signature(SECRET, body)}
    delivery = verify(headers, body, SECRET)
    assert delivery.scheme == "generic"
    assert delivery.key == "sha256:" + hashlib.sha256(body).hexdigest()
    assert delivery.event == ""
    with_id = verify({**headers, "x-agenthost-delivery": "job-7"}, body, SECRET)
    assert with_id.key == "job-7"


def test_upper_case_hex_is_the_same_signature() -> None:
    body = b"{}"
    headers = github_headers(body)
    headers["x-hub-signature-256"] = "sha256=" + headers["x-hub-signature-256"][7:].upper()
    assert verify(headers, body, SECRET).payload == {}


@pytest.mark.parametrize(
    "change",
    [
        "wrong secret",
        "one byte changed",
        "missing header",
        "other scheme's legacy header",
        "both headers",
        "malformed hex",
        "no prefix",
        "sha1 prefix",
        "truncated",
        "empty",
    ],
)
def test_forged_deliveries_are_401(change: str) -> None:
    body = b'{"action": "opened"}'
    headers = github_headers(body)
    good = headers["x-hub-signature-256"]
    sent = body
    if change == "wrong secret":
        headers = github_headers(body, secret=b"not the secret at all, but long")
    elif change == "one byte changed":
        sent = body.replace(b"opened", b"openee")
    elif change == "missing header":
        del headers["x-hub-signature-256"]
    elif change == "other scheme's legacy header":  # GitHub's SHA-1 header is not taken
        del headers["x-hub-signature-256"]
        headers["x-hub-signature"] = "sha1=" + hmac.new(SECRET, body, "sha1").hexdigest()
    elif change == "both headers":
        headers["x-agenthost-signature-256"] = good
    elif change == "malformed hex":
        headers["x-hub-signature-256"] = good[:-1] + "z"
    elif change == "no prefix":
        headers["x-hub-signature-256"] = good[7:]
    elif change == "sha1 prefix":
        headers["x-hub-signature-256"] = "sha1=" + good[7:]
    elif change == "truncated":
        headers["x-hub-signature-256"] = good[:-2]
    elif change == "empty":
        headers["x-hub-signature-256"] = ""
    error = refused(headers, sent)
    assert error.status == 401
    assert error.reason in ("bad_signature", "no_signature")


def test_the_signature_is_checked_before_the_body_is_parsed() -> None:
    body = b"not json"
    headers = github_headers(body, secret=b"another secret, long enough....")
    assert refused(headers, body).status == 401


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not_json"),
        (b"[1, 2]", "not_object"),
        (b'"text"', "not_object"),
        (b"", "not_json"),
        (b'{"a": "\xff\xfe"}', "not_json"),
        (b"[" * 200_000 + b"]" * 200_000, "not_json"),
        (b'{"a":' * 80_000 + b"1" + b"}" * 80_000, "not_json"),
    ],
    ids=["text", "array", "string", "empty", "invalid-utf8", "deep-array", "deep-object"],
)
def test_garbage_bodies_with_a_good_signature_are_400(body: bytes, reason: str) -> None:
    error = refused(github_headers(body), body)
    assert (error.status, error.reason) == (400, reason)


def test_oversized_is_413_before_anything_else() -> None:
    body = b" " * (MAX_BODY + 1)
    assert refused({}, body).status == 413


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("x-github-delivery", "has space"),
        ("x-github-delivery", "x" * 201),
        ("x-github-event", "pull request"),
        ("x-github-event", "a.b"),
    ],
)
def test_malformed_delivery_ids_and_events_are_400(header: str, value: str) -> None:
    body = b"{}"
    assert refused(github_headers(body, **{header: value}), body).status == 400


def test_ping() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    assert verify(github_headers(body, **{"x-github-event": "ping"}), body, SECRET).is_ping


def test_event_filters() -> None:
    assert wanted([], "push", "")
    assert wanted(["pull_request"], "pull_request", "opened")
    assert wanted(["pull_request.opened"], "pull_request", "opened")
    assert not wanted(["pull_request.opened"], "pull_request", "closed")
    assert not wanted(["pull_request.opened"], "pull_request", "")
    assert not wanted(["pull_request"], "push", "")
    assert not wanted(["push"], "", "")
    assert parse_event("issue_comment.created") == "issue_comment.created"
    for bad in ["", "a.b.c", "pull request", ".opened", "pr.", "a" * 65, "x;y"]:
        with pytest.raises(ConfigError):
            parse_event(bad)


PAYLOAD = {
    "action": "opened",
    "pull_request": {"title": "Fix the parser", "number": 42, "draft": False, "labels": []},
    "commits": [{"id": "abc"}, {"id": "def"}],
    "weird": "\x1b]52;c;ZWNobyBoaQ==\x07\u202ecode\nline two\tend",
    "1": {"2": "numeric keys"},
}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("Review #{pull_request.number}: {pull_request.title}", "Review #42: Fix the parser"),
        ("{commits.1.id} {commits.0.id}", "def abc"),
        ("{{literal}} and }} and {{", "{literal} and } and {"),
        ("{{{action}}}", "{opened}"),
        ("draft={pull_request.draft} labels={pull_request.labels}", "draft=false labels=[]"),
        ("{1.2}", "numeric keys"),
        ("no fields at all", "no fields at all"),
    ],
)
def test_templates_render(template: str, message: str) -> None:
    assert render(parse_template(template), PAYLOAD) == message


def test_inserted_values_are_made_safe_but_the_users_text_is_not_touched() -> None:
    message = render(parse_template("User\ttext: {weird}"), PAYLOAD)
    assert message.startswith("User\ttext: ")
    assert "\x1b" not in message and "\x07" not in message and "\u202e" not in message
    assert "\\x1b]52;c;ZWNobyBoaQ==\\x07\\u202ecode\nline two\tend" in message


def test_values_and_the_message_are_cut() -> None:
    long = {"a": "x" * (FIELD_LIMIT + 500)}
    one = render(parse_template("{a}"), long)
    assert one.startswith("x" * FIELD_LIMIT + "[... 500 characters cut]")
    many = render(parse_template("{a}" * 10), long)
    assert len(many) < MESSAGE_LIMIT + 100
    assert many.endswith("characters cut]")


@pytest.mark.parametrize(
    "path",
    [
        "pull_request.body",
        "commits.2.id",
        "commits.x",
        "action.length",
        "nothing",
        "action.__class__",
    ],
)
def test_a_missing_field_is_422(path: str) -> None:
    with pytest.raises(HookRefused) as info:
        render(parse_template("{" + path + "}"), PAYLOAD)
    assert info.value.status == 422
    assert path in info.value.message


@pytest.mark.parametrize(
    "template",
    [
        "",
        "   ",
        "{",
        "}",
        "a { b",
        "{}",
        "{a..b}",
        "{.a}",
        "{a.}",
        "{a b}",
        "{a[0]}",
        "{a.__class__}x{!r}",
        "{a!r}",
        "{a:>10}",
        "{a()}",
        "{{a}",
        "{a}}",
        "{{{a}}",
        "x" * 10_001,
        "{é}",
    ],
)
def test_garbage_templates_are_refused(template: str) -> None:
    with pytest.raises(ConfigError):
        parse_template(template)


def test_paths_of_a_template() -> None:
    assert parse_template("{a.b} x {c.0}").paths() == ["a.b", "c.0"]
