"""Host.dispatch: a table of handlers, one per request type of the host protocol,
served in memory (no socket, no agent process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from agenthost.errors import AgentNotRunning
from agenthost.host.host import Host, HostConfig
from agenthost.host.server import Connection
from agenthost.models import REQUEST_PAYLOADS, AttachRequest, EmptyRequest, SendRequest
from agenthost.protocol import MessageType, Request


class FakeConn:
    """What a handler may do with its connection, recorded."""

    peer_pid = 4242

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def send(self, frame: bytes) -> None:
        self.calls.append(("send", json.loads(frame)))

    def attach(self, start: int) -> None:
        self.calls.append(("attach", start))

    def detach(self) -> None:
        self.calls.append(("detach", None))


@pytest.fixture
def host(home: Path) -> Host:
    return Host(HostConfig("d1", home, agent="lines", command=("cat",), project="p", journal=None))


def call(host: Host, mtype: MessageType, payload: Any = None, conn: FakeConn | None = None) -> Any:
    request = Request(type=mtype.value, id="r1")
    reply = host.dispatch(
        cast(Connection, conn or FakeConn()), mtype, payload or EmptyRequest(), request
    )
    return None if reply is None else json.loads(cast(bytes, reply))


def test_every_request_type_has_its_handler(host: Host) -> None:
    assert set(host.handlers) == set(MessageType) == set(REQUEST_PAYLOADS)


@pytest.mark.parametrize("mtype", [MessageType.PING, MessageType.STATUS, MessageType.LIST])
def test_a_request_without_payload_is_answered_with_its_type_and_id(
    host: Host, mtype: MessageType
) -> None:
    response = call(host, mtype)
    assert (response["kind"], response["type"], response["id"]) == ("response", mtype, "r1")
    assert response["success"] is True


def test_list_and_pending_describe_this_hosts_agent(host: Host) -> None:
    [agent] = call(host, MessageType.LIST)["payload"]["agents"]
    assert (agent["id"], agent["project"], agent["state"]) == ("d1", "p", "starting")
    assert call(host, MessageType.PENDING)["payload"] == {"requests": []}


def test_attach_writes_its_response_before_the_stream_starts(host: Host) -> None:
    conn = FakeConn()
    assert call(host, MessageType.ATTACH, AttachRequest(offset=0), conn) is None
    (kind, response), attach = conn.calls
    assert kind == "send" and response["type"] == "host.attach" and response["id"] == "r1"
    assert attach == ("attach", 1)


def test_detach_ends_the_stream_and_answers(host: Host) -> None:
    conn = FakeConn()
    assert call(host, MessageType.DETACH, conn=conn)["success"] is True
    assert conn.calls == [("detach", None)]


def test_a_handlers_refusal_propagates_for_the_server_to_answer(host: Host) -> None:
    with pytest.raises(AgentNotRunning):
        call(host, MessageType.SEND, SendRequest(input="hi"))
