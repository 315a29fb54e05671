"""Hostile input: property tests of the sans-IO decoders, then fuzzing a real host.

Sans-IO (``agenthost.wire.framing``, ``agenthost.protocol``, ``agenthost.models``): whatever
bytes arrive, the frame decoder and the request decoder return frames and requests or
raise our own errors, with a wire code; they never raise anything else. Every field of
every request payload is fed values of every JSON type, and a value of a type the
field does not take is always ``invalid_payload``.

Against a real host: hypothesis-generated frames over the socket, 10k requests
pipelined without reading, half-closed connections and thousands of connect/disconnect
cycles. The host never crashes, answers every frame with an error code where it is
malformed (never ``internal``, which would be a bug), answers ``host.ping`` afterwards,
and its descriptors and memory come back to where they were.

tests/integration/test_hostile.py has the table of single bad frames, the oversized
frame, 3000 pipelined pings, a non-reading client's backpressure, one half-closed
client and 1000 connect cycles; this file goes wider and measures.
"""

from __future__ import annotations

import json
import math
import os
import random
import selectors
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from relkit import QUIET, Figure, HostFactory, connect, fd_count, request_bytes, rss

from agenthost.agents import make_adapter
from agenthost.errors import AgentHostError, ErrorCode, FrameTooLarge, ProtocolError
from agenthost.models import REQUEST_PAYLOADS, MessageType, SendRequest
from agenthost.protocol import (
    RequestError,
    decode_message,
    decode_request,
    encode_error,
    validate_payload,
)
from agenthost.wire.framing import FrameDecoder

from hosttools import HostProc, RawConn, wait_for

MiB = 1 << 20
AGENT_KINDS = ("claude", "codex", "demo", "lines")
CODES = {str(code) for code in ErrorCode}
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ----------------------------------------------------------------------

# all of Unicode, lone surrogates included (JSON can carry them as \\udXXX escapes:
# half an emoji from a client that cut a string in the middle of a surrogate pair),
# with the characters that matter to JSON, to lines and to surrogates made likely
TRICKY = ["\ud800", "\udfff", "\ud83d", "\U0001f600", "\x00", "\n", "\r", '"', "\\", "\u2028"]
any_text = st.text(st.characters(exclude_categories=[]), max_size=30) | st.lists(
    st.sampled_from(TRICKY) | st.text(max_size=3), max_size=8
).map("".join)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities too: json.dumps writes NaN / Infinity
    | any_text
    | st.sampled_from([10**300, -(2**64), 1e308, -0.0, "", "\x00", "\ud800"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
TYPES = [str(t) for t in MessageType]
request_types = st.sampled_from(TYPES) | any_text | json_values
versions = st.sampled_from(["1.0", "1.1", "1.99", "2.0", "0.9", "01.0", "1.", "x"]) | json_values


@st.composite
def envelopes(draw: st.DrawFn, types: st.SearchStrategy[Any] = request_types) -> dict[str, Any]:
    """A request object: any of its envelope fields present or not, of any type."""
    obj: dict[str, Any] = {}
    if draw(st.integers(0, 9)):  # mostly present
        obj["type"] = draw(types)
    if draw(st.booleans()):
        obj["id"] = draw(json_values)
    if draw(st.booleans()):
        obj["protocol_version"] = draw(versions)
    if draw(st.booleans()):
        obj["payload"] = draw(json_values | payloads(obj.get("type")))
    if draw(st.booleans()):
        obj[draw(any_text)] = draw(json_values)
    return obj


def payloads(mtype: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Payload objects whose keys are the fields of ``mtype``'s model, values anything."""
    model = REQUEST_PAYLOADS.get(MessageType(mtype)) if mtype in TYPES else None
    fields = sorted(model.model_fields) if model else ["offset", "input"]
    fields = fields or ["offset"]  # requests without fields ignore unknown ones
    return st.dictionaries(st.sampled_from(fields), json_values, max_size=len(fields))


def dumps(obj: Any) -> bytes:
    """JSON with lone surrogates as \\u escapes, as a peer in another language may write."""
    return json.dumps(obj, ensure_ascii=True).encode()


raw_frames = st.one_of(
    st.binary(max_size=200),
    st.builds(dumps, json_values),
    st.builds(dumps, envelopes()),
    st.builds(lambda b, o: dumps(o)[: len(b)] + b, st.binary(max_size=20), envelopes()),
    st.sampled_from(
        [
            b"[" * 100_000,
            b'{"a":' * 50_000,
            b'{"type": "host.ping", "id": ' + b"9" * 5000 + b"}",
            b'{"type": "host.ping", "id": 1e999999}',
            b'{"type": "host.send", "payload": {"input": "' + b"\xe2\x82" * 1000 + b'"}}',
            b'{"type": "host.ping", "id": "\\ud800"}',
            b'{"type": "host.attach", "payload": {"offset": 1' + b"0" * 400 + b"}}",
            b'\xef\xbb\xbf{"type": "host.ping"}',  # a byte-order mark
            b'{"type": "host.ping"}' + b" " * 1000 + b"x",
        ]
    ),
)


# --- sans-IO: framing ------------------------------------------------------------------


def reference_frames(blob: bytes, limit: int) -> list[bytes | None]:
    """What the documented framing makes of ``blob`` (None: frame too large, and the
    decoder is closed after it)."""
    out: list[bytes | None] = []
    *complete, tail = blob.split(b"\n")
    for piece in complete:
        line = piece[:-1] if piece.endswith(b"\r") else piece
        if len(line) > limit:
            return [*out, None]
        if line:
            out.append(line)
    if len(tail) > limit + 1:  # its '\r' may still be the one stripped
        out.append(None)
    return out


framing_bytes = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b"{}", b"xyz" * 5, b"\xff", b" "]), max_size=60
).map(b"".join) | st.binary(max_size=300)


@FUZZ
@given(blob=framing_bytes, limit=st.integers(1, 40), cuts=st.lists(st.integers(0, 300)))
def test_frame_decoder_matches_the_documented_framing_however_the_bytes_arrive(
    blob: bytes, limit: int, cuts: list[int]
) -> None:
    decoder = FrameDecoder(limit)
    got: list[bytes | None] = []
    points = sorted({c for c in cuts if c < len(blob)} | {0, len(blob)})
    for a, b in zip(points, points[1:], strict=False):
        for item in decoder.feed(blob[a:b]):
            if isinstance(item, FrameTooLarge):
                assert item.code is ErrorCode.FRAME_TOO_LARGE
                got.append(None)
            else:
                got.append(item)
    assert got == reference_frames(blob, limit)
    if None in got:
        assert decoder.closed and decoder.feed(b'{"type": "host.ping"}\n') == []


# --- sans-IO: requests -----------------------------------------------------------------


def serve_frame(frame: bytes) -> tuple[MessageType, BaseModel] | dict[str, Any]:
    """What the host's request edge makes of one frame: the request, or the error
    frame it would send (decoded, after checking it is one valid UTF-8 JSON line)."""
    try:
        request = decode_request(frame)
        return validate_payload(request)
    except RequestError as exc:
        wire = encode_error(exc.request_type, exc.request_id, exc.code, exc.message)
    assert wire.endswith(b"\n") and wire.count(b"\n") == 1
    error: dict[str, Any] = json.loads(wire.decode("utf-8"))  # strict: valid UTF-8
    assert error["success"] is False and error["code"] in CODES, error
    assert error["code"] != ErrorCode.INTERNAL
    assert isinstance(error["error"], str) and error["error"]
    return error


@FUZZ
@given(frame=raw_frames)
@example(frame=b"\xff\xfe\xfd")
@example(frame=b'{"type": "host.ping", "n": ' + b"1" * 100_000 + b"}")
@example(frame=b'{"type": "host.send", "payload": {"input": "' + b"x" * (1 << 20) + b'"}}')
@example(frame=b"[" * 1_000_000)
def test_request_decoding_raises_nothing_but_request_errors(frame: bytes) -> None:
    result = serve_frame(frame)
    if isinstance(result, tuple):
        mtype, payload = result
        assert isinstance(payload, REQUEST_PAYLOADS[mtype])


# which JSON types each field takes, from the models' own JSON schema
PY_KINDS = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
VALID_REQUIRED = {"input": "x", "request_id": "r1", "behavior": "allow"}


def field_kinds(schema: dict[str, Any]) -> tuple[type, ...]:
    options = schema.get("anyOf", [schema])
    return tuple(k for option in options for k in PY_KINDS[option["type"]])


FIELDS = [
    (mtype, name, field_kinds(schema))
    for mtype, model in REQUEST_PAYLOADS.items()
    for name, schema in model.model_json_schema().get("properties", {}).items()
]


def is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, kinds)


@FUZZ
@given(field=st.sampled_from(FIELDS), value=json_values)
def test_every_payload_field_refuses_values_of_the_wrong_type(
    field: tuple[MessageType, str, tuple[type, ...]], value: Any
) -> None:
    mtype, name, kinds = field
    model = REQUEST_PAYLOADS[mtype]
    payload: dict[str, Any] = {k: v for k, v in VALID_REQUIRED.items() if k in model.model_fields}
    payload[name] = value
    result = serve_frame(dumps({"type": str(mtype), "id": 7, "payload": payload}))
    if not is_kind(value, kinds):
        assert isinstance(result, dict), f"{mtype} {name}={value!r} was accepted"
    if isinstance(result, dict):
        assert result["code"] == ErrorCode.INVALID_PAYLOAD, result
        assert result["type"] == mtype and result["id"] == 7


NASTY: list[Any] = [10**400, -(10**400), 2**63, -1, 1e308, -0.0, math.nan, math.inf, -math.inf]
NASTY += [None, True, False, "", "\ud800", "x" * 100_000, [], [[[]]], {}, {"": None}]


def test_every_payload_field_with_every_nasty_value() -> None:
    # the deterministic companion of the property above: each field, each edge value
    for mtype, name, kinds in FIELDS:
        model = REQUEST_PAYLOADS[mtype]
        for value in NASTY:
            payload: dict[str, Any] = {
                k: v for k, v in VALID_REQUIRED.items() if k in model.model_fields
            }
            payload[name] = value
            result = serve_frame(dumps({"type": str(mtype), "id": 1, "payload": payload}))
            if not is_kind(value, kinds):
                assert isinstance(result, dict), f"{mtype} {name}={value!r} was accepted"
            if isinstance(result, dict):
                assert result["code"] == ErrorCode.INVALID_PAYLOAD, (name, value, result)


def test_every_request_type_has_its_fields_fuzzed() -> None:
    # the field list comes from the models: a new field is fuzzed without a test edit
    fuzzed = {mtype for mtype, _, _ in FIELDS}
    takes_fields = {m for m, model in REQUEST_PAYLOADS.items() if model.model_fields}
    assert fuzzed == takes_fields and len(FIELDS) >= 12


@FUZZ
@given(text=any_text | st.text(max_size=2000))
def test_a_valid_send_is_encodable_by_every_adapter(text: str) -> None:
    # host.send validates the payload, records it, then the adapter encodes it for
    # the agent's stdin: nothing the edge lets through may break the adapter
    result = serve_frame(dumps({"type": "host.send", "payload": {"input": text}}))
    assert isinstance(result, tuple)
    payload = result[1]
    assert isinstance(payload, SendRequest)
    for kind in AGENT_KINDS:
        for event in make_adapter(kind).send(payload.input):
            data = getattr(event, "data", b"")
            assert isinstance(data, bytes | str)


@FUZZ
@given(frame=raw_frames | st.builds(dumps, st.fixed_dictionaries({"kind": json_values})))
def test_client_side_decoding_raises_only_protocol_errors(frame: bytes) -> None:
    try:
        decode_message(frame)
    except ProtocolError as exc:
        assert isinstance(exc, AgentHostError) and exc.code in ErrorCode


# --- a real host ------------------------------------------------------------------------

CAT = ["cat"]
# types a fuzzer may send with a valid payload without changing the host under test:
# host.stop would stop the agent and host.interrupt would SIGINT it
HARMLESS = [t for t in TYPES if t not in (MessageType.STOP, MessageType.INTERRUPT)]
host_frames = st.one_of(
    st.binary(max_size=200),
    st.builds(dumps, json_values),
    st.builds(dumps, envelopes(st.sampled_from(HARMLESS) | any_text)),
    st.sampled_from(
        [
            b"[" * 100_000,
            b'{"type": "host.ping", "id": 1' + b"0" * 5000 + b"}",
            b'{"type": "host.send", "payload": {"input": "half an emoji \\ud83d"}}',
        ]
    ),
)


def decoded_frames(blob: bytes) -> list[bytes]:
    """The frames the host will answer in ``blob`` (no frame here is too large)."""
    items = FrameDecoder().feed(blob)
    frames = [i for i in items if not isinstance(i, FrameTooLarge)]
    assert len(frames) == len(items)
    return frames


@dataclass
class Baseline:
    """A connection the host has accepted (kept open to the end of the test, so the
    descriptor counts before and after both include it), and the host's descriptors
    and RSS with it open."""

    keep: RawConn
    fds: int
    rss: int
    targets: list[str]


Gauges = Callable[[HostProc], Baseline]


@pytest.fixture
def gauges() -> Iterator[Gauges]:
    """``gauges(host)``: the host's baseline; its connection is closed at teardown."""
    kept: list[RawConn] = []

    def measure(host: HostProc) -> Baseline:
        keep = host.raw()
        kept.append(keep)
        assert keep.request("host.ping")["success"]
        return Baseline(keep, fd_count(host.pid), rss(host.pid), fd_targets(host.pid))

    yield measure
    for keep in kept:
        keep.close()


def fd_targets(pid: int) -> list[str]:
    """What the host's descriptors point at (for a failure message)."""
    out = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            out.append(f"{fd}->{os.readlink(f'/proc/{pid}/fd/{fd}')}")
        except OSError:
            pass  # closed meanwhile
    return out


def settle_fds(host: HostProc, base: Baseline) -> int:
    """Wait until the host has noticed every closed connection: back to the baseline."""
    try:
        return wait_for(
            lambda: (n := fd_count(host.pid)) <= base.fds and n,
            60,
            f"host descriptors back to {base.fds}",
        )
    except AssertionError as exc:
        now = fd_targets(host.pid)
        extra = [t for t in now if t not in base.targets]
        raise AssertionError(f"{exc}: {len(now)} open, new ones: {extra}") from None


def test_fuzzed_frames_get_error_codes_from_a_real_host(
    host_factory: HostFactory, figure: Figure, gauges: Gauges
) -> None:
    host = host_factory("fuzz", "--agent", "lines", *QUIET, command=CAT)
    base = gauges(host)
    keep, fds_before, rss_before = base.keep, base.fds, base.rss
    stats = {"frames": 0, "errors": 0}

    @settings(
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(frames=st.lists(host_frames, min_size=1, max_size=8))
    def fuzz(frames: list[bytes]) -> None:
        blob = b"\n".join(frames) + b"\n"
        assume(len(blob) < 900_000)
        frames_in = decoded_frames(blob)
        expected = len(frames_in)
        with host.raw(timeout=30) as conn:
            conn.send_raw(blob)
            conn.send("host.ping", id="sentinel")
            answers: list[dict[str, Any]] = []
            while True:
                resp = conn.response()  # (events, after an attach, are set aside)
                if resp.get("id") == "sentinel" and resp["success"] and "payload" in resp:
                    if len(answers) == expected:
                        break
                answers.append(resp)
        assert len(answers) == expected
        for frame, resp in zip(frames_in, answers, strict=True):
            predicted = serve_frame(frame)
            if isinstance(predicted, dict):  # the edge refuses it: the same answer
                assert (resp["code"], resp["type"]) == (predicted["code"], predicted["type"])
            if not resp["success"]:
                assert resp["code"] in CODES and resp["code"] != "internal", resp
                assert resp["error"]
                stats["errors"] += 1
        stats["frames"] += expected

    fuzz()
    assert keep.request("host.ping")["success"]
    assert keep.request("host.status")["payload"]["agent"]["state"] == "running"
    fds_after = settle_fds(host, base)
    keep.close()
    rss_after = rss(host.pid)
    figure("fuzz frames answered", stats["frames"], "frames", errors=stats["errors"])
    figure("fuzz host descriptors before/after", fds_after - fds_before, "fds", before=fds_before)
    figure("fuzz host RSS growth", (rss_after - rss_before) / MiB, "MiB")
    assert rss_after - rss_before < 64 * MiB


PIPELINED = [
    (b'{"type": "host.ping", "id": %d}', None),
    (b'{"type": "host.status", "id": %d}', None),
    (b'{"type": "host.history", "id": %d, "payload": {"limit": 5}}', None),
    (b'{"type": "host.nope", "id": %d}', "unknown_type"),
    (b'{"type": "host.attach", "id": %d, "payload": {"offset": -1}}', "invalid_payload"),
    (b'{"type": "host.ping", "id": %d, "protocol_version": "9.0"}', "version_unsupported"),
    (b'{"type": "host.ping", "id": %d, "oops"', "bad_request"),
]


def test_10k_pipelined_requests_sent_before_reading_are_all_answered_in_order(
    host_factory: HostFactory, figure: Figure, gauges: Gauges
) -> None:
    total = 10_000
    host = host_factory("pipe", "--agent", "lines", *QUIET, command=CAT)
    base = gauges(host)
    keep, fds_before, rss_before = base.keep, base.fds, base.rss
    kinds = [i % len(PIPELINED) for i in range(total)]
    out = b"".join(PIPELINED[k][0] % i + b"\n" for i, k in enumerate(kinds))
    sock = connect(host.socket_path)
    sock.setblocking(False)
    start = time.monotonic()
    sent = 0
    try:
        # write without reading until the host stops reading us (its answers back up)
        while sent < len(out):
            try:
                sent += sock.send(out[sent : sent + 65536])
            except BlockingIOError:
                break
        pushed_back_at = sent
        # the host throttles this client, and serves others meanwhile
        assert keep.request("host.ping")["success"]
        rss_blocked = rss(host.pid)
        # now read and write as the socket allows, until every answer is in
        answers: list[dict[str, Any]] = []
        buf = b""
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        deadline = time.monotonic() + 120
        while len(answers) < total:
            assert time.monotonic() < deadline, f"{len(answers)} answers after 120 s"
            if sent == len(out):
                sel.modify(sock, selectors.EVENT_READ)
            for _, mask in sel.select(1.0):
                if mask & selectors.EVENT_WRITE and sent < len(out):
                    try:
                        sent += sock.send(out[sent : sent + 65536])
                    except BlockingIOError:
                        pass
                if mask & selectors.EVENT_READ:
                    chunk = sock.recv(1 << 18)
                    assert chunk, "host closed the connection"
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    answers.extend(json.loads(line) for line in lines)
        elapsed = time.monotonic() - start
        sel.close()
    finally:
        sock.close()
    assert sent == len(out) > 0
    bad = [
        (i, a)
        for i, a in enumerate(answers)
        if a.get("code") != PIPELINED[kinds[i]][1]
        or (a["id"] != i and PIPELINED[kinds[i]][1] != "bad_request")
    ]
    assert not bad, bad[:3]
    fds_after = settle_fds(host, base)
    keep.close()
    rss_after = rss(host.pid)
    figure("pipelined requests answered/s", total / elapsed, "requests/s", requests=total)
    figure("pipelined bytes sent before the host pushed back", pushed_back_at, "bytes")
    figure("pipelined host RSS growth while blocked", (rss_blocked - rss_before) / MiB, "MiB")
    figure("pipelined host RSS growth after", (rss_after - rss_before) / MiB, "MiB")
    figure("pipelined host descriptors after - before", fds_after - fds_before, "fds")
    assert rss_blocked - rss_before < 64 * MiB and rss_after - rss_before < 64 * MiB


def test_half_closed_connections_get_their_answers_and_their_stream(
    host_factory: HostFactory, figure: Figure, gauges: Gauges
) -> None:
    host = host_factory("half", "--agent", "lines", *QUIET, command=CAT)
    base = gauges(host)
    keep, fds_before = base.keep, base.fds
    asks = b'{"type": "host.ping", "id": 1}\n{"bad\n{"type": "host.status", "id": 3}\n'
    plain = [connect(host.socket_path) for _ in range(100)]
    streams = [connect(host.socket_path) for _ in range(20)]
    halves = [connect(host.socket_path) for _ in range(20)]
    try:
        for s in plain:
            s.sendall(asks)
            s.shutdown(socket.SHUT_WR)
        for s in streams:
            s.sendall(request_bytes("host.attach", {"offset": 1 << 62}, rid="a"))
            s.shutdown(socket.SHUT_WR)
        for s in halves:
            s.sendall(b'{"type": "host.status", "id": "never fini')
            s.shutdown(socket.SHUT_WR)
        # not attached: every answer, then the host closes the connection
        for s in plain:
            s.settimeout(30)
            got = read_to_eof(s)
            answers = [json.loads(line) for line in got.splitlines()]
            assert [a["id"] for a in answers] == [1, None, 3]
            assert [a.get("code") for a in answers] == [None, "bad_request", None]
        # half a frame and then EOF: nothing to answer, the connection is closed
        for s in halves:
            s.settimeout(30)
            assert read_to_eof(s) == b""
        # attached: the stream goes on after the client's EOF
        for s in streams:
            s.settimeout(30)
            assert json.loads(read_line(s))["success"]
        offset = keep.request("host.send", {"input": "still there?"})["payload"]["offset"]
        for s in streams:
            event = json.loads(read_line(s))
            assert event["offset"] == offset and event["type"] == "chat_entry"
            echo = json.loads(read_line(s))
            assert echo["offset"] == offset + 1 and echo["data"] == "still there?"
    finally:
        for s in plain + streams + halves:
            s.close()
    fds_after = settle_fds(host, base)
    figure("half-closed host descriptors after - before", fds_after - fds_before, "fds")
    assert keep.request("host.ping")["success"]
    keep.close()


def read_to_eof(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def read_line(sock: socket.socket) -> bytes:
    """One line, read a byte at a time (so nothing after it is consumed)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = sock.recv(1)
        assert byte, "connection closed"
        line += byte
    return line


RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection


def one_cycle(i: int, path: Any) -> socket.socket | None:
    """Connect, do variant ``i % 8`` of a short and rude life, maybe leave it open."""
    s = connect(path)
    variant = i % 8
    if variant == 1:
        s.sendall(b'{"type": "host.ping"}\n')  # and never read the answer
    elif variant == 2:
        s.sendall(b'{"type": "host.att')  # gone mid-frame
    elif variant == 3:
        s.sendall(b'{"type": "host.attach", "payload": {"offset": 0}}\n')  # attached, gone
    elif variant == 4:
        s.sendall(b'{"type": "host.ping"}\n')
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RST)
    elif variant == 5:
        s.sendall(b'{"type": "host.ping"}\n' * 100)
        s.shutdown(socket.SHUT_RDWR)
    elif variant == 6:
        s.sendall(b'{"type": "host.status"}\n')
        s.settimeout(30)
        assert s.recv(65536)
    elif variant == 7:
        return s  # left open for a while, closed later
    s.close()
    return None


@pytest.mark.parametrize("cycles", [3000])
def test_thousands_of_rude_connections_leak_nothing(
    host_factory: HostFactory, figure: Figure, gauges: Gauges, cycles: int
) -> None:
    host = host_factory("cycle", "--agent", "lines", *QUIET, command=CAT)
    base = gauges(host)
    keep, fds_before, rss_before = base.keep, base.fds, base.rss
    for i in range(20):  # give the agent a few events to replay to attachers
        keep.request("host.send", {"input": f"line {i}"})
    open_now: deque[socket.socket] = deque()
    start = time.monotonic()
    try:
        for i in range(cycles):
            kept = one_cycle(i, host.socket_path)
            if kept is not None:
                open_now.append(kept)
            if len(open_now) > 64:
                open_now.popleft().close()
    finally:
        while open_now:
            open_now.popleft().close()
    elapsed = time.monotonic() - start
    assert keep.request("host.ping")["success"]
    fds_after = settle_fds(host, base)
    keep.close()
    rss_after = rss(host.pid)
    assert host.alive()
    figure("connect/disconnect cycles/s", cycles / elapsed, "cycles/s", cycles=cycles)
    figure("cycles host descriptors before", fds_before, "fds")
    figure("cycles host descriptors after", fds_after, "fds")
    figure("cycles host RSS growth", (rss_after - rss_before) / MiB, "MiB", cycles=cycles)
    assert rss_after - rss_before < 32 * MiB


def test_random_bytes_on_many_connections_at_once(host_factory: HostFactory) -> None:
    # 50 connections fed random frames interleaved, then each checked for its answers
    host = host_factory("many", "--agent", "lines", *QUIET, command=CAT)
    rng = random.Random(7)
    conns = [RawConn(host.socket_path, 30) for _ in range(50)]
    try:
        expected = [0] * len(conns)
        for _ in range(20):
            for n, conn in enumerate(conns):
                blob = rng.randbytes(rng.randint(1, 300)).replace(b"\n", b" ") + b"\n"
                expected[n] += len(decoded_frames(blob))
                conn.send_raw(blob)
        for n, conn in enumerate(conns):
            conn.send("host.ping", id="end")
            got = 0
            while (resp := conn.response())["id"] != "end":
                assert resp["code"] in CODES and resp["code"] != "internal", resp
                got += 1
            assert got == expected[n]
    finally:
        for conn in conns:
            conn.close()
    assert host.alive()


def test_half_an_emoji_in_a_send_reaches_the_agent_as_a_replacement_character(
    host_factory: HostFactory,
) -> None:
    # found by the fuzzers above: a lone surrogate in host.send's input made the lines
    # adapter fail with an internal error; it now becomes U+FFFD, as in host frames
    host = host_factory("emoji", "--agent", "lines", *QUIET, command=CAT)
    with host.raw() as conn:
        conn.request("host.attach", {"offset": 1 << 62})
        conn.send_raw(b'{"type": "host.send", "id": "s", "payload": {"input": "cut \\ud83d"}}\n')
        assert conn.response("s")["success"]
        entry = conn.read_until(lambda f: f.get("type") == "chat_entry")
        echo = conn.read_until(lambda f: f.get("type") == "output")
    assert entry["chat_entry"]["content"] == echo["data"] == "cut \ufffd"
