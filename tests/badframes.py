"""Bad request frames and the error each must get (its code and the request type the
error echoes), shared by the in-memory test of the request side
(tests/unit/test_wire_connection.py) and the test against a real host
(tests/integration/test_hostile.py)."""

from __future__ import annotations

BAD_FRAMES: list[tuple[bytes, str, str]] = [
    (b"{not json", "bad_request", ""),
    (b"[1, 2]", "bad_request", ""),
    (b"42", "bad_request", ""),
    (b'"host.ping"', "bad_request", ""),
    (b"null", "bad_request", ""),
    (b"{}", "bad_request", ""),
    (b'{"type": 5}', "bad_request", ""),
    (b'{"type": ""}', "bad_request", ""),
    (b'{"type": "host.ping", "id": true}', "bad_request", "host.ping"),
    (b'{"type": "host.ping", "id": {"a": 1}}', "bad_request", "host.ping"),
    (b"\xff\xfe\xfd", "bad_request", ""),
    (b'{"type": "host.ping\xff"}', "bad_request", ""),
    (b"[" * 100_000, "bad_request", ""),
    (b'{"type": "host.ping", "n": 1' + b"0" * 5000 + b"}", "bad_request", ""),
    (b'{"type": "host.nope"}', "unknown_type", "host.nope"),
    (b'{"type": "host.attach", "payload": []}', "invalid_payload", "host.attach"),
    (b'{"type": "host.attach", "payload": "x"}', "invalid_payload", "host.attach"),
    (b'{"type": "host.attach", "payload": {"offset": "5"}}', "invalid_payload", "host.attach"),
    (b'{"type": "host.attach", "payload": {"offset": -1}}', "invalid_payload", "host.attach"),
    (b'{"type": "host.attach", "payload": {"offset": true}}', "invalid_payload", "host.attach"),
    (b'{"type": "host.attach", "payload": {"offset": 1.5}}', "invalid_payload", "host.attach"),
    (b'{"type": "host.history", "payload": {"limit": -3}}', "invalid_payload", "host.history"),
    (b'{"type": "host.send", "payload": {}}', "invalid_payload", "host.send"),
    (b'{"type": "host.send", "payload": {"input": 5}}', "invalid_payload", "host.send"),
    (b'{"type": "host.send", "payload": {"input": null}}', "invalid_payload", "host.send"),
    (b'{"type": "host.stop", "payload": {"timeout": "x"}}', "invalid_payload", "host.stop"),
    (b'{"type": "host.stop", "payload": {"timeout": -1}}', "invalid_payload", "host.stop"),
    (b'{"type": "host.stop", "payload": {"force": "yes"}}', "invalid_payload", "host.stop"),
    (b'{"type": "host.ping", "protocol_version": "2.0"}', "version_unsupported", "host.ping"),
    (b'{"type": "host.ping", "protocol_version": "0.9"}', "version_unsupported", "host.ping"),
    (b'{"type": "host.ping", "protocol_version": "one"}', "bad_request", "host.ping"),
    (b'{"type": "host.ping", "protocol_version": 1}', "bad_request", "host.ping"),
]
"""(frame without its newline, error code, echoed ``type``)."""
