"""The bodies of a terminal agent's requests (``POST .../input``, ``.../resize``,
``.../signal``), checked before the host is asked: a garbage body is the gateway's 400,
never a host's error. Sans-IO. The protocol's side is docs/protocol.md (1.7)."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from agenthost.names import TERMINAL_COLS, TERMINAL_ROWS, TERMINAL_SIGNALS
from agenthost.web.payloads import bad_request, fields

SIGNALS: Final = TERMINAL_SIGNALS
"""The signals ``host.signal`` sends to the terminal's foreground process group."""
COLS: Final = TERMINAL_COLS
ROWS: Final = TERMINAL_ROWS


def input_body(obj: dict[str, Any]) -> dict[str, str]:
    """``{"data": str}`` (text, sent as UTF-8) or ``{"data_b64": str}`` (any bytes, in
    standard base64), exactly one, not empty: the payload of ``host.input``."""
    body = fields(obj, {}, {"data": str, "data_b64": str})
    if len(body) != 1:
        raise bad_request('give exactly one of "data" and "data_b64"')
    if "data" in body:
        text = body["data"]
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800") is no key
            raise bad_request('field "data" is not valid Unicode text') from None
        if not text:
            raise bad_request('field "data" is empty')
        return {"data": text}
    encoded = body["data_b64"]
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise bad_request('field "data_b64" is not standard base64') from None
    if not raw:
        raise bad_request('field "data_b64" is empty')
    return {"data_b64": encoded}


def _whole(value: Any, name: str, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise bad_request(f"field {name!r} must be a whole number from {low} to {high}")
    return value


def resize_body(obj: dict[str, Any]) -> dict[str, int]:
    """``{"cols": 2..1000, "rows": 1..1000}``: the payload of ``host.resize``."""
    body = fields(obj, {"cols": int, "rows": int})
    return {"cols": _whole(body["cols"], "cols", COLS), "rows": _whole(body["rows"], "rows", ROWS)}


def signal_body(obj: dict[str, Any]) -> dict[str, str]:
    """``{"signal": "SIGINT"}``, one of :data:`SIGNALS`: the payload of ``host.signal``."""
    name = fields(obj, {"signal": str})["signal"]
    if name not in SIGNALS:
        raise bad_request(f'field "signal" must be one of {", ".join(SIGNALS)}')
    return {"signal": name}
