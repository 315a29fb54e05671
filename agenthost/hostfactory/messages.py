"""What the daemon and its host factory say to each other: sans-IO.

One JSON object per datagram of a ``SOCK_SEQPACKET`` socket pair (the kernel keeps the
message boundaries: no framing of our own). The daemon sends :class:`Order` (start a
host); the factory answers each order, in order, with :class:`Started` or
:class:`Refused`, and says :class:`Exited` whenever a host it started has ended (it is
their reaper while it lives). Both sides check what they receive: anything else is a
:class:`~agenthost.errors.FactoryError`, never a crash of the reader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agenthost.errors import FactoryError

MAX_MESSAGE: Final = 1 << 20
"""Largest message either side accepts (an order carries the host's environment)."""


@dataclass(frozen=True, slots=True)
class Order:
    """Start a host: ``agenthost serve ARGV`` in ``cwd`` with exactly ``env``, its
    output appended to ``log``, shown by ``ps`` as ``title``."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    log: str
    title: str


@dataclass(frozen=True, slots=True)
class Started:
    """The host of the last order runs, as ``pid``."""

    pid: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The last order could not be carried out (e.g. fork failed); ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Exited:
    """A host the factory started has ended; ``status`` as :class:`subprocess.Popen`
    reports it (the exit code, or minus the signal that killed it)."""

    pid: int
    status: int


Reply = Started | Refused | Exited


def encode(message: Order | Reply) -> bytes:
    """The datagram that carries ``message``."""
    match message:
        case Order():
            body: dict[str, Any] = {
                "order": "start",
                "argv": list(message.argv),
                "env": dict(message.env),
                "cwd": message.cwd,
                "log": message.log,
                "title": message.title,
            }
        case Started():
            body = {"started": message.pid}
        case Refused():
            body = {"refused": message.reason}
        case Exited():
            body = {"exited": message.pid, "status": message.status}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise FactoryError(f"a factory message of {len(data)} bytes is over {MAX_MESSAGE}")
    return data


def decode_order(data: bytes) -> Order:
    """The order in ``data``; FactoryError if it is not one."""
    body = _object(data)
    if body.get("order") != "start":
        raise FactoryError(f"not a factory order: {_preview(data)}")
    argv = _strings(body.get("argv"), "argv")
    env = body.get("env")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and k and "=" not in k and "\0" not in k and isinstance(v, str)
        for k, v in env.items()
    ):
        raise FactoryError("a factory order's env is not an object of variables and strings")
    env = {key: _string(value, "env") for key, value in env.items()}
    cwd, log, title = (_string(body.get(key), key) for key in ("cwd", "log", "title"))
    return Order(tuple(argv), env, cwd, log, title)


def decode_reply(data: bytes) -> Reply:
    """The factory's message in ``data``; FactoryError if it is not one."""
    body = _object(data)
    if "started" in body:
        return Started(_pid(body["started"]))
    if "refused" in body:
        return Refused(_string(body["refused"], "refused"))
    if "exited" in body:
        status = body.get("status")
        if not isinstance(status, int) or isinstance(status, bool):
            raise FactoryError("a factory's exit notice has no integer status")
        return Exited(_pid(body["exited"]), status)
    raise FactoryError(f"not a factory message: {_preview(data)}")


def _object(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_MESSAGE:
        raise FactoryError(f"a factory message of {len(data)} bytes is over {MAX_MESSAGE}")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:  # (UnicodeDecodeError is a ValueError)
        raise FactoryError(f"a factory message is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise FactoryError(f"a factory message is not a JSON object: {_preview(data)}")
    return body


def _string(value: object, what: str) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise FactoryError(f"a factory message's {what} is not a string without NUL")
    return value


def _strings(value: object, what: str) -> Sequence[str]:
    if not isinstance(value, list):
        raise FactoryError(f"a factory message's {what} is not a list")
    return [_string(item, what) for item in value]


def _pid(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise FactoryError(f"a factory message names no process: {value!r}")
    return value


def _preview(data: bytes) -> str:
    return repr(data[:80]) + ("..." if len(data) > 80 else "")
