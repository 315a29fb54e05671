"""Self-tests of what the three fake model APIs share (fakes.server): life cycle, URL,
reply queue, request log and waits, with a plain HTTP client (no CLI needed)."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fakes import anthropic, gemini, openai
from fakes.server import FakeServer

Fake = FakeServer[Any, Any]


@dataclass(frozen=True)
class Kind:
    """One fake and how to make it play a scripted reply."""

    name: str
    make: Callable[[], Fake]
    reply: Callable[[str], Any]
    turn_path: str
    turn_body: dict[str, Any]
    url_path: str
    unscripted: str
    """A piece of the default reply's text."""
    garbage: Any
    """How a body that is not JSON is recorded."""


KINDS = [
    Kind(
        "anthropic",
        anthropic.FakeAnthropic,
        anthropic.text,
        "/v1/messages",
        {"model": "m", "max_tokens": 1000, "tools": [{"name": "Bash"}], "messages": []},
        "",
        "no more scripted turns",
        "\x00\ufffdnot json{",  # kept as text
    ),
    Kind(
        "openai",
        openai.FakeOpenAI,
        openai.text,
        "/v1/responses",
        {"input": []},
        "/v1",
        openai.UNSCRIPTED_TEXT,
        None,
    ),
    Kind(
        "gemini",
        gemini.FakeGemini,
        gemini.text,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [], "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]},
        "",
        gemini.UNSCRIPTED_TEXT,
        None,
    ),
]


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    found: Kind = request.param
    return found


@pytest.fixture
def fake(kind: Kind) -> Iterator[Fake]:
    with kind.make() as made:
        yield made


def send(
    fake: Fake, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on a fresh connection; the status and the whole body."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        chunked = body is not None and not isinstance(body, bytes)
        conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def turn(kind: Kind, fake: Fake) -> bytes:
    """Ask for one agent turn; the answer's body."""
    status, data = send(fake, "POST", kind.turn_path, json.dumps(kind.turn_body).encode())
    assert status == 200, data
    return data


def turn_after(kind: Kind, fake: Fake) -> bytes:
    """Queue a reply saying "first answer" and ask for a turn."""
    fake.add(kind.reply("first answer"))
    return turn(kind, fake)


def test_life_cycle(kind: Kind) -> None:
    fake = kind.make()
    with pytest.raises(RuntimeError, match="not running"):
        _ = fake.port
    assert fake.start() is fake
    port = fake.port
    assert fake.start().port == port  # a second start keeps the server
    assert fake.url == f"http://127.0.0.1:{port}{kind.url_path}"
    fake.stop()
    fake.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = fake.url
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass


def test_replies_in_order_then_the_default(kind: Kind, fake: Fake) -> None:
    fake.add(kind.reply("first answer"), kind.reply("second answer"))
    assert fake.pending == 2
    assert b"first" in turn(kind, fake)
    assert fake.pending == 1
    fake.add(kind.reply("third answer"))  # while serving
    assert b"second" in turn(kind, fake) and b"third" in turn(kind, fake)
    assert fake.pending == 0
    unscripted = turn(kind, fake).decode()  # the queue is empty: the default, no hang
    assert kind.unscripted in unscripted and fake.pending == 0


def test_requests_recorded_in_order_and_copied(kind: Kind, fake: Fake) -> None:
    send(fake, "GET", "/nowhere")
    turn(kind, fake)
    seen = fake.requests
    assert [(r.method, r.path) for r in seen] == [("GET", "/nowhere"), ("POST", kind.turn_path)]
    assert seen[1].body == kind.turn_body
    seen.clear()  # a copy: the log is untouched
    assert len(fake.requests) == 2


def test_garbage_bodies_are_recorded_not_fatal(kind: Kind, fake: Fake) -> None:
    send(fake, "POST", "/x", b"\x00\xffnot json{")
    send(fake, "POST", "/x", b"")
    zipped = gzip.compress(json.dumps({"zipped": [1, 2]}).encode())
    send(fake, "POST", "/x", zipped, {"Content-Encoding": "gzip"})
    send(fake, "POST", "/x", iter([b'{"chun', b'ked": true}']))
    garbage, empty, unzipped, chunked = (r.body for r in fake.requests)
    assert garbage == kind.garbage
    assert empty is None
    assert unzipped == {"zipped": [1, 2]} and chunked == {"chunked": True}
    assert b"first" in turn_after(kind, fake)


def test_a_bad_request_head_leaves_the_server_serving(kind: Kind, fake: Fake) -> None:
    with socket.create_connection(("127.0.0.1", fake.port), timeout=10) as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nContent-Length: lots\r\n\r\n")
        sock.recv(1 << 16)  # whatever comes back (or EOF): the handler gave up
    assert b"first" in turn_after(kind, fake)


def test_wait_until(kind: Kind, fake: Fake) -> None:
    fake.wait_until(lambda f: not f.requests, 1)  # already true: no wait
    with pytest.raises(TimeoutError, match=rf"fake-{kind.name}: .* waiting for a miracle"):
        fake.wait_until(lambda f: False, 0.05, "a miracle")
    with pytest.raises(TimeoutError, match="described late: 0 requests"):
        fake.wait_until(
            lambda f: False, 0.05, lambda: f"described late: {len(fake.requests)} requests"
        )
    client = threading.Thread(target=send, args=(fake, "GET", "/wake"))
    client.start()
    fake.wait_until(lambda f: any(r.path == "/wake" for r in f.requests), 10, "the request")
    client.join(10)
