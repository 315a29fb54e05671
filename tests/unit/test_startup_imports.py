"""What an exec'd host loads before it answers its first ping, and what it leaves for
later: pydantic and the models (over half of the start-up CPU when they were loaded and
built at import), psutil, the other adapters, the client.

Each check runs in a fresh interpreter: in this one, other tests have imported
everything long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel

from agenthost import models
from agenthost.names import NO_PAYLOAD, MessageType
from agenthost.protocol import (
    REQUEST_PAYLOADS,
    EmptyRequest,
    build_models,
    decode_request,
    host_messages,
    validate_payload,
    validate_request,
)


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    names: list[str] = json.loads(out.splitlines()[-1])
    return set(names)


def families(loaded: set[str], *names: str) -> list[str]:
    """Which of ``names`` (modules or packages) are in ``loaded``."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in loaded)]


# What the start-up path of ``serve`` imports of ours, up to the host's own modules
# (agenthost.host.*, which also import the wire server and the stream).
SERVE_ENTRY = (
    "import agenthost.cli, agenthost.cli.serve, agenthost.protocol, agenthost.wire.codec,"
    " agenthost.hostoptions, agenthost.log, agenthost.agents.lines, agenthost.lockfile,"
    " agenthost.paths, agenthost.sdnotify"
)


def test_the_serve_entry_and_the_protocol_load_no_pydantic_and_no_model() -> None:
    loaded = loaded_after(SERVE_ENTRY)
    assert families(loaded, "pydantic", "pydantic_core", "agenthost.models") == []


def test_the_host_path_leaves_the_rarely_needed_for_later() -> None:
    loaded = loaded_after(f"{SERVE_ENTRY}, agenthost.host.run, agenthost.host.host")
    # pydantic and the models: only the first request with a payload (or an attach)
    assert families(loaded, "pydantic", "pydantic_core", "agenthost.models") == []
    # psutil: only a forced kill needs it; difflib: only a mistyped name's hint
    assert families(loaded, "psutil", "difflib", "importlib.metadata") == []
    # the adapters of other kinds, the client side, the daemon, the terminal UI
    later = families(
        loaded,
        "agenthost.agents.claude",
        "agenthost.agents.codex",
        "agenthost.agents.demo",
        "agenthost.client",
        "agenthost.follow",
        "agenthost.daemon",
        "agenthost.cli.attach",
        "prompt_toolkit",
        "rich",
    )
    assert later == []


def test_a_ping_is_decoded_and_validated_without_pydantic() -> None:
    loaded = loaded_after(
        "from agenthost.protocol import decode_request, validate_request\n"
        'mtype, payload = validate_request(decode_request(b\'{"type":"host.ping","id":1}\'))\n'
        "assert mtype == 'host.ping' and payload is None"
    )
    assert families(loaded, "pydantic", "agenthost.models") == []


def test_the_types_without_a_payload_are_the_empty_request_ones() -> None:
    assert {t for t, m in REQUEST_PAYLOADS.items() if m is EmptyRequest} == set(NO_PAYLOAD)
    assert not EmptyRequest.model_fields  # so any payload object is valid: None says it all
    assert EmptyRequest.model_config.get("extra") == "ignore"


@pytest.mark.parametrize("mtype", list(MessageType))
def test_validate_request_is_validate_payload_with_none_for_no_payload(
    mtype: MessageType,
) -> None:
    payloads: dict[MessageType, dict[str, Any]] = {
        MessageType.SEND: {"input": "hi"},
        MessageType.RESPOND: {"request_id": "r", "behavior": "allow"},
        MessageType.INPUT: {"data": "x"},
        MessageType.RESIZE: {"cols": 80, "rows": 24},
        MessageType.SIGNAL: {"signal": "SIGINT"},
    }
    line = json.dumps({"type": str(mtype), "payload": payloads.get(mtype, {"x": 1})})
    request = decode_request(line.encode())
    got_type, payload = validate_request(request)
    want_type, model = validate_payload(request)
    assert got_type is want_type is mtype
    assert payload == (None if mtype in NO_PAYLOAD else model)


def test_build_models_builds_every_model_and_the_frame_validator() -> None:
    build_models()
    unbuilt = [
        name
        for name, value in vars(models).items()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == models.__name__
        and not value.__pydantic_complete__
    ]
    assert unbuilt == []
    assert host_messages().frame_adapter.pydantic_complete


def test_every_name_the_protocol_exports_resolves() -> None:
    """The models are given on first access: each name of ``__all__`` must come from
    somewhere (a model added to the TYPE_CHECKING imports but not to the lazy names
    would only fail when first used)."""
    import agenthost.protocol as protocol
    import agenthost.wire.codec as codec

    missing = [name for name in protocol.__all__ if not hasattr(protocol, name)]
    assert missing == []
    assert protocol.StreamEvent is models.StreamEvent
    assert codec.Response is protocol.Response is models.Response  # moved, still importable
    with pytest.raises(AttributeError):
        _ = protocol.NoSuchModel  # type: ignore[attr-defined]
