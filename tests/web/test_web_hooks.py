"""``POST /hooks/NAME`` on a real gateway over real HTTP: GitHub's signature scheme
and the generic one, forged, oversized and garbage deliveries refused (and logged
without their body), filtered events and pings answered, and ``GET /api/hooks``.
The runs a delivery starts are tests/web/test_web_hooks_runs.py's."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from hosttools import DEADLINE, PY
from webtools import Gateway

SECRET = "a-secret-typed-into-github-0123456789"


def sign(body: bytes, secret: str = SECRET) -> str:
    """X-Hub-Signature-256 as GitHub documents it: "sha256=" and the hex HMAC-SHA256
    of the raw body keyed with the secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "agenthost", "hook", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def add_hook(home: Path, tmp_path: Path, name: str, *args: str) -> None:
    """``agenthost hook add NAME ARGS`` with SECRET as the user's secret file."""
    secret_file = tmp_path / f"{name}.secret"
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    done = hook_cli(home, "add", name, "--secret-file", str(secret_file), *args)
    assert done.returncode == 0, done.stderr


def github(
    api: httpx.Client, name: str, body: bytes, *, event: str = "pull_request", **headers: str
) -> httpx.Response:
    sent = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-Hub-Signature-256": sign(body),
        **headers,
    }
    return api.post(f"/hooks/{name}", content=body, headers=sent)


@pytest.fixture
def hooked(gateway: Gateway, tmp_path: Path) -> Gateway:
    """The gateway with hook "pr" (to agent reviewer, pull_request.opened only)."""
    add_hook(
        gateway.home,
        tmp_path,
        "pr",
        "--agent-id",
        "reviewer",
        "--event",
        "pull_request.opened",
        "Review {pull_request.html_url}: {pull_request.title}",
    )
    return gateway


def no_daemon(home: Path) -> bool:
    """Whether nothing asked for a daemon (a delivery that starts a run starts one)."""
    return not (home / "daemon.sock").exists()


PR = json.dumps(
    {"action": "opened", "pull_request": {"title": "Fix", "html_url": "https://x/1"}}
).encode()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("wrong secret", "bad_signature"),
        ("one byte changed", "bad_signature"),
        ("missing header", "no_signature"),
        ("other scheme's header", "no_signature"),
        ("malformed hex", "bad_signature"),
    ],
)
def test_forged_deliveries_are_refused_and_logged_without_the_body(
    hooked: Gateway, change: str, reason: str
) -> None:
    api = hooked.client(None)
    body = PR
    headers = {"X-Hub-Signature-256": sign(body)}
    if change == "wrong secret":
        headers["X-Hub-Signature-256"] = sign(body, "not-the-secret-but-long-enough")
    elif change == "one byte changed":
        body = body.replace(b"Fix", b"Fiz")
    elif change == "missing header":
        headers["X-Hub-Signature-256"] = ""
    elif change == "other scheme's header":  # GitHub's legacy SHA-1 one only
        headers["X-Hub-Signature-256"] = ""
        headers["X-Hub-Signature"] = "sha1=" + hmac.new(SECRET.encode(), body, "sha1").hexdigest()
    elif change == "malformed hex":
        headers["X-Hub-Signature-256"] = sign(body)[:-1] + "g"
    sent = {k: v for k, v in headers.items() if v}  # "": the header is not sent
    answer = api.post(
        "/hooks/pr",
        content=body,
        headers={"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d1", **sent},
    )
    assert answer.status_code == 401, answer.text
    assert answer.json()["code"] == reason
    log = hooked.log()
    assert "web.hook_refused" in log and reason in log
    assert "Fix" not in log and "Fiz" not in log and SECRET not in log
    assert no_daemon(hooked.home)


def test_oversized_is_413_and_the_daemon_never_asked(hooked: Gateway) -> None:
    api = hooked.client(None)
    body = b'{"pad": "' + b"x" * (512 * 1024) + b'"}'
    answer = github(api, "pr", body)
    assert answer.status_code == 413, answer.text
    assert answer.json()["code"] == "too_large"

    def chunks() -> object:  # no Content-Length: counted as it comes
        for _ in range(9):
            yield b"y" * (64 * 1024)

    streamed = api.post(
        "/hooks/pr",
        content=chunks(),  # type: ignore[arg-type]
        headers={"X-Hub-Signature-256": sign(b"")},
    )
    assert streamed.status_code == 413, streamed.text
    assert no_daemon(hooked.home)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not_json"),
        (b"[1, 2, 3]", "not_object"),
        (b"[" * 100_000 + b"]" * 100_000, "not_json"),
        (b'{"title": "\xff\xfe\xfd"}', "not_json"),
        (b"", "not_json"),
    ],
    ids=["text", "array", "deep", "invalid-utf8", "empty"],
)
def test_garbage_bodies_signed_are_400(hooked: Gateway, body: bytes, reason: str) -> None:
    answer = github(hooked.client(None), "pr", body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == reason
    assert no_daemon(hooked.home)


@pytest.mark.parametrize("name", ["nope", ".hidden", "a%2Fb", "-x", "x" * 65])
def test_unknown_hooks_are_404(hooked: Gateway, name: str) -> None:
    answer = github(hooked.client(None), name, PR)
    assert answer.status_code == 404, answer.text


def test_filtered_events_and_pings_start_nothing(hooked: Gateway) -> None:
    api = hooked.client(None)
    closed = PR.replace(b'"opened"', b'"closed"')
    answer = github(api, "pr", closed)
    assert (answer.status_code, answer.json()) == (200, {"ignored": "filtered"})
    push = github(api, "pr", b'{"ref": "refs/heads/main"}', event="push")
    assert (push.status_code, push.json()) == (200, {"ignored": "filtered"})
    ping = github(api, "pr", b'{"zen": "Design for failure.", "hook_id": 1}', event="ping")
    assert (ping.status_code, ping.json()) == (200, {"ignored": "ping"})
    assert no_daemon(hooked.home)


def test_a_template_field_missing_is_422(hooked: Gateway) -> None:
    body = b'{"action": "opened", "pull_request": {"title": "no url"}}'
    answer = github(hooked.client(None), "pr", body)
    assert answer.status_code == 422, answer.text
    assert "pull_request.html_url" in answer.json()["error"]
    assert no_daemon(hooked.home)


def test_no_token_needed_and_a_token_does_not_replace_the_signature(hooked: Gateway) -> None:
    answer = hooked.client("admin").post("/hooks/pr", content=PR)  # a Bearer token, no HMAC
    assert answer.status_code == 401, answer.text
    # every other route still wants a token
    assert hooked.client(None).get("/api/hooks").status_code == 401


def test_api_hooks_lists_them_for_a_read_token(hooked: Gateway, tmp_path: Path) -> None:
    add_hook(
        hooked.home,
        tmp_path,
        "nightly",
        "--agent-id",
        "night",
        "--new",
        "--agent",
        "demo",
        "--env",
        "DEPLOY_TOKEN=tok-0123456789",
        "Build {ref}",
    )
    reader = hooked.add_token("reader", "read")
    listed = hooked.client(reader).get("/api/hooks")
    assert listed.status_code == 200, listed.text
    hooks = {h["name"]: h for h in listed.json()["hooks"]}
    assert hooks["pr"]["target"] == {"agent_id": "reviewer"}
    assert hooks["pr"]["events"] == ["pull_request.opened"]
    assert hooks["nightly"]["target"]["new"]["agent_id"] == "night"
    assert hooks["nightly"]["path"] == "/hooks/nightly"
    assert SECRET not in listed.text
    # a new agent's environment values are not for a read token, nor for a terminal
    assert hooks["nightly"]["target"]["new"]["env"] == {"DEPLOY_TOKEN": "<redacted>"}
    assert "tok-0123456789" not in listed.text
    shown = hook_cli(hooked.home, "list", "--json")
    assert shown.returncode == 0 and "tok-0123456789" not in shown.stdout
    assert "DEPLOY_TOKEN" in shown.stdout


def test_an_untrusted_definition_is_refused_with_500_and_logged(hooked: Gateway) -> None:
    definition = hooked.home / "webhooks" / "pr.toml"
    definition.chmod(0o666)
    answer = github(hooked.client(None), "pr", PR)
    assert answer.status_code == 500, answer.text
    assert "writable by others" in hooked.log()
    definition.chmod(0o600)


@pytest.mark.parametrize(
    "args",
    [
        ["--agent-id", "r", "x {a b}"],
        ["--agent-id", "r", "{a!r}"],
        ["--agent-id", "r", "x { y"],
        ["--agent-id", "r", "{}"],
        ["--agent-id", "r", "--event", "a.b.c", "x"],
        ["--agent-id", "../r", "x"],
        ["x"],
        ["--new", "x"],
        ["--agent-id", "r", "--cwd", "/", "x"],
        ["--agent-id", "r", "--new", "--agent", "nosuch", "x"],
        ["--agent-id", "r", "--new", "--worktree", "x", "--cwd", "/", "x"],
    ],
)
def test_hook_add_refuses_garbage(home: Path, args: list[str]) -> None:
    done = hook_cli(home, "add", "h", *args)
    assert done.returncode != 0
    assert not (home / "webhooks" / "h.toml").exists()


def test_hook_rm_of_no_hook_fails(home: Path) -> None:
    done = hook_cli(home, "rm", "none")
    assert done.returncode != 0
    assert not (home / "webhooks" / "h.toml").exists()


def test_hook_add_refuses_a_secret_file_others_can_read(home: Path, tmp_path: Path) -> None:
    secret = tmp_path / "s"
    secret.write_text(SECRET)
    os.chmod(secret, 0o644)
    done = hook_cli(home, "add", "h", "--agent-id", "r", "--secret-file", str(secret), "x")
    assert done.returncode != 0 and "readable by others" in done.stderr
    assert not (home / "webhooks" / "h.toml").exists()
