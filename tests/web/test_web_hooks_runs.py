"""A signed delivery starts a run against a real daemon and the demo agent: the
rendered message reaches the agent (its journal has it), the same delivery replayed
is ignored (no second message), and the run shows in ``GET /api/hooks`` and ``hook
list --json``. The gateway runs under the tests' subreaper, so the daemon it starts
(and the hosts) end with the test."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemontools import DaemonWorld
from hosttools import wait_for
from webtools import gateway_of

SECRET = "the-secret-of-the-review-hook-0123456789"


@pytest.fixture
def served(world: DaemonWorld, tmp_path: Path) -> Iterator[tuple[httpx.Client, str]]:
    """A gateway on ``world``'s home: a client without credentials, and an admin token."""
    with gateway_of(world) as (url, token, log), httpx.Client(base_url=url, timeout=60) as api:
        yield api, token
    text = log.read_text()
    assert SECRET not in text  # neither the secret nor a body in the log
    assert "Please review" not in text


def add_hook(world: DaemonWorld, tmp_path: Path, name: str, *args: str) -> None:
    secret = tmp_path / f"{name}.secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    done = world.cli("hook", "add", name, "--secret-file", str(secret), *args)
    assert done.returncode == 0, done.stderr


def deliver(api: httpx.Client, name: str, payload: dict[str, Any], delivery: str) -> httpx.Response:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/json",
    }
    return api.post(f"/hooks/{name}", content=body, headers=headers)


def user_entries(world: DaemonWorld, agent_id: str) -> list[str]:
    """The user messages in the agent's journal (``agenthost export``: no host needed,
    as a new agent's is stopped when its turn ends)."""
    done = world.cli("export", agent_id)
    if done.returncode != 0:
        return []
    entries = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [e.get("content", "") for e in entries if e.get("role") == "user"]


PAYLOAD = {
    "action": "opened",
    "pull_request": {"title": "Fix \x1b[2Jthe parser", "html_url": "https://example.org/pr/7"},
}


def test_a_delivery_sends_to_the_agent_once(
    world: DaemonWorld, tmp_path: Path, served: tuple[httpx.Client, str]
) -> None:
    api, token = served
    started = world.cli("run", "--agent-id", "reviewer", "--agent", "demo", "--cwd", str(tmp_path))
    assert started.returncode == 0, started.stderr
    add_hook(
        world,
        tmp_path,
        "pr",
        "--agent-id",
        "reviewer",
        "--event",
        "pull_request.opened",
        "Please review {pull_request.html_url}: {pull_request.title}",
    )
    answer = deliver(api, "pr", PAYLOAD, "delivery-1")
    assert answer.status_code == 202, answer.text
    run = answer.json()["run"]
    assert run["source"] == "hook" and run["name"] == "pr" and run["key"] == "delivery-1"
    expected = "Please review https://example.org/pr/7: Fix \\x1b[2Jthe parser"
    wait_for(lambda: expected in user_entries(world, "reviewer"), what="the message")

    again = deliver(api, "pr", PAYLOAD, "delivery-1")
    assert again.status_code == 200, again.text
    assert again.json()["ignored"] == "replayed"
    assert again.json()["run"]["run_id"] == run["run_id"]
    # a later delivery is taken: had the replay sent a message, it would come before it
    later = deliver(
        api,
        "pr",
        {**PAYLOAD, "pull_request": {**PAYLOAD["pull_request"], "title": "2"}},
        "delivery-2",
    )
    assert later.status_code == 202, later.text
    wait_for(
        lambda: any(e.endswith(": 2") for e in user_entries(world, "reviewer")),
        what="the second message",
    )
    assert user_entries(world, "reviewer").count(expected) == 1

    listed = api.get("/api/hooks", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200, listed.text
    (hook,) = listed.json()["hooks"]
    assert {d["key"] for d in hook["deliveries"]} == {"delivery-1", "delivery-2"}
    cli = world.cli("hook", "list", "--json")
    assert cli.returncode == 0, cli.stderr
    assert len(json.loads(cli.stdout)["hooks"][0]["deliveries"]) == 2


def test_a_delivery_starts_a_new_agent(
    world: DaemonWorld, tmp_path: Path, served: tuple[httpx.Client, str]
) -> None:
    api, _ = served
    add_hook(world, tmp_path, "fresh", "--agent-id", "fresh", "--new", "--agent", "demo",
             "--cwd", str(tmp_path), "Look at {pull_request.html_url}")  # fmt: skip
    answer = deliver(api, "fresh", PAYLOAD, "d-new")
    assert answer.status_code == 202, answer.text
    run = answer.json()["run"]
    agent_id = wait_for(
        lambda: next(
            (
                r.get("agent_id")
                for r in json.loads(world.cli("hook", "list", "--json").stdout)["hooks"][0][
                    "deliveries"
                ]
                if r["run_id"] == run["run_id"] and r.get("agent_id")
            ),
            None,
        ),
        what="the run's agent",
    )
    assert agent_id.startswith("fresh-")
    wait_for(
        lambda: "Look at https://example.org/pr/7" in user_entries(world, agent_id),
        what="the message in the new agent's journal",
    )


def test_the_generic_scheme_without_a_delivery_id_is_keyed_by_its_body(
    world: DaemonWorld, tmp_path: Path, served: tuple[httpx.Client, str]
) -> None:
    api, _ = served
    started = world.cli("run", "--agent-id", "builder", "--agent", "demo", "--cwd", str(tmp_path))
    assert started.returncode == 0, started.stderr
    add_hook(world, tmp_path, "build", "--agent-id", "builder", "Build {ref} please")

    def post(body: bytes) -> httpx.Response:
        mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-Agenthost-Signature-256": f"sha256={mac}"}
        return api.post("/hooks/build", content=body, headers=headers)

    first = post(b'{"ref": "main"}')
    assert first.status_code == 202, first.text
    assert first.json()["run"]["key"].startswith("sha256:")
    assert first.json()["run"]["detail"]["scheme"] == "generic"
    replayed = post(b'{"ref": "main"}')
    assert (replayed.status_code, replayed.json()["ignored"]) == (200, "replayed")
    other = post(b'{"ref": "next"}')  # another body is another delivery
    assert other.status_code == 202, other.text
    wait_for(lambda: "Build next please" in user_entries(world, "builder"), what="the second")
    assert user_entries(world, "builder").count("Build main please") == 1
