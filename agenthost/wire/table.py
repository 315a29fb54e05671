"""A service's message table: what its requests and answers are, as data. Sans-IO.

Host and daemon speak one envelope (:mod:`agenthost.wire.codec`); what differs is the
table: the request types, the payload model of each request and of its response, and
the kinds of frames a client receives. From the table come the three things every
service needs and that used to be written once per service:

* :meth:`MessageTable.validate`: a request's type and payload, checked, with the error
  codes and texts of the protocol (``unknown_type``, ``invalid_payload``);
* :meth:`MessageTable.decode_frame`: the client's decoder, liberal in what it accepts
  (frames of protocol 1.0 hosts, escaped lone surrogates, kinds it does not know);
* :meth:`MessageTable.json_schema`: the JSON Schema of the whole table, published for
  clients in other languages (``agenthost schema``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Final, Generic, TypeVar, Union, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.json_schema import JsonSchemaMode

from agenthost.errors import ErrorCode, ProtocolError
from agenthost.models import HistoryEntry
from agenthost.wire.codec import Request, RequestError, describe_validation, short_text

T = TypeVar("T", bound=StrEnum)
"""The service's request types."""
F = TypeVar("F")
"""What :meth:`MessageTable.decode_frame` gives: the union of the service's frame models."""

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


class MessageTable(Generic[T, F]):
    """The messages of one service (host or daemon).

    ``requests`` and ``responses`` map each request type to its payload models (a
    response of None carries no payload); ``frames`` maps each ``kind`` a client of the
    service receives to its model (``response``, ``event``, and the daemon's
    ``notice``). ``peer`` names the service in errors ("malformed frame from host");
    ``logger`` is where frames the liberal pass had to bend are reported.

    For the published schema only: ``since`` maps request types added after the first
    version to the version that added them; ``values`` names the open sets of strings
    a client meets in fields typed ``str`` (event types, states), as known today.
    """

    def __init__(
        self,
        *,
        service: str,
        peer: str,
        version: str,
        types: type[T],
        requests: Mapping[T, type[BaseModel]],
        responses: Mapping[T, type[BaseModel] | None],
        frames: Mapping[str, type[BaseModel]],
        logger: str,
        since: Mapping[str, str] | None = None,
        values: Mapping[str, type[StrEnum]] | None = None,
    ) -> None:
        missing = {str(t) for t in types} ^ set(map(str, requests)) | (
            {str(t) for t in types} ^ set(map(str, responses))
        )
        if missing:  # pragma: no cover - a coding error, caught at import
            raise ValueError(f"message table {service!r}: types without a model {missing}")
        if "response" not in frames or "event" not in frames:  # pragma: no cover
            raise ValueError(f"message table {service!r}: needs response and event frames")
        self.service = service
        self.log = logging.getLogger(logger)
        self.peer = peer
        self.version = version
        self.types = types
        self.requests: Mapping[T, type[BaseModel]] = dict(requests)
        self.responses: Mapping[T, type[BaseModel] | None] = dict(responses)
        self.frames: Mapping[str, type[BaseModel]] = dict(frames)
        self.since: Mapping[str, str] = dict(since or {})
        self.values: Mapping[str, type[StrEnum]] = dict(values or {})
        # The union of the frame models, told apart by ``kind``: built at run time,
        # so typed Any (decode_frame's F says what comes out). Its validator is built
        # when a first frame is decoded: a service never decodes its own frames.
        union: Any = Union.__getitem__(tuple(self.frames.values()))
        tagged: Any = Annotated[union, Field(discriminator="kind")]
        self.frame_adapter: TypeAdapter[Any] = TypeAdapter(
            tagged, config=ConfigDict(defer_build=True)
        )
        """Validates a frame of one of the service's kinds in one parse (the hot path)."""

    def build(self) -> None:
        """Build now every model of the table and the frame validator, which are
        otherwise built when first used: for a process that forks services or clients
        (what it builds before the fork, they share)."""
        models = [*self.requests.values(), *self.frames.values()]
        models += [m for m in self.responses.values() if m is not None]
        for model in dict.fromkeys(models):
            model.model_rebuild()
        self.frame_adapter.rebuild()

    # --- the service's side -----------------------------------------------------------

    def validate(self, request: Request) -> tuple[T, BaseModel]:
        """The request's message type and its validated payload model.

        Raise :class:`~agenthost.wire.codec.RequestError` (``unknown_type`` or
        ``invalid_payload``), echoing the request's type and id.
        """
        try:
            mtype = self.types(request.type)
        except ValueError:
            raise RequestError(
                f"unknown message type: {request.type}",
                code=ErrorCode.UNKNOWN_TYPE,
                request_type=request.type,
                request_id=request.id,
            ) from None
        try:
            return mtype, self.requests[mtype].model_validate(request.payload or {})
        except ValidationError as exc:
            raise RequestError(
                f"invalid payload for {mtype}: {describe_validation(exc)}",
                code=ErrorCode.INVALID_PAYLOAD,
                request_type=request.type,
                request_id=request.id,
            ) from None

    # --- the client's side ------------------------------------------------------------

    def decode_frame(self, frame: bytes) -> F | None:
        """Decode a frame received from the service (without its newline).

        Frames of this package's services take one validating parse. Anything else goes
        through a liberal second pass: frames without ``kind`` (hosts of protocol 1.0 as
        first published), escaped lone surrogates (``"\\ud800"``, which other encoders
        send and pydantic's parser refuses), and ``chat_entry`` objects of another shape
        are accepted. A ``kind`` this table does not know gives None: the protocol tells
        clients to ignore it (a later minor version may add kinds). Raise ProtocolError,
        saying what is wrong, if the frame is none of these.
        """
        try:
            return cast(F, self.frame_adapter.validate_json(frame))
        except ValidationError:
            pass
        return self._decode_liberally(frame)

    def _decode_liberally(self, frame: bytes) -> F | None:
        # Off the hot path: only frames our own services never send get here, so the
        # extra parse costs nothing to them.
        try:
            # json.loads, unlike pydantic's parser, takes escaped lone surrogates;
            # decode explicitly (bytes would be guessed UTF-16/32).
            obj = json.loads(frame.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ProtocolError(
                f"malformed frame from {self.peer}: not JSON ({short_text(exc, 120)})"
            ) from None
        if not isinstance(obj, dict):
            raise ProtocolError(
                f"malformed frame from {self.peer}: a JSON {type(obj).__name__}, not an object"
            )
        if "kind" not in obj:
            # The reference host of protocol 1.0 sends no ``kind``: only its responses
            # carry ``success``.
            obj["kind"] = "response" if "success" in obj else "event"
        kind = obj["kind"]
        if isinstance(kind, str) and kind not in self.frames:
            self.log.debug("frame of an unknown kind %r ignored", kind[:40])
            return None
        if kind == "event" and obj.get("chat_entry") is not None:
            _tolerate_chat_entry(obj, self.log)
        try:
            return cast(F, self.frame_adapter.validate_python(obj))
        except ValidationError as exc:
            raise ProtocolError(
                f"malformed frame from {self.peer}: {describe_validation(exc)}"
            ) from None

    # --- for clients in other languages -----------------------------------------------

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of the table, as one document.

        ``messages`` gives, per request type, the schema of its request ``payload``
        and of its response ``payload`` (null: the response has none) and, for types
        added later, the version ``since``; ``frames`` the schema of each kind of frame
        a client receives; ``request`` the request envelope; ``error_codes`` the
        response codes; ``values`` the known values of open string fields. Every model
        is defined once under ``$defs``. Keys are sorted, so the document changes only
        when the protocol does.
        """
        wanted: list[tuple[type[Any], JsonSchemaMode]] = [(Request, "validation")]
        wanted += [(model, "serialization") for model in self.frames.values()]
        wanted += [(model, "validation") for model in self.requests.values()]
        wanted += [(m, "serialization") for m in self.responses.values() if m is not None]
        # Request is a dataclass, not a model: an adapter of each gives one document
        # with every definition once (as models_json_schema does for models only).
        refs, top = TypeAdapter.json_schemas(
            [(_key(cls), mode, TypeAdapter(cls)) for cls, mode in dict.fromkeys(wanted)],
            by_alias=True,
        )

        def ref(model: type[Any] | None, mode: JsonSchemaMode) -> Any:
            return None if model is None else refs[(_key(model), mode)]

        document: dict[str, Any] = {
            "$schema": JSON_SCHEMA_DIALECT,
            "title": f"agenthost {self.service} protocol",
            "description": (
                f"Messages of the agenthost {self.service} protocol, version "
                f"{self.version}: one JSON object per line. Generated from the models "
                "by `agenthost schema`; do not edit."
            ),
            "version": self.version,
            "request": ref(Request, "validation"),
            "frames": {kind: ref(model, "serialization") for kind, model in self.frames.items()},
            "messages": {
                str(mtype): {
                    "request": ref(self.requests[mtype], "validation"),
                    "response": ref(self.responses[mtype], "serialization"),
                }
                | ({"since": self.since[mtype]} if mtype in self.since else {})
                for mtype in self.types
            },
            "error_codes": [str(code) for code in ErrorCode],
            "values": {name: [str(v) for v in enum] for name, enum in self.values.items()},
            "$defs": top.get("$defs", {}),
        }
        sorted_document: dict[str, Any] = _sorted(document)
        return sorted_document

    def json_schema_text(self) -> str:
        """:meth:`json_schema` as the checked-in file holds it: indent 2, a final newline."""
        return json.dumps(self.json_schema(), indent=2, ensure_ascii=False) + "\n"


def _key(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _sorted(value: Any) -> Any:
    """``value`` with every object's keys sorted, and the ``required`` lists too: the
    order fields are declared in is not part of the protocol."""
    if isinstance(value, dict):
        out = {k: _sorted(value[k]) for k in sorted(value)}
        required = out.get("required")
        if isinstance(required, list) and all(isinstance(r, str) for r in required):
            out["required"] = sorted(required)
        return out
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _tolerate_chat_entry(event: dict[str, Any], log: logging.Logger) -> None:
    """A ``chat_entry`` that is not a HistoryEntry (e.g. Go field names, ``Role`` and
    ``Content``) must not end the stream: the event keeps its place, the entry goes
    into ``data`` as JSON text and ``chat_entry`` is left out."""
    entry = event["chat_entry"]
    try:
        HistoryEntry.model_validate(entry)
    except ValidationError:
        pass
    else:
        return
    event["chat_entry"] = None
    if event.get("data") is None:
        event["data"] = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
    keys = sorted(entry)[:8] if isinstance(entry, dict) else type(entry).__name__
    log.info(
        "chat_entry of an unknown shape at offset %s, delivered as raw data (%s)",
        event.get("offset"),
        keys,
    )
