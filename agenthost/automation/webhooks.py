"""Signed webhooks, the decisions without I/O: is a delivery signed with the hook's
secret, which event it is, does the hook want it, and the message its template makes
of the payload. :mod:`agenthost.web.hooks` applies them to ``POST /hooks/NAME``.

Two signature schemes, one HMAC-SHA256 of the raw body keyed with the hook's secret,
written ``sha256=<64 hex digits>``:

- GitHub's: ``X-Hub-Signature-256``, the delivery's id in ``X-GitHub-Delivery``, the
  event in ``X-GitHub-Event`` (and the payload's ``action``). A ``ping`` (sent when a
  webhook is created) is answered and starts nothing.
- The generic one: ``X-Agenthost-Signature-256``, an optional ``X-Agenthost-Delivery``
  id and ``X-Agenthost-Event``. Without a delivery id the body's SHA-256 is the key:
  a request replayed byte for byte is ignored, and so is a second, identical one that
  was meant (a sender that repeats a payload on purpose gives each its own id).

The signature is compared in constant time (``hmac.compare_digest``) before anything
of the body is read: a sender without the secret learns nothing but the refusal.

The template language is deliberately tiny: ``{pull_request.title}`` inserts a value
of the payload by its dotted path (a number indexes a list: ``{commits.0.id}``),
``{{`` and ``}}`` are braces, and there is nothing else: no expressions, no attribute
access, no conversions or format specs (``str.format`` would let a template read an
object's attributes, a Jinja template runs code). A template is then data, checked
once when the hook is added, and there is no code to run and nothing to sandbox. Each
inserted value is made safe text (:func:`agenthost.textsafe.escape`: terminal and bidi
controls shown as escapes, newline and tab kept) and cut to :data:`FIELD_LIMIT`
characters; the whole message to :data:`MESSAGE_LIMIT`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from agenthost.errors import ConfigError, HookRefused
from agenthost.textsafe import LINES, escape

MAX_BODY: Final = 512 * 1024
"""The largest delivery accepted (GitHub caps its payloads at 25 MB, but a pull
request's or a push's is a few KiB to a few hundred)."""
FIELD_LIMIT: Final = 4000
"""Characters of one inserted value at most (a pull request's body is often long)."""
MESSAGE_LIMIT: Final = 20_000
"""Characters of the rendered message at most."""
TEMPLATE_LIMIT: Final = 10_000
"""Characters of a template at most."""
DELIVERY_LIMIT: Final = 200
"""Characters of a delivery id at most (GitHub's are UUIDs)."""

GITHUB_SIGNATURE: Final = "x-hub-signature-256"
GITHUB_DELIVERY: Final = "x-github-delivery"
GITHUB_EVENT: Final = "x-github-event"
GENERIC_SIGNATURE: Final = "x-agenthost-signature-256"
GENERIC_DELIVERY: Final = "x-agenthost-delivery"
GENERIC_EVENT: Final = "x-agenthost-event"
_PREFIX: Final = "sha256="
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DELIVERY: Final = re.compile(r"[\x21-\x7e]{1,200}")  # DELIVERY_LIMIT

Scheme: TypeAlias = Literal["github", "generic"]


def signature(secret: bytes, body: bytes) -> str:
    """The signature header's value for ``body``: ``sha256=`` and the hex HMAC-SHA256
    of the raw bytes keyed with ``secret`` (as GitHub computes it)."""
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delivery whose signature is good: its scheme, its key (the delivery id, else
    ``sha256:`` and the body's digest), its event and action ("" when none), and the
    payload (a JSON object)."""

    scheme: Scheme
    key: str
    event: str
    action: str
    payload: dict[str, Any]

    @property
    def is_ping(self) -> bool:
        """GitHub's ``ping``: answered, starts nothing."""
        return self.event == "ping"

    def detail(self) -> dict[str, str]:
        """What a run records of its delivery (no payload: it may be large and is the
        sender's)."""
        return {"scheme": self.scheme, "event": self.event, "action": self.action}


def check_size(length: int) -> None:
    """HookRefused 413 for a body (or a ``Content-Length``) over :data:`MAX_BODY`."""
    if length > MAX_BODY:
        raise HookRefused(413, "too_large", f"the body is over {MAX_BODY} bytes")


def verify(headers: Mapping[str, str], body: bytes, secret: bytes) -> Delivery:
    """The delivery of a request (``headers`` with lower-case names) once its
    signature is the HMAC of ``body`` with ``secret``.

    HookRefused: 413 a body too large, 401 no signature, two, a malformed or a wrong
    one, 400 a body that is not a JSON object or a malformed delivery id or event.
    The signature is checked before the body is parsed."""
    check_size(len(body))
    github, generic = headers.get(GITHUB_SIGNATURE), headers.get(GENERIC_SIGNATURE)
    if github is not None and generic is not None:
        raise HookRefused(401, "bad_signature", "two signature headers: send one")
    given = github if github is not None else generic
    if given is None:
        raise HookRefused(
            401,
            "no_signature",
            "no X-Hub-Signature-256 or X-Agenthost-Signature-256 header",
        )
    given = given.strip()
    if not (given.startswith(_PREFIX) and _HEX.fullmatch(given[len(_PREFIX) :].lower())):
        raise HookRefused(401, "bad_signature", "the signature is not sha256=<64 hex digits>")
    expected = signature(secret, body)
    if not hmac.compare_digest(
        expected.encode(), (_PREFIX + given[len(_PREFIX) :].lower()).encode()
    ):
        raise HookRefused(401, "bad_signature", "the signature does not match")
    scheme: Scheme = "github" if github is not None else "generic"
    payload = _json_object(body)
    names = (
        (GITHUB_DELIVERY, GITHUB_EVENT) if scheme == "github" else (GENERIC_DELIVERY, GENERIC_EVENT)
    )
    delivery, event = headers.get(names[0]), headers.get(names[1])
    if delivery is not None and not _DELIVERY.fullmatch(delivery.strip()):
        raise HookRefused(400, "bad_delivery", "the delivery id is not 1-200 printable characters")
    if event is not None and not _NAME.fullmatch(event.strip()):
        raise HookRefused(400, "bad_event", "the event is not 1-64 letters, digits, '_' or '-'")
    action = payload.get("action")
    key = delivery.strip() if delivery is not None else "sha256:" + hashlib.sha256(body).hexdigest()
    return Delivery(
        scheme,
        key,
        event.strip() if event is not None else "",
        action if isinstance(action, str) and _NAME.fullmatch(action) else "",
        payload,
    )


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise HookRefused(400, "not_json", "the body is not JSON (UTF-8)") from None
    except RecursionError:  # nesting deeper than the parser goes
        raise HookRefused(400, "not_json", "the body nests too deep") from None
    if not isinstance(value, dict):
        raise HookRefused(400, "not_object", "the body must be a JSON object")
    return value


# --- event filters -------------------------------------------------------------------


def parse_event(text: str) -> str:
    """An event filter as given (``--event``): ``EVENT`` or ``EVENT.ACTION``, each
    1-64 letters, digits, ``_`` or ``-``; ConfigError otherwise."""
    parts = text.split(".")
    if len(parts) > 2 or not all(_NAME.fullmatch(p) for p in parts):
        raise ConfigError(
            f"invalid event {text!r}",
            hint="write EVENT or EVENT.ACTION, e.g. pull_request or pull_request.opened",
        )
    return text


def wanted(events: Iterable[str], event: str, action: str) -> bool:
    """Whether a hook with these event filters takes a delivery of ``event`` (and
    ``action``): no filter takes every event; ``pull_request`` any of its actions;
    ``pull_request.opened`` that action only."""
    filters = list(events)
    if not filters:
        return True
    return any(f == event or (action and f == f"{event}.{action}") for f in filters)


# --- the template --------------------------------------------------------------------

Part: TypeAlias = str | tuple[str, ...]
"""A literal text, or the dotted path of a value to insert."""


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: its text and its parts."""

    text: str
    parts: tuple[Part, ...]

    def paths(self) -> list[str]:
        """The dotted paths it inserts, in order."""
        return [".".join(p) for p in self.parts if isinstance(p, tuple)]


_TOKEN: Final = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_SEGMENT: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")


def parse_template(text: str) -> Template:
    """The template of ``text``; ConfigError naming the first fault (a brace alone,
    an empty ``{}``, a path that is not dotted names and numbers, a template too
    long or empty)."""
    if not text.strip():
        raise ConfigError("the template is empty", hint="e.g. 'Review {pull_request.html_url}'")
    if len(text) > TEMPLATE_LIMIT:
        raise ConfigError(f"the template is over {TEMPLATE_LIMIT} characters")
    parts: list[Part] = []
    literal: list[str] = []
    last = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[last : match.start()])
        last = match.end()
        token = match.group()
        if token in ("{{", "}}"):
            literal.append(token[0])
            continue
        path = match.group(1)
        if path is None:
            raise ConfigError(
                f"a {token!r} alone at character {match.start() + 1} of the template",
                hint="write {{ or }} for a brace",
            )
        segments = tuple(path.split("."))
        if not all(_SEGMENT.fullmatch(s) for s in segments):
            raise ConfigError(
                f"{{{path}}} at character {match.start() + 1} is not a dotted path",
                hint="a field is names and list indexes joined by dots, e.g. "
                "{pull_request.title} or {commits.0.id}; nothing else is evaluated",
            )
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(segments)
    literal.append(text[last:])
    if any(literal):
        parts.append("".join(literal))
    return Template(text, tuple(parts))


def _lookup(payload: Any, path: tuple[str, ...]) -> Any:
    value = payload
    for segment in path:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            raise HookRefused(
                422, "missing_field", f"the payload has no {'.'.join(path)} (the template's)"
            )
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:  # numbers, true/false/null, objects and arrays: as JSON
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) > FIELD_LIMIT:
        text = text[:FIELD_LIMIT] + f"[... {len(text) - FIELD_LIMIT} characters cut]"
    return escape(text, keep=LINES)


def render(template: Template, payload: Mapping[str, Any]) -> str:
    """The message ``template`` makes of ``payload``; HookRefused 422 when a field it
    names is missing. Literal text is the user's; inserted values are made safe."""
    out = [
        part if isinstance(part, str) else _text(_lookup(payload, part)) for part in template.parts
    ]
    message = "".join(out)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + f"\n[... {len(message) - MESSAGE_LIMIT} characters cut]"
    return message


__all__ = [
    "MAX_BODY",
    "Delivery",
    "Template",
    "check_size",
    "parse_event",
    "parse_template",
    "render",
    "signature",
    "verify",
    "wanted",
]
